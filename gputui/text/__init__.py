"""Words and numbers for people, shared by the CLI and the dashboard: words (the vocabulary both front
ends use) over units (sizes, durations, percentages). Escaping untrusted text is the model's
(gputui/model/textsafe.py): the model escapes what it decodes. Importers name the module they use.
"""

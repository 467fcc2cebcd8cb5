"""Words and numbers for people, shared by the CLI and the dashboard: words (the vocabulary both front
ends use) over units (sizes, durations, percentages); beside the words, clients (what gputui's two
HTTP servers allow a client and say of one). Escaping untrusted text is the model's
(gputui/model/textsafe.py): the model escapes what it decodes. Importers name the module they use.
"""

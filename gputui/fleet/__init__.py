"""The fleet: hosts, their links and their latest samples, as the commands and the dashboard read them.

fleet (every host's session, and what is asked of all of them) drives session (one host's task, link,
state and history), which takes its samples through deltas (whole or delta, parsed where they
changed), news (what a sample says that the last did not), idle (who holds GPU memory at 0 % SM,
since when) and history (bounded rings of readings). pacing (when the samples come slower) stands
beside them. Importers name the module they use.
"""

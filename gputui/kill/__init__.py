"""The operator's side of a kill: the plan (what to signal, what to leave, why), its one owner
(operate.py: plan, confirm, send, judge, log) and the audit log. Headless: no Textual, no CLI, no SSH;
the dashboard and `gputui clean` both drive it.
"""

"""The operator's side of a kill: the plan (plan/: what to signal, what to leave, why), its one owner
(operate.py: plan, confirm, send, judge, log) and the audit log (auditlog.py writes it, auditpath.py
opens its path safely, auditowner.py names the process behind each record, unfinished.py reads what
an earlier run left). Headless: no Textual, no CLI, no SSH; the dashboard and `gputui clean` both
drive it.
"""

"""A kill run on this host: a plan's staged signals and verification (reaper.py), one signal
(signal_run.py), a GPU reset (reset.py), and what they share: the records they obey (orders.py),
the scope of a rescan (scope.py), the checks before a signal (checks.py), the one place a signal
leaves the probe (signals.py), the run's record (state.py) and its verdicts (verdicts.py).

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

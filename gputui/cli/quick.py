"""The quick commands: `snapshot`, `clean` and `wait`, which scripts run between two benchmark runs,
so that their start and exit are part of the gap they exist to shorten. Each one's sample interval
(its fleet's; this machine's probe is started ahead with it: cli/entry.py, cli/main.py), and the
words of a command line that end a head start. Imports nothing: cli/entry.py reads it first thing.
"""

from __future__ import annotations

QUICK_EXIT = ("snapshot", "clean", "wait")
# The sample interval of each command's fleet; `wait`'s --interval defaults to it.
INTERVALS = {"snapshot": 1.0, "clean": 1.0, "wait": 0.25}
# Words that end the head start's reading: another probe (a demo, a config, an interval), a help, a
# recording (no probe at all), a hub (its hosts are not this machine).
NO_HEAD_START = ("--demo", "--config", "--interval", "-h", "--help", "--replay", "--at", "--hub")

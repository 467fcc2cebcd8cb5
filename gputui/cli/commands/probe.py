"""`gputui probe`: the probe itself, as gputui runs it on each host (JSON lines on stdout). Its options
are the probe's own (gputui/probe/main.py): it runs alone on monitored hosts, with the stdlib only."""

from __future__ import annotations

from ...probe.main import main


def run(argv: list[str]) -> int:
    return main(argv)

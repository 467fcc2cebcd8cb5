"""`gputui snapshot`: one sample of each host, then exit (gputui/cli/snapshot.py); from a recording
with --replay (gputui/cli/replay.py)."""

from __future__ import annotations

import argparse

from .. import argtypes, options
from . import command_parser


def parser() -> argparse.ArgumentParser:
    return command_parser(
        "snapshot",
        "exit codes: 0 every host sampled (--watch: also ended by Ctrl+C); 1 a host down, or the "
        "output could not be written; 2 bad usage; 3 no NVIDIA driver or GPU; 129 hang-up, 143 SIGTERM "
        "(--watch)",
        options.add_hosts,
        options.add_hub,
        options.add_ascii,
        add_snapshot_arguments,
        options.add_idle_minutes,
        options.add_filters,
    )


def add_snapshot_arguments(p: argparse.ArgumentParser) -> None:
    """--json, --timeout, --watch, and --replay with --at."""
    options.flag(p, "--json", help="print versioned JSON (schema in README)")
    options.add_timeout(p)
    p.add_argument(
        "--watch",
        type=argtypes.interval,
        metavar="S",
        help="again every S seconds (0.1 to 3600) until Ctrl+C: in place on a terminal, else appended",
    )
    p.add_argument("--replay", metavar="FILE", help="from a recording (gputui record), not the hosts")
    p.add_argument(
        "--at",
        metavar="TIME",
        help="with --replay: the state at TIME (HH:MM[:SS], an ISO timestamp, +SECONDS; default: the end)",
    )


def run(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    # Imported now, not at the top: the fleet, the transport and asyncio load while this machine's
    # probe starts (the head start, gputui/cli/main.py), and a usage error needs none of them.
    if args.replay is not None or args.at is not None:
        from .. import replay

        return replay.snapshot_at(args)
    from .. import snapshot

    return snapshot.run(args)

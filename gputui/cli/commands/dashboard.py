"""`gputui [HOST ...]`: the dashboard (Textual), live on hosts or on a recording (--replay)."""

from __future__ import annotations

import argparse

from ... import __version__
from .. import argtypes, options
from . import commands_help

DASHBOARD_EXITS = """\
exit codes: 0 quit; 1 the demo did not start; 2 bad usage, a bad config, or not a terminal
(--force-tty); 4 refused (the demo's directory is not private); 129 the terminal hung up"""


def parser() -> argparse.ArgumentParser:
    p = argtypes.Parser(
        prog="gputui",
        description="Live GPU memory, utilization and device-file holders; staged kill-and-verify.",
        epilog=commands_help() + "\n\n" + DASHBOARD_EXITS,
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the epilog's table as written
    )
    options.add_hosts(p)
    options.add_hub(p)
    options.flag(p, "--read-only", help="watch only: no kill action anywhere")
    options.add_interval(p, None, "seconds between samples (0.1 to 3600)")
    options.flag(
        p,
        "--no-pace",
        help="keep the interval when the app cannot keep up with its hosts (by default the samples "
        "come slower then, up to 8 times, and the status line says so; 64 hosts or more)",
    )
    p.add_argument("--theme", metavar="NAME", help="colour theme (see themes/)")
    options.add_ascii(p)
    options.add_log(p, "audit log file (default: the user state dir)")
    p.add_argument(
        "--replay",
        metavar="FILE",
        help="the dashboard on a recording (gputui record): p pause, n step, , and . 10 s back and on, "
        "{ and } the start and the end, < and > speed",
    )
    options.flag(
        p,
        "--force-tty",
        help="draw even when stdin or stdout is not a terminal (it is refused otherwise, exit 2)",
    )
    options.add_idle_minutes(p)
    options.add_filters(p)
    p.add_argument("--version", action="version", version=f"gputui {__version__}")
    return p


def run(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    # Imported now, not at the top: Textual, the fleet and the transport are most of the dashboard's
    # start, and `gputui --help`, `--version` or a usage error need none of them.
    from .. import dashboard

    return dashboard.run(args)

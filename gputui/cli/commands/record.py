"""`gputui record FILE [HOST ...]`: every sample and plan event of the hosts into FILE, for --replay
(gputui/cli/record.py records; docs/RECORDING.md).

    gputui record FILE [HOST ...] [--demo] [--seconds S] [--max-bytes SIZE] [--interval S] [--log PATH]
"""

from __future__ import annotations

import argparse

from ...recording.format import DEFAULT_MAX_BYTES
from .. import argtypes, options
from . import command_parser, run_in

MAX_RECORD_SECONDS = 366 * 24 * 3600.0


def parser() -> argparse.ArgumentParser:
    p = command_parser(
        "record",
        "exit codes: 0 recorded until --seconds or Ctrl+C; 1 stopped early (the size cap, or FILE "
        "could not be written); 2 bad usage (FILE exists); 128+N ended by signal N",
        description="Record every sample and plan event of the hosts into FILE, for --replay.",
    )
    p.add_argument("file", metavar="FILE", help="the recording to write (gzip JSON lines; never overwritten)")
    options.add_hosts(p)
    options.add_ascii(p)
    p.add_argument(
        "--seconds",
        type=argtypes.seconds_upto(MAX_RECORD_SECONDS),
        metavar="S",
        help="stop after S seconds (default: at Ctrl+C)",
    )
    p.add_argument(
        "--max-bytes",
        type=argtypes.size,
        default=DEFAULT_MAX_BYTES,
        metavar="SIZE",
        help=f"stop when FILE reaches SIZE (default {DEFAULT_MAX_BYTES >> 20}MiB, at least 64KiB)",
    )
    options.add_interval(p, None, "seconds between samples (0.1 to 3600; default: the config's, else 1)")
    options.add_log(p, "the audit log whose new lines are recorded (default: the user's)")
    return p


def run(argv: list[str]) -> int:
    return run_in("record", parser().parse_args(argv))

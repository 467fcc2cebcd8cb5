"""`gputui record FILE [HOST ...]`: every sample and plan event of the hosts into FILE, for --replay
(gputui/cli/record.py records; docs/RECORDING.md).

    gputui record FILE [HOST ...] [--demo] [--seconds S] [--max-bytes SIZE] [--interval S] [--log PATH]
"""

from __future__ import annotations

import argparse

from ...recording.format import DEFAULT_MAX_BYTES
from .. import argtypes, options
from . import command_parser, runner

MAX_RECORD_SECONDS = 366 * 24 * 3600.0


def parser() -> argparse.ArgumentParser:
    return command_parser(
        "record",
        "exit codes: 0 recorded until --seconds or Ctrl+C; 1 stopped early (the size cap, or FILE "
        "could not be written); 2 bad usage (FILE exists); 128+N ended by signal N",
        _add_file,
        options.add_hosts,
        options.add_ascii,
        add_record_arguments,
        description="Record every sample and plan event of the hosts into FILE, for --replay.",
    )


def _add_file(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the recording to write (gzip JSON lines; never overwritten)")


def add_record_arguments(p: argparse.ArgumentParser) -> None:
    """How long and how much (--seconds, --max-bytes), how often, and which audit log."""
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


run = runner("record", parser)

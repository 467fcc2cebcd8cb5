"""Small values typed on a command line: argparse `type=` functions and the parsers they share.

A bad value raises argparse.ArgumentTypeError, which argparse prints as a usage message with exit
status 2 (README "Exit codes"); the parsers return None instead of raising. The sample interval's
bounds belong to the protocol (gputui/probe/wire.py), which the probe checks too.
"""

from __future__ import annotations

import argparse

from .probe.common import MAX_TIMEOUT
from .probe.wire import interval_problem

MAX_SECONDS = MAX_TIMEOUT  # the longest timeout (a kill plan's term_timeout and verify_timeout too)
MAX_INDEX_DIGITS = 18  # an index or PID this long is no index, and int() of thousands of digits fails


def _float(text: str, what: str = "a number of seconds") -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None


def seconds(text: str) -> float:
    """A timeout in seconds: more than 0, at most MAX_SECONDS (so not NaN, not infinite)."""
    value = _float(text)
    if not 0 < value <= MAX_SECONDS:  # NaN fails every comparison
        raise argparse.ArgumentTypeError(f"{text} s is out of range (more than 0, at most {MAX_SECONDS:g})")
    return value


def interval(text: str) -> float:
    """Seconds between samples: from wire.MIN_INTERVAL to wire.MAX_INTERVAL."""
    value = _float(text)
    problem = interval_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(f"interval {text} {problem}")
    return value


def parse_index(text: str) -> int | None:
    """`text` as a whole number >= 0 written in ASCII digits (a GPU index, a PID), else None.

    Only 0-9: `str.isdigit()` is also true for "²" or "٣", which int() then refuses or reads as
    another number. No sign, no spaces, no underscores, at most MAX_INDEX_DIGITS digits."""
    if not text or len(text) > MAX_INDEX_DIGITS or not text.isascii() or not text.isdigit():
        return None
    return int(text)


def pid(text: str) -> int:
    """A process ID: a whole number > 0 in ASCII digits."""
    value = parse_index(text)
    if value is None or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a PID")
    return value


def parse_index_arg(text: str) -> int:
    """A GPU index on the command line: a whole number >= 0 in ASCII digits."""
    value = parse_index(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a GPU index")
    return value

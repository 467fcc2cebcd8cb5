"""Small values typed on a command line: argparse `type=` functions and the parsers they share.

A bad value raises argparse.ArgumentTypeError, which argparse prints as a usage message with exit
status 2 (README "Exit codes"); the parsers return None instead of raising. The sample interval's
bounds belong to the protocol (gputui/probe/wire.py), which the probe checks too.

The rule every numeric flag keeps: written in ASCII decimal (no NaN, no infinity, no `1_000`, no
digits of other scripts), checked against its documented range before it is used, and never
converted where it may overflow (a float of 400 digits is infinite, and int() of it raises).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable
from typing import NoReturn

from ..config.file import MAX_IDLE_MINUTES
from ..model.textsafe import cut, printable
from ..probe.common import MAX_TIMEOUT
from ..probe.wire import interval_problem

MAX_SECONDS = MAX_TIMEOUT  # the longest timeout (a kill plan's term_timeout and verify_timeout too)
MAX_INDEX_DIGITS = 18  # an index or PID this long is no index, and int() of thousands of digits fails
MAX_SIZE = 1 << 60  # bytes: an exbibyte, the model's bound on any size a probe reports
_DECIMAL = re.compile(r"[+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# Up to E: the top of the range a refusal names ("1 byte to 1 EiB") can be written as it says it.
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGTPE]i?B?|B)?\s*", re.IGNORECASE)
SHOWN = 40  # cells of a bad value quoted back in its error (cut with a mark past that)


def shown(text: str) -> str:
    """A bad value as its error quotes it: `'8 parsecs'`, control characters escaped, a long one cut
    with a mark (the user's own text, never a silent slice of it)."""
    return f"'{cut(text, SHOWN)}'"


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors show the user's words escaped, as every message does:
    argparse quotes an unknown option as it was typed (`unrecognized arguments: --x\x1b[2J`), and an
    ESC there would reach the terminal."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {printable(message)}\n")


def _float(text: str, what: str = "a number of seconds") -> float:
    """`text` as a finite number >= 0 written in ASCII decimal (a huge one is infinite: refused)."""
    value = float(text) if _DECIMAL.fullmatch(text) else math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{shown(text)} is not {what}")
    return value


def seconds(text: str) -> float:
    """A timeout in seconds: more than 0, at most MAX_SECONDS."""
    value = _float(text)
    if not 0 < value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{text} s is out of range (more than 0, at most {MAX_SECONDS:g})")
    return value


def seconds_upto(limit: float) -> Callable[[str], float]:
    """Seconds from 0 (at once) to `limit`."""

    def parse(text: str) -> float:
        value = _float(text)
        if not 0 <= value <= limit:
            raise argparse.ArgumentTypeError(f"{text} s is out of range (0 to {limit:g})")
        return value

    return parse


def interval(text: str) -> float:
    """Seconds between samples: from wire.MIN_INTERVAL to wire.MAX_INTERVAL."""
    value = _float(text)
    problem = interval_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(f"interval {text} {problem}")
    return value


def minutes(text: str) -> float:
    """Minutes for the idle-holder threshold (--idle-minutes): more than 0, at most a week, as the
    config's [idle] minutes."""
    value = _float(text, "a number of minutes")
    if not 0 < value <= MAX_IDLE_MINUTES:
        raise argparse.ArgumentTypeError(
            f"{text} minutes is out of range (more than 0, at most {MAX_IDLE_MINUTES})"
        )
    return value


def whole(low: int, high: int, what: str) -> Callable[[str], int]:
    """A whole number from `low` to `high`, in ASCII digits (`what`: "a percentage", ...)."""

    def parse(text: str) -> int:
        value = parse_index(text)
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{shown(text)} is not {what} from {low} to {high}")
        return value

    return parse


def size(text: str) -> int:
    """Bytes: `8GiB`, `8G`, `512MiB`, `1.5T`, `1EiB`, `4096`; binary units, as nvidia-smi counts.
    More than 0, at most MAX_SIZE."""
    match = _SIZE.fullmatch(text) if text.isascii() else None
    if not match:
        raise argparse.ArgumentTypeError(f"{shown(text)} is not a size (e.g. 8GiB, 512MiB)")
    unit = (match.group(2) or "B").upper()[:1]
    scale = {"B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}[unit]
    value = float(match.group(1)) * scale  # 400 digits: infinite, refused below (int() would raise)
    if not 1 <= value <= MAX_SIZE:
        raise argparse.ArgumentTypeError(f"{cut(text, SHOWN)} is out of range (1 byte to 1 EiB)")
    return int(value)


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


def audit_log(text: str) -> str:
    """--log PATH, for every command that takes it: a file that can be an audit log, or a usage error
    saying why not. Refused: an empty path (it names no file: pathlib reads it as the working
    directory, "audit log . is not a regular file"); a path whose directory does not exist (gputui
    makes the directories of its default log only, never those of a path typed: a typo must not grow
    a tree); a path on a file system that keeps no files (/proc, /sys: no blocks, so a plan was
    refused later for want of free space). The rest (a symlink, a FIFO, another user's file) is
    auditpath.open_log's to refuse, where the log is opened."""
    if not text:
        raise argparse.ArgumentTypeError("'' names no file (leave --log out for the default log)")
    parent = os.path.dirname(text) or "."
    if not os.path.isdir(parent):
        what = "is not a directory" if os.path.lexists(parent) else "does not exist"
        raise argparse.ArgumentTypeError(
            f"{shown(text)}: its directory {shown(parent)} {what} (gputui makes only the default "
            "log's directories: make it first, or leave --log out)"
        )
    try:
        blocks = os.statvfs(parent).f_blocks
    except OSError:
        return text  # not readable here: said where the log is opened
    if blocks == 0:
        raise argparse.ArgumentTypeError(
            f"{shown(text)} is on a file system that keeps no files (as /proc or /sys): name a file on a disk"
        )
    return text


def listen_address(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[IPV6]:PORT` or `:PORT` (every interface); port 0 takes a free one."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isascii() or not port.isdecimal() or int(port) > 65535:
        raise argparse.ArgumentTypeError(
            f"{cut(text, 80)!r} is not ADDR:PORT (e.g. 127.0.0.1:9842, [::1]:9842, :9842)"
        )
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "0.0.0.0", int(port)

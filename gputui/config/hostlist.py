"""Hostlist expressions as Slurm writes them: `gpu[001-128]`, `node[1-4,7]-ib`, `rack[1-2]-n[01-08]`,
`a1,b[2-3]`.

A bracket holds numbers and ranges (`lo-hi`), comma-separated; a range keeps the width of its low
bound (`[001-128]` gives gpu001 ... gpu128, `[8-10]` gives 8, 9, 10). Several bracket groups give
every combination, the leftmost varying slowest (as `scontrol show hostnames` lists them). Commas
outside brackets separate expressions. Stdlib only, below the config (which checks its `[groups]`
table with it) and the inventory (gputui/inventory: where hosts are listed) that expands them.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Iterable, Iterator
from typing import TypeAlias

# The sources a host spec may name, `@KIND:ARG` (gputui/inventory/sources.py).
SOURCES = ("file", "ssh", "slurm", "slurm-job", "ansible", "prometheus", "kube", "group")

# The hosts of one command, all its specs together (gputui/inventory/sources.py keeps the count);
# `[0-999999999]` is a typo, not a fleet. An expression is counted before any name is made.
MAX_HOSTS = 100_000
MAX_DIGITS = 18  # of a number in brackets: no node is numbered past 10**18 (int() of 4,300 digits raises)
MAX_NAME = 1024  # characters of a name an expression makes, `user@` and `:port` included
SHOWN = 60  # characters of the user's text that a message quotes
SHOWN_PATH = 256  # of a path (its last part says most)

MAX_WORD = 255  # characters of a host name, address or user (a DNS name is at most 253)
# What no host name, address or user holds: controls (C0, DEL, and C1: U+009B is CSI to a terminal),
# format characters (bidi overrides and isolates, zero-width ones: they reorder or hide what is
# shown), surrogates (what Python makes of bytes that are no UTF-8, in an argument or a file read
# with surrogateescape), line and paragraph separators; and U+FFFD, what those bytes become where
# text was decoded with "replace". Every assigned character gputui.probe.wire's printable() escapes
# is among them, so a name that passes is shown as it is, and IDNA never meets what it cannot encode.
_UNSAFE_CATEGORIES = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))
UNSAFE_WORDS = "contains control or invisible characters"

_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")  # ASCII digits only: '²' is a digit to str.isdigit
_Range: TypeAlias = tuple[int, int, int]  # low, high, width (the zero padding)
_Piece: TypeAlias = str | list[_Range]


class HostlistError(ValueError):
    """An expression that is not a hostlist; the message says where and what."""


def quoted(text: str, most: int = SHOWN) -> str:
    """The user's text as a message quotes it: escaped as a Python literal (no control character
    reaches the terminal), its first `most` characters and how long it was."""
    if len(text) <= most:
        return repr(text)
    return f"{text[:most]!r}... ({len(text):,} characters)"


def quoted_path(path: object) -> str:
    """A path as a message quotes it (`quoted`), up to SHOWN_PATH characters."""
    return quoted(str(path), SHOWN_PATH)


def unsafe_characters(text: str) -> bool:
    """Whether `text` holds a character no host name may (_UNSAFE_CATEGORIES, U+FFFD)."""
    if text.isascii():  # the usual name: no lookup a character
        return any(c < " " or c == "\x7f" for c in text)
    return any(c == "\ufffd" or unicodedata.category(c) in _UNSAFE_CATEGORIES for c in text)


def word_problem(value: str) -> str | None:
    """The one rule for a host name, address or user, wherever it comes from (the command line, the
    config file, a host file, an ssh config, kube, ansible, slurm, Prometheus, a hub): it ends up as
    an SSH argument, in suggested commands and on the terminal, so it is one printable word. What is
    wrong with it, in words that follow it ("'a b' contains spaces"); None when nothing."""
    if not value:
        return "is empty"
    if len(value) > MAX_WORD:
        return f"is longer than {MAX_WORD} characters"
    if unsafe_characters(value):  # before spaces: U+0085 and U+2028 are white space to str.isspace
        return UNSAFE_WORDS
    if any(c.isspace() for c in value):
        return "contains spaces"
    if value.startswith("-"):
        return "starts with '-'"
    return None


def shortened(text: str) -> str:
    """The user's text as a message names it (a spec before its colon), cut as `quoted` cuts it;
    not escaped: the message is, as a whole (gputui.inventory.base.InventoryError)."""
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}... ({len(text):,} characters)"


def too_many_hosts(where: str) -> str:
    """The words for hosts past MAX_HOSTS, whoever lists them (the sources, an ssh config, a hub)."""
    return f"{where}: more than {MAX_HOSTS:,} hosts in all, the most one command takes"


def is_hostlist(text: str) -> bool:
    """Whether `text` is meant as a hostlist expression (a bracket group of numbers, or a top-level
    comma) rather than one host. `[::1]`, `user@[fe80::1]:22` (IPv6 in brackets) are hosts."""
    if "," in _outside_brackets(text):
        return True
    for inside in re.findall(r"\[([^\]]*)\]", text):
        if ":" not in inside:
            return True
    return "[" in text and ":" not in text  # an unclosed `gpu[1-`: a hostlist with an error


def _outside_brackets(text: str) -> str:
    depth, out = 0, []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(char)
    return "".join(out)


def split_top(text: str) -> list[str]:
    """The comma-separated parts of `text` outside brackets: `a[1,2],b` -> [`a[1,2]`, `b`]."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def size(text: str, limit: int = MAX_HOSTS) -> int:
    """How many names the expression makes (a name repeated counted each time), counted without
    making them: the product of each part's bracket sizes, summed over its parts; anything past
    `limit` reads as limit + 1. Raises HostlistError for an expression that is not one."""
    return _count(_parts(text), limit)


def expand(text: str, limit: int = MAX_HOSTS) -> list[str]:
    """Every host name of the expression, in its order, each once. Raises HostlistError, also for
    one that makes more than `limit` names (counted before any is made)."""
    parts = _parts(text)
    if _count(parts, limit) > limit:
        raise HostlistError(f"{quoted(text)} names more than {limit:,} hosts")
    out: dict[str, None] = {}
    for pieces in parts:
        out.update(dict.fromkeys(_names(pieces)))
    return list(out)


def _parts(text: str) -> list[list[_Piece]]:
    parts: list[list[_Piece]] = []
    for part in split_top(text.strip()):
        if not part.strip():
            raise HostlistError(f"{quoted(text)}: an empty name between commas")
        pieces = _pieces(part.strip())
        longest = sum(len(p) if isinstance(p, str) else max(_width(r) for r in p) for p in pieces)
        if longest > MAX_NAME:
            raise HostlistError(f"{quoted(part)} makes names longer than {MAX_NAME:,} characters")
        parts.append(pieces)
    return parts


def _count(parts: list[list[_Piece]], limit: int) -> int:
    total = 0
    for pieces in parts:
        product = 1
        for piece in pieces:
            if isinstance(piece, list):
                product = min(product * sum(high - low + 1 for low, high, _ in piece), limit + 1)
        total = min(total + product, limit + 1)
    return total


def _width(item: _Range) -> int:
    _low, high, width = item
    return max(width, len(str(high)))


def _pieces(part: str) -> list[_Piece]:
    """`gpu[1-2]-ib` -> ["gpu", [(1, 2, 1)], "-ib"], in one pass over the text."""
    pieces: list[_Piece] = []
    at = 0
    while at < len(part):
        open_at = part.find("[", at)
        close_at = part.find("]", at)
        if open_at < 0:
            if close_at >= 0:
                raise HostlistError(f"{quoted(part)}: ']' without '['")
            pieces.append(part[at:])
            break
        if 0 <= close_at < open_at:
            raise HostlistError(f"{quoted(part)}: ']' without '['")
        if open_at > at:
            pieces.append(part[at:open_at])
        if close_at < 0:
            raise HostlistError(f"{quoted(part)}: '[' without a closing ']'")
        inside = part[open_at + 1 : close_at]
        if "[" in inside:
            raise HostlistError(f"{quoted(part)}: brackets do not nest")
        pieces.append(_ranges_in(part, inside))
        at = close_at + 1
    return pieces


def _ranges_in(part: str, inside: str) -> list[_Range]:
    if not inside.strip():
        raise HostlistError(f"{quoted(part)}: empty brackets")
    out: list[_Range] = []
    for item in inside.split(","):
        match = _RANGE.fullmatch(item.strip())
        if match is None:
            raise HostlistError(
                f"{quoted(part)}: {quoted(item.strip())} in brackets is not a number or a range like 001-128"
            )
        low_text, high_text = match.group(1), match.group(2)
        if max(len(low_text), len(high_text or "")) > MAX_DIGITS:
            raise HostlistError(f"{quoted(part)}: a number in brackets has more than {MAX_DIGITS} digits")
        low = int(low_text)
        high = low if high_text is None else int(high_text)
        if high < low:
            raise HostlistError(f"{quoted(part)}: the range {item.strip()} goes down")
        out.append((low, high, len(low_text)))  # zero padding: the low bound's width, as Slurm does
    return out


def _names(pieces: list[_Piece]) -> Iterator[str]:
    """Every combination, the leftmost bracket varying slowest."""
    choices = [[p] if isinstance(p, str) else list(_numbers(p)) for p in pieces]
    for combination in itertools.product(*choices):
        yield "".join(combination)


def _numbers(ranges: list[_Range]) -> Iterator[str]:
    for low, high, width in ranges:
        for n in range(low, high + 1):
            yield f"{n:0{width}d}"


# A name's last number and what follows it, matched on the name reversed: one pass, not a search
# from every position.
_LAST_NUMBER_REVERSED = re.compile(r"([^0-9]*)([0-9]+)")


def _last_number(name: str) -> tuple[str, str, str] | None:
    """(prefix, digits, suffix) of `name`'s last number; None without one, or with one too long to
    range (it is listed as it is)."""
    match = _LAST_NUMBER_REVERSED.match(name[::-1])
    if match is None or len(match.group(2)) > MAX_DIGITS:
        return None
    return name[: len(name) - match.end()], match.group(2)[::-1], match.group(1)[::-1]


def collapse(names: Iterable[str]) -> str:
    """The shortest-ish expression that expands to exactly these names (as a set): the last number of
    each name is ranged, names alike but for it share a bracket. `gpu001..gpu128` -> `gpu[001-128]`."""
    numbered: dict[tuple[str, str], list[str]] = {}
    plain: list[str] = []
    for name in dict.fromkeys(names):
        numbered_as = _last_number(name)
        if numbered_as is None:
            plain.append(name)
            continue
        prefix, digits, suffix = numbered_as
        numbered.setdefault((prefix, suffix), []).append(digits)
    groups: dict[tuple[str, str, int], set[int]] = {}
    for (prefix, suffix), texts in numbered.items():
        # Padded numbers (a leading zero) share a bracket only with numbers of their width; a number
        # without one joins them when it is as wide (gpu099 and gpu100 are gpu[099-100]).
        padded = {len(d) for d in texts if d.startswith("0") and len(d) > 1}
        for digits in texts:
            width = len(digits) if len(digits) in padded else 0
            groups.setdefault((prefix, suffix, width), set()).add(int(digits))
    parts = sorted(plain)
    # A name's brackets in the order of their numbers (gpu[001-999] before gpu[1000-1002]).
    in_order = sorted(groups.items(), key=lambda group: (group[0][0], group[0][1], min(group[1])))
    for (prefix, suffix, width), numbers in in_order:
        ranges = _ranges(sorted(numbers), width)
        if len(ranges) == 1 and "-" not in ranges[0]:
            parts.append(f"{prefix}{ranges[0]}{suffix}")
        else:
            parts.append(f"{prefix}[{','.join(ranges)}]{suffix}")
    return ",".join(parts)


def _ranges(numbers: list[int], width: int) -> list[str]:
    out: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        low, high = f"{start:0{width}d}", f"{prev:0{width}d}"
        out.append(low if start == prev else f"{low}-{high}")
        if n is not None:
            start = prev = n
    return out

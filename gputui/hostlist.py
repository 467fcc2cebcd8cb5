"""Hostlist expressions as Slurm writes them: `gpu[001-128]`, `node[1-4,7]-ib`, `rack[1-2]-n[01-08]`,
`a1,b[2-3]`.

A bracket holds numbers and ranges (`lo-hi`), comma-separated; a range keeps the width of its low
bound (`[001-128]` gives gpu001 ... gpu128, `[8-10]` gives 8, 9, 10). Several bracket groups give
every combination, the leftmost varying slowest (as `scontrol show hostnames` lists them). Commas
outside brackets separate expressions. Stdlib only, below the config (which checks its `[groups]`
table with it) and the inventory (gputui/inventory: where hosts are listed) that expands them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# The sources a host spec may name, `@KIND:ARG` (gputui/inventory/sources.py).
SOURCES = ("file", "ssh", "slurm", "slurm-job", "ansible", "group")

MAX_HOSTS = 100_000  # one expression; `[0-999999999]` is a typo, not a fleet


class HostlistError(ValueError):
    """An expression that is not a hostlist; the message says where and what."""


_RANGE = re.compile(r"^([0-9]+)(?:-([0-9]+))?$")


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


def expand(text: str, limit: int = MAX_HOSTS) -> list[str]:
    """Every host name of the expression, in its order, each once. Raises HostlistError."""
    out: dict[str, None] = {}
    for part in split_top(text.strip()):
        if not part.strip():
            raise HostlistError(f"{text!r}: an empty name between commas")
        pieces = _pieces(part.strip())
        total = 1
        for piece in pieces:
            total *= len(piece) if isinstance(piece, list) else 1
        if total + len(out) > limit:
            raise HostlistError(f"{text!r} names more than {limit:,} hosts")
        for name in _product(pieces):
            out.setdefault(name, None)
    return list(out)


def _pieces(part: str) -> list[str | list[str]]:
    """`gpu[1-2]-ib` -> ["gpu", ["1", "2"], "-ib"]."""
    pieces: list[str | list[str]] = []
    rest = part
    while rest:
        open_at = rest.find("[")
        close_at = rest.find("]")
        if open_at < 0:
            if close_at >= 0:
                raise HostlistError(f"{part!r}: ']' without '['")
            pieces.append(rest)
            break
        if 0 <= close_at < open_at:
            raise HostlistError(f"{part!r}: ']' without '['")
        if open_at:
            pieces.append(rest[:open_at])
        end = rest.find("]", open_at)
        if end < 0:
            raise HostlistError(f"{part!r}: '[' without a closing ']'")
        inside = rest[open_at + 1 : end]
        if "[" in inside:
            raise HostlistError(f"{part!r}: brackets do not nest")
        pieces.append(_numbers(part, inside))
        rest = rest[end + 1 :]
    return pieces


def _numbers(part: str, inside: str) -> list[str]:
    if not inside.strip():
        raise HostlistError(f"{part!r}: empty brackets")
    out: list[str] = []
    for item in inside.split(","):
        match = _RANGE.match(item.strip())
        if match is None:
            raise HostlistError(
                f"{part!r}: {item.strip()!r} in brackets is not a number or a range like 001-128"
            )
        low_text, high_text = match.group(1), match.group(2)
        low = int(low_text)
        high = low if high_text is None else int(high_text)
        if high < low:
            raise HostlistError(f"{part!r}: the range {item.strip()} goes down")
        if high - low >= MAX_HOSTS:
            raise HostlistError(f"{part!r}: the range {item.strip()} names more than {MAX_HOSTS:,} hosts")
        width = len(low_text)  # zero padding: the low bound's width, as Slurm does
        out.extend(f"{n:0{width}d}" for n in range(low, high + 1))
    return out


def _product(pieces: list[str | list[str]]) -> Iterable[str]:
    names = [""]
    for piece in pieces:
        if isinstance(piece, str):
            names = [n + piece for n in names]
        else:
            names = [n + p for n in names for p in piece]
    return names


_NUMBERED = re.compile(r"^(.*?)([0-9]+)([^0-9]*)$")


def collapse(names: Iterable[str]) -> str:
    """The shortest-ish expression that expands to exactly these names (as a set): the last number of
    each name is ranged, names alike but for it share a bracket. `gpu001..gpu128` -> `gpu[001-128]`."""
    numbered: dict[tuple[str, str], list[str]] = {}
    plain: list[str] = []
    for name in dict.fromkeys(names):
        match = _NUMBERED.match(name)
        if match is None:
            plain.append(name)
            continue
        prefix, digits, suffix = match.groups()
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

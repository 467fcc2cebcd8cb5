"""Formatting numbers for people: bytes, durations, percentages, GPU index lists. Shared by the CLI and the UI.

Bytes are binary and say so (`40.0 GiB`, `615 MiB`, `0 B`): one decimal under 100 of a unit, none
from 100 on, and zero is always `0` and its unit. GiB is the largest unit: GPU memory is read in GiB
(`1123 GiB` for eight H200s, not `1.1 TiB`).

Exact memory (the dashboard's `m`) is whole MiB, as nvidia-smi prints them, without digit grouping so
the figure reads and greps the same as there: `118234 MiB`, `61234/143771 MiB` (bytes // MiB: a part
of a MiB is not counted, as nvidia-smi does not).
"""

from __future__ import annotations

from collections.abc import Collection

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
_UNITS = ((1, "B"), (KIB, "KiB"), (MIB, "MiB"), (GIB, "GiB"))


def _unit(value: int) -> tuple[int, str]:
    """The unit `value` is written in: the largest one in which it reads as at least 1 (1024 MiB,
    after rounding, is written `1.0 GiB`)."""
    chosen = _UNITS[0]
    for unit in _UNITS[1:]:
        if round(value / chosen[0]) < 1024:
            break
        chosen = unit
    return chosen


def _number(x: float) -> str:
    """`0`, `9.4`, `99.9`, `100`, `140`: one decimal below 100 (after rounding), none from there."""
    if x == 0:
        return "0"
    if round(x, 1) < 100:
        return f"{x:.1f}"
    return f"{x:.0f}"


def fmt_bytes(value: int | None) -> str:
    if value is None:
        return "-"
    size, name = _unit(value)
    if size == 1:
        return f"{value} B"
    return f"{_number(value / size)} {name}"


def fmt_bytes_of(used: int | None, total: int | None) -> str:
    """`59.7/140 GiB`: a part and its whole in one unit (the whole's); each in its own unit when the
    part is too small to read in the whole's (`600 MiB/140 GiB`, never `0.6/140 GiB`)."""
    if used is None or total is None:
        return "-"
    size, name = _unit(total)
    if used != 0 and _unit(used)[0] != size:
        return f"{fmt_bytes(used)}/{fmt_bytes(total)}"
    if size == 1:
        return f"{used}/{total} B"
    return f"{_number(used / size)}/{_number(total / size)} {name}"


def fmt_mib(value: int | None) -> str:
    """`118234 MiB`: exact, whole MiB."""
    return "-" if value is None else f"{value // MIB} MiB"


def fmt_mib_of(used: int | None, total: int | None) -> str:
    """`61234/143771 MiB`: a part and its whole, exact, in whole MiB."""
    if used is None or total is None:
        return "-"
    return f"{used // MIB}/{total // MIB} MiB"


def fmt_memory(value: int | None, exact: bool = False) -> str:
    """Memory as the dashboard shows it: GiB with one decimal (fmt_bytes), or exact MiB."""
    return fmt_mib(value) if exact else fmt_bytes(value)


def fmt_memory_of(used: int | None, total: int | None, exact: bool = False) -> str:
    return fmt_mib_of(used, total) if exact else fmt_bytes_of(used, total)


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def elapsed_shown(seconds: float | None) -> tuple[str, float]:
    """A process's age as the tables show it, and the seconds those words stand for (what a sort
    by it compares: ages that read the same tie). At a resolution that holds still between two
    refreshes: whole seconds below a minute, then minutes (`7m`), hours and minutes (`3h07m`), days
    and hours (`2d03h`). Its age moves with every sample and is carried once it moved by a hundredth
    of itself (gputui/probe/delta.py): seconds after the first minute would jump by several."""
    if seconds is None:
        return "-", -1.0
    s = int(max(seconds, 0.0))
    if s < 60:
        return f"{s}s", float(s)
    if s < 3600:
        return f"{s // 60}m", float(s - s % 60)
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m", float(s - s % 60)
    return f"{s // 86400}d{s % 86400 // 3600:02d}h", float(s - s % 3600)


def fmt_elapsed(seconds: float | None) -> str:
    """A process's age at a resolution that holds still (`elapsed_shown`): `42s`, `7m`, `3h07m`."""
    return elapsed_shown(seconds)[0]


def fmt_percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def fmt_power(draw: float | None, limit: float | None) -> str:
    """`112/700W`; the draw alone where the limit is not known (`112W`: a source without one, such
    as dcgm-exporter's series, or a limit of 0); `-` without a draw."""
    if draw is None:
        return "-"
    return f"{draw:.0f}/{limit:.0f}W" if limit else f"{draw:.0f}W"


def fmt_load(value: float | None) -> str:
    """A load average as `uptime` writes it: `0.52`, `12.25`."""
    return "-" if value is None else f"{value:.2f}"


def index_runs(indexes: Collection[int]) -> list[tuple[str, range]]:
    """GPU indexes as people write them: [0, 1] -> `0`, `1`; [0, 1, 2, 3] -> `0-3` (three or more
    in a row make a range)."""
    runs: list[tuple[str, range]] = []
    ordered = sorted(set(indexes))
    start = 0
    while start < len(ordered):
        end = start
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        first, last = ordered[start], ordered[end]
        if end - start >= 2:
            runs.append((f"{first}-{last}", range(first, last + 1)))
        else:
            runs.extend((str(i), range(i, i + 1)) for i in ordered[start : end + 1])
        start = end + 1
    return runs


def fmt_gpus(indexes: Collection[int]) -> str:
    """`0,1`, `0-3`, `-` for none: GPU indexes in a cell."""
    return ",".join(text for text, _ in index_runs(indexes)) or "-"

"""Formatting numbers for people: bytes, durations, percentages. Shared by the CLI and the UI."""

from __future__ import annotations

MIB = 1 << 20
GIB = 1 << 30


def fmt_bytes(value: int | None) -> str:
    if value is None:
        return "-"
    if value >= 100 * GIB:
        return f"{value / GIB:.0f}G"
    if value >= GIB:
        return f"{value / GIB:.1f}G"
    if value >= MIB:
        return f"{value / MIB:.0f}M"
    if value > 0:
        return f"{value / 1024:.0f}K"
    return "0"


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


def fmt_percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"

"""Plain-text formatting for the UI: ages, meters, sparklines, and untrusted strings.

Bytes, durations and percentages come from gputui.text.units, shared with the CLI.

Everything here returns `str`; widgets wrap the result in `rich.text.Text` (or `Content`) with a
style from the theme, so nothing is ever parsed as markup.
"""

from __future__ import annotations

from collections.abc import Sequence

from gputui.model.textsafe import printable


def safe(text: str | None, limit: int = 400) -> str:
    """An untrusted string made displayable: control characters become visible escapes (`\\e`,
    `\\x07`), as in the CLI (gputui.model.textsafe). Long strings are cut at `limit` characters.

    `Text` alone would keep an ESC byte, which then reaches the terminal (or an SVG screenshot,
    making it invalid XML)."""
    if not text:
        return ""
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return printable(text)


def age(seconds: float | None) -> str:
    """How old a sample is, coarse enough that it does not change on every redraw."""
    if seconds is None:
        return "-"
    if seconds < 1.0:
        return "<1s"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h"


def meter(fraction: float | None, width: int) -> tuple[str, str]:
    """A bar `width` cells wide, as (filled, empty) parts so each can have its own style.

    Eighth blocks give 8 steps per cell; any non-zero value shows at least a sliver."""
    if fraction is None or width <= 0:
        return "", " " * max(width, 0)
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    if fraction > 0 and eighths == 0:
        eighths = 1
    full, part = divmod(eighths, 8)
    filled = "█" * full + ("▏▎▍▌▋▊▉"[part - 1] if part else "")
    return filled, "·" * (width - len(filled))


_SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float], width: int, window: int, top: float = 100.0) -> str:
    """The last `window` values in `width` cells, oldest left; each cell shows its bucket's peak.

    The window is fixed so the time scale never changes: while history is shorter, the line grows from
    the right and the left stays blank. The peak (not the mean) keeps a one-sample burst visible."""
    if width <= 0:
        return ""
    recent = list(values)[-window:]
    per_cell = window / width
    cells: list[str] = []
    missing = window - len(recent)
    for i in range(width):
        lo = int(i * per_cell) - missing
        hi = int((i + 1) * per_cell) - missing
        if hi <= 0:
            cells.append(" ")
            continue
        peak = max(recent[max(lo, 0) : max(hi, lo + 1)], default=0.0)
        level = int(max(0.0, min(1.0, peak / top)) * (len(_SPARK) - 1) + 0.5)
        cells.append(_SPARK[level])
    return "".join(cells)


def key_name(display: str) -> str:
    """A key as gputui writes it everywhere (help, footer, README): `ctrl+p`, `enter`, not Textual's
    `^p` and `⏎`."""
    if display == "⏎":
        return "enter"
    if display.startswith("^") and len(display) > 1:
        return "ctrl+" + display[1:]
    if len(display) > 1 and display[0] == "f" and display[1:].isdigit():
        return display.upper()  # F1-F12, as htop and keyboards write them
    return display

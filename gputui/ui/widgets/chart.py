"""Charts over time with an axis: a few rows of stacked eighth blocks, one sample a cell, the newest
at the right; the scale's top and bottom labelled at the left, the time span under it.

    100% ┤        ▂▆█
         │      ▁▅████
      0% ┤▁▁▁▂▃▅██████
         └────────────
          -2m        now

`chart_lines` draws it as plain lines (the tests read them); `chart` styles them for a screen. A
reading at the bottom of the scale and a missing one are both a blank column; anything above the
bottom shows at least its lowest eighth. In ASCII mode the
blocks become `_.-:=+*#` and the lines `|`, `+` and `-` on their way out (gputui/text/glyphs.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from rich.style import Style
from rich.table import Table
from rich.text import Text

from gputui.text.units import fmt_duration

__all__ = [
    "Scale",
    "Series",
    "chart",
    "chart_lines",
    "nice_bytes",
    "nice_top",
    "span_words",
    "stacked",
    "time_lines",
]

_BLOCKS = "▁▂▃▄▅▆▇█"


class Scale:
    """The range a chart shows, and how its ends are labelled."""

    __slots__ = ("bottom", "label", "top")

    def __init__(self, top: float, label: Callable[[float], str], bottom: float = 0.0) -> None:
        self.top = top if top > bottom else bottom + 1.0
        self.bottom = bottom
        self.label = label


def nice_top(peak: float, floor: float = 0.0) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten at or above `peak` (and `floor`): a scale
    that reads at a glance and does not change with every sample."""
    peak = max(peak, floor)
    if peak <= 0 or not math.isfinite(peak):
        return max(floor, 1.0)
    power = 10.0 ** math.floor(math.log10(peak))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if step * power >= peak * (1 - 1e-9):
            return step * power
    return 10.0 * power


def nice_bytes(peak: float) -> float:
    """`nice_top` in the unit the size is said in (a round number of GiB, MiB or KiB), so the
    scale reads `500 GiB`, not `466 GiB`."""
    for unit in (1 << 40, 1 << 30, 1 << 20, 1 << 10):
        if peak >= unit:
            return nice_top(peak / unit) * unit
    return nice_top(peak, 1.0)


def span_words(seconds: float) -> str:
    """How far back the left edge is: `-45s`, `-4m58s`, `-2h05m`."""
    return "-" + fmt_duration(max(seconds, 0.0)) if seconds >= 1 else "now"


def _cells(value: float | None, scale: Scale, height: int) -> list[str]:
    """One column, top row first."""
    if value is None or value != value:
        return [" "] * height
    fraction = (value - scale.bottom) / (scale.top - scale.bottom)
    eighths = round(max(0.0, min(1.0, fraction)) * height * 8)
    if value > scale.bottom and eighths == 0:
        eighths = 1  # anything above the bottom shows
    column = []
    for row in range(height - 1, -1, -1):
        part = max(0, min(8, eighths - row * 8))
        column.append(_BLOCKS[part - 1] if part else " ")
    return column


def chart_lines(
    values: Sequence[float | None],
    times: Sequence[float],
    width: int,
    height: int,
    scale: Scale,
    *,
    gutter: int = 0,
    time_axis: bool = True,
) -> list[str]:
    """`height` rows of the last `width` values (one a cell, the newest at the right), the axis
    under them and the time span under that (not with `time_axis` off: charts stacked over one
    axis); every line as wide as the others, the labels at least `gutter` cells wide."""
    width, height = max(width, 1), max(height, 1)
    shown = list(values)[-width:]
    columns = [[" "] * height] * (width - len(shown)) + [_cells(v, scale, height) for v in shown]
    top, bottom = scale.label(scale.top), scale.label(scale.bottom)
    gutter = max(len(top), len(bottom), gutter)
    lines = []
    for row in range(height):
        label = top if row == 0 else bottom if row == height - 1 else ""
        tick = "┤" if label else "│"
        lines.append(f"{label:>{gutter}} {tick}" + "".join(column[row] for column in columns))
    if time_axis:
        lines += time_lines(times, len(shown), width, gutter)
    return lines


def time_lines(times: Sequence[float], samples: int, width: int, gutter: int) -> list[str]:
    """The axis under a chart of `samples` (of `times`, the last ones) in `width` cells, and the
    time span under it."""
    lines = [" " * gutter + " └" + "─" * width]
    times = list(times)[-min(width, samples) :] if samples else []
    left = span_words(times[-1] - times[0]) if len(times) > 1 else "now"
    # The span under the oldest sample's column, or as near it as leaves room for "now".
    start = max(0, min(width - samples, width - len(left) - 4))
    if left != "now" and start + len(left) + 4 <= width:
        axis = " " * start + left + "now".rjust(width - start - len(left))
    else:
        axis = "now".rjust(width)
    lines.append(" " * (gutter + 2) + axis)
    return lines


def chart(
    values: Sequence[float | None],
    times: Sequence[float],
    width: int,
    height: int,
    scale: Scale,
    *,
    style: Style | str = "",
    axis: Style | str = "",
    gutter: int = 0,
    time_axis: bool = True,
) -> Text:
    """`chart_lines` as one Text: the blocks in `style`, the labels and axis in `axis`."""
    lines = chart_lines(values, times, width, height, scale, gutter=gutter, time_axis=time_axis)
    text = Text(no_wrap=True, overflow="crop")
    cut = len(lines[0]) - max(width, 1)  # the gutter and the axis line before the first column
    for i, line in enumerate(lines):
        if i:
            text.append("\n")
        if i < height:
            text.append(line[:cut], axis)
            text.append(line[cut:], style)
        else:
            text.append(line, axis)
    return text


class Series:
    """One chart of a stack: its label, readings, scale and style, and what it reads now."""

    __slots__ = ("label", "now", "scale", "style", "values")

    def __init__(
        self, label: str, values: Sequence[float | None], scale: Scale, style: Style | str, now: str = ""
    ) -> None:
        self.label, self.values, self.scale, self.style, self.now = label, values, scale, style, now


def _gutter(series: Sequence[Series], least: int) -> int:
    """The scale labels' width: every chart's columns line up."""
    ends = [s.scale.label(end) for s in series for end in (s.scale.top, s.scale.bottom)]
    return max([least, *(len(end) for end in ends)])


def stacked_cells(series: Sequence[Series], width: int, label_width: int = 10, gutter: int = 6) -> int:
    """How many cells (samples, one a cell) `stacked` charts in `width`: what is left beside the
    labels, the scales and the readings now; 10 at the least."""
    now_width = max((len(s.now) for s in series), default=0)
    return max(width - label_width - _gutter(series, gutter) - 2 - now_width - 3, 10)


def stacked(
    series: Sequence[Series],
    times: Sequence[float],
    width: int,
    *,
    label: Style | str = "",
    axis: Style | str = "",
    label_width: int = 10,
    gutter: int = 6,
    height: int = 2,
) -> Table:
    """Charts over one time axis, each `height` rows, its label at the left and its reading now at
    the right; `width`: the cells of the whole, labels included (`stacked_cells` of them chart)."""
    now_width = max((len(s.now) for s in series), default=0)
    gutter = _gutter(series, gutter)
    span = stacked_cells(series, width, label_width, gutter)
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=label_width, style=label, no_wrap=True)
    grid.add_column(width=span + gutter + 2, no_wrap=True)
    grid.add_column(width=now_width, justify="right", no_wrap=True)
    shown = min(span, len(times))
    for s in series:
        drawn = chart(
            s.values, times, span, height, s.scale, style=s.style, axis=axis, gutter=gutter, time_axis=False
        )
        grid.add_row(Text(s.label), drawn, Text(s.now))
    grid.add_row(
        Text(""), Text("\n".join(time_lines(times, shown, span, gutter)), axis, no_wrap=True), Text("")
    )
    return grid

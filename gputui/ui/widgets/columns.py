"""A table's columns, and which of them fit a width, each with its width (the rules are said in
table.py's docstring: priorities, the sort column, a flex column's room, cut words and whole
numbers)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from rich.console import JustifyMethod


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: how wide, which is dropped first, how it sorts, whether it may be cut."""

    key: str
    label: str
    width: int | None = None  # None: as wide as the widest cell
    priority: int = 0  # 0: always shown; higher numbers are dropped first when space runs out
    nominal: int = 12  # the width to plan for when `width` is None
    descending: bool = False  # the first sort on this column puts the largest values on top
    justify: JustifyMethod = "left"
    flex: bool = False  # takes the width the other columns leave (at least `nominal`); words only
    sortable: bool = True  # counted by the 1-9 sort keys
    cut: bool = False  # words, which give way with an ellipsis; False: numbers, never cut (it grows)
    # A flex column: the width it grows to before the columns of priority `room_priority` come (at
    # most what its cells need: their length, or, when `whole`, what keeps their numbers whole).
    room: int | None = None
    room_priority: int = 0
    whole: bool = False

    @property
    def planned(self) -> int:
        return self.width if self.width is not None else self.nominal


SORT_KEYS = "1234567890"  # the tenth sortable column is 0


def label_width(column: Column, sortable: bool) -> int:
    """The header's width: the label, and room for the sort arrow in a table that sorts."""
    arrow = 1 if sortable and column.sortable else 0
    return len(column.label) + arrow


def column_bounds(column: Column, content: int, sortable: bool) -> tuple[int, int]:
    """(the least, the most) width `column` takes, its widest cell `content` wide."""
    label = label_width(column, sortable)
    if column.flex:
        least = max(column.nominal, label)
        return least, least
    if not column.cut:  # numbers: as wide as the widest, always
        width = max(column.width or 0, content, label)
        return width, width
    if column.width is not None:
        width = max(column.width, label)
        return width, width
    want = max(content or column.nominal, label)
    return min(want, max(column.nominal, label)), want


def fit_columns(
    columns: Sequence[Column],
    width: int,
    *,
    pad: int,
    content: Mapping[str, int],
    sort: str | None,
    sortable: bool,
) -> tuple[Column, ...]:
    """The columns that fit in `width` cells, most important first, each with its width: up to
    the first column that does not fit, the sort column right after those that always show; a
    flex column's room before the columns of its room's priority; then words without a fixed
    width grow towards their widest cell, and a flex column takes the rest. `pad`: the padding
    of a column (both sides); `content`: the widest cell of each measured column; `sort`: the
    column the table is sorted by (None: none, or the table does not sort)."""
    budget = width - 1  # the vertical scrollbar
    bounds = {c.key: column_bounds(c, content.get(c.key, 0), sortable) for c in columns}
    widths: dict[str, int] = {}

    def rank(column: Column) -> tuple[int, int]:
        if column.priority == 0:
            return (0, 0)
        return (0, 1) if column.key == sort else (column.priority, 0)

    # (rank, is a room, column), in order; a room comes after the columns of its priority.
    steps = [(rank(c), False, c) for c in columns]
    steps += [((c.room_priority, 2), True, c) for c in columns if c.flex and c.room is not None]
    for _, room, column in sorted(steps, key=lambda step: (step[0], step[1])):
        if room:
            if column.key not in widths:
                continue
            want = min(column.room or 0, content.get(column.key, 0)) - widths[column.key]
            more = max(0, min(budget, want))
            widths[column.key] += more
            budget -= more
            if more < want:
                break  # the room is not all there: no column after it fits
            continue
        need = bounds[column.key][0] + pad
        if column.priority > 0 and need > budget:
            if column.key == sort:
                continue  # even the sort column does not fit: the title says what sorts
            break
        widths[column.key] = bounds[column.key][0]
        budget -= need
    by_priority = sorted(columns, key=rank)
    for column in by_priority:
        if column.key in widths and budget > 0:
            more = min(budget, bounds[column.key][1] - widths[column.key])
            widths[column.key] += more
            budget -= more
    for column in columns:
        if column.flex and column.key in widths:
            # The rest; or, when even the columns that always show do not fit, less than its
            # nominal width (down to its label) rather than a table wider than its pane.
            least = label_width(column, sortable)
            widths[column.key] = max(least, widths[column.key] + budget)
            break
    return tuple(replace(c, width=widths[c.key]) for c in columns if c.key in widths)

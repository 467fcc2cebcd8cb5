"""What a table cell shows, and how it is cut to a width without lying: a `Cell` is rich
Text with a sort key, the numbers it must keep whole and an optional shorter form; `fit` cuts words
with an ellipsis before any kept number and leaves a number out whole rather than cut it; `fit_end`
keeps the end; `dim` greys a row (a host that is not live). KeyedTable (table.py) lays cells out.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from typing import Any, Protocol

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text

from gputui.model.textsafe import ELLIPSIS

_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
Part = tuple[str, "str | Style"] | tuple[str, "str | Style", bool]  # (text, style[, keep whole])


class Styled(Protocol):
    """What builds cells: a widget that gives the Rich style of a component class and says whether
    memory shows in exact MiB (a KeyedTable, or the GPU view's text), so a table's cells can be
    shown elsewhere."""

    exact_memory: bool

    def style_of(self, name: str) -> Style: ...


class Cell(Text):
    """Text that knows how it sorts (`DataTable.sort` hands its key function cells, not rows) and
    which of its characters are numbers that must never be cut (`keep`: (start, end) offsets)."""

    __slots__ = ("keep", "short", "sort_key")

    def __init__(self, text: str = "", style: str | Style = "", sort_key: Any = None) -> None:
        super().__init__(text, style=style, no_wrap=True, overflow="ellipsis", end="")
        self.sort_key = text.casefold() if sort_key is None else sort_key
        self.keep: tuple[tuple[int, int], ...] = ()
        # The same facts in fewer cells ("■2 ◇1" for "2 user  1 ghost"): what a column too narrow
        # for this cell shows, and fits in turn.
        self.short: Cell | None = None

    @classmethod
    def parts(cls, *parts: Part, sort_key: Any = None) -> Cell:
        """A cell from (text, style) pieces, e.g. a meter's filled and empty parts; a piece
        (text, style, True) is a number that a narrow column never cuts (see `fit`)."""
        cell = cls("", sort_key=sort_key if sort_key is not None else "")
        for part in parts:
            cell.add(*part)
        if sort_key is None:
            cell.sort_key = cell.plain.casefold()
        return cell

    @classmethod
    def numbers(cls, text: str | Text, style: str | Style = "") -> Cell:
        """A cell of words (and their styles) in which every number (`4121`, `1.5`, `12:01:03`)
        is kept whole."""
        rich = Text(text, style=style) if isinstance(text, str) else text
        cell = cls(sort_key=rich.plain.casefold())
        cell.append_text(rich)
        cell.keep = tuple(m.span() for m in _NUMBER.finditer(rich.plain))
        return cell

    def add(self, text: str, style: str | Style = "", keep: bool = False) -> Cell:
        """Append `text`; `keep`: it is a number, shown whole or not at all."""
        if not text:
            return self
        if keep:
            start = len(self)
            self.keep = (*self.keep, (start, start + len(text)))
        self.append(text, style or None)
        return self

    def signature(self) -> Hashable:
        short = self.short.signature() if self.short is not None else None
        return (self.plain, self.style, tuple(self.spans), short)

    def then(self, other: Text) -> Cell:
        """Append `other`, its styles and (a Cell's) numbers kept whole."""
        start = len(self.plain)
        self.append_text(other)
        if isinstance(other, Cell):
            self.keep = (*self.keep, *((a + start, b + start) for a, b in other.keep))
        return self

    def clone(self) -> Cell:
        """A copy to add to (its own spans and numbers; no short form)."""
        out = Cell(sort_key=self.sort_key)
        out.append_text(self)
        out.keep = self.keep
        out.justify = self.justify
        return out

    def with_short(self, short: Cell) -> Cell:
        """This cell, with `short` shown where it does not fit whole."""
        if short.plain != self.plain:
            self.short = short
        return self


def fit(cell: Cell, width: int) -> Cell:
    """`cell` in at most `width` cells, by the one rule of every table and the action log: words
    give way with an ellipsis, the numbers in `cell.keep` are never cut.

    In this order, until it fits: the words after the last number are cut at their end (down to
    " …"); the words before each number, the last first, are cut at their end, the space before the
    number kept (`memory he… 4121 …`); then the last number goes, whole, with what follows it (the
    words before it show the cut)."""
    if width <= 0 or cell.cell_len <= width:
        return cell
    if cell.short is not None:
        short = cell.short
        short.justify, short.sort_key = cell.justify, cell.sort_key
        return fit(short, width)
    segments = _segments(cell)
    while True:
        squeezed = _squeeze(segments, width)
        if squeezed is not None:
            out = Cell(sort_key=cell.sort_key)
            out.justify = cell.justify
            for text, keep in squeezed:
                start = len(out.plain)
                out.append_text(text)
                if keep:
                    out.keep = (*out.keep, (start, start + len(text.plain)))
            return out
        last = max((i for i, (_, keep) in enumerate(segments) if keep), default=None)
        if last is None:  # words alone always fit: the tail goes down to "…"
            break
        # The last number goes, whole, with what follows it; the words before it show the cut.
        before = segments[:last]
        if before and not before[-1][1]:
            words = before[-1][0].copy()
            words.append(ELLIPSIS)
            before[-1] = (words, False)
        else:
            before.append((Text(" " + ELLIPSIS), False))
        segments = before
    out = Cell(ELLIPSIS[:width], sort_key=cell.sort_key)
    out.justify = cell.justify
    return out


def whole_width(cell: Cell) -> int:
    """The fewest cells `fit` shows `cell` in with every number of it whole (its short form's, when it
    has one: what a narrow column shows): the words squeezed, down to their ellipses."""
    while cell.short is not None:
        cell = cell.short
    if not cell.keep:
        return min(cell.cell_len, 2)  # words: cut down to "x…", never blank beside the cut
    segments = _segments(cell)
    low, high = sum(t.cell_len for t, keep in segments if keep), cell.cell_len
    while low < high:  # _squeeze succeeds from some width on: the least such
        middle = (low + high) // 2
        if _squeeze(segments, middle) is None:
            low = middle + 1
        else:
            high = middle
    return low


def fit_end(cell: Cell, width: int) -> Cell:
    """`cell` in at most `width` cells, cut at its end only (a line of prose: the status line), between
    two words, so never inside a number; an ellipsis shows where."""
    if width <= 0 or cell.cell_len <= width:
        return cell
    plain = cell.plain
    at = 0
    used = 0
    while at < len(plain) and used + cell_len(plain[at]) <= width - 2:  # room for " …"
        used += cell_len(plain[at])
        at += 1
    for start, end in cell.keep:
        if start < at < end:
            at = start
    if 0 < at < len(plain) and not plain[at].isspace():  # at a word's end: `4× NVIDIA …`, not `4 …`
        at = plain.rfind(" ", 0, at) + 1 or at
    out = Cell(sort_key=cell.sort_key)
    out.append_text(cell[:at])
    out.rstrip()
    out.append(" " + ELLIPSIS if out.plain and out.plain[-1].isdigit() else ELLIPSIS)
    return out


def dim(row: Row, style: Style) -> Row:
    """`row` with every cell (and its short form) in `style` over its own colours: the row is from a
    sample that is not live (its host is down, stale or reconnecting)."""
    for cell in row.values():
        form: Cell | None = cell
        while form is not None:
            form.stylize(style)
            form = form.short
    return row


def _segments(cell: Cell) -> list[tuple[Text, bool]]:
    """The cell as alternating runs of words (False) and numbers (True), with their styles."""
    segments: list[tuple[Text, bool]] = []
    at = 0
    for start, end in sorted(cell.keep):
        if start > at:
            segments.append((cell[at:start], False))
        segments.append((cell[start:end], True))
        at = end
    if at < len(cell.plain):
        segments.append((cell[at:], False))
    return segments


def _squeeze(segments: list[tuple[Text, bool]], width: int) -> list[tuple[Text, bool]] | None:
    """Cut the words (never the numbers) until the whole fits in `width`; None if it cannot."""
    over = sum(t.cell_len for t, _ in segments) - width
    out = list(segments)
    last_number = max((i for i, (_, keep) in enumerate(out) if keep), default=-1)
    for i in reversed(range(len(out))):
        if over <= 0:
            break
        text, keep = out[i]
        if keep:
            continue
        # A space parts a number from the ellipsis that follows or comes before it: `4121 …`,
        # `memo… 4121`, never `4121…` (which reads as a number that was cut).
        after_number = i > 0 and out[i - 1][1]
        trail = 1 if i < last_number and text.plain.endswith(" ") else 0
        body = text[: len(text.plain) - trail] if trail else text.copy()
        size = max(2 if after_number else 1, body.cell_len - over)
        if size >= body.cell_len:
            continue
        body.truncate(size, overflow="ellipsis")
        if after_number and body.plain.startswith(ELLIPSIS):
            body = Text.assemble(" ", body[: len(body.plain) - 1], ELLIPSIS)
        elif after_number and body.plain.strip(" " + ELLIPSIS).isalpha() and body.cell_len <= 4:
            # `4125296 p…` reads as a number whose unit was cut (`2.1 Gi…`): the stub goes too.
            body = Text(" " + ELLIPSIS, end="")
        if trail:
            body.append(" ")
        over -= text.cell_len - body.cell_len
        out[i] = (body, False)
    return out if over <= 0 else None


Row = dict[str, Cell]  # a table's row: column key -> cell

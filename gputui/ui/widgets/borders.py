"""What a pane's border says: its title above, a note below (what sorts the rows, where its column
is hidden). Set as plain text (a str would be parsed as markup; a host name or a filter may hold
brackets), and only when it changed: a new title repaints the whole widget."""

from __future__ import annotations

from typing import Literal

from textual.content import Content
from textual.widget import Widget


def set_title(widget: Widget, title: str) -> None:
    _set_border(widget, "title", title)


def set_subtitle(widget: Widget, note: str) -> None:
    """The line on the pane's bottom border: the title above is long and a narrow pane cuts its end;
    this line is the note's own."""
    _set_border(widget, "subtitle", note)


def _set_border(widget: Widget, which: Literal["title", "subtitle"], text: str) -> None:
    mark = f"_gputui_{which}"  # a mark of ours on any widget: what was set last
    if getattr(widget, mark, None) != text:
        setattr(widget, mark, text)
        setattr(widget, f"border_{which}", Content(text))

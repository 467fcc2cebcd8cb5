"""The `/` filter input: filters as you type; enter keeps the filter, escape clears it.

The fleet and process tables read it in the filter language (gputui/views/filter.py: `user:alice
state:idle-held mem>40G`; a plain word searches as before); the action log as plain text. A filter
that cannot be read says why beside the box (`FilterProblem`), and the table keeps the last one that
could, so typing `mem>` on the way to `mem>40G` never empties it."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input, Static

PLACEHOLDER = (
    "a word, or user:alice state:idle-held host:gpu0* mem>40G -kind:monitor (enter: keep, esc: clear)"
)
LOG_PLACEHOLDER = "part of a log line (enter: keep, esc: clear)"


class FilterBar(Input):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "clear_filter", "Clear filter"),
    ]

    class Done(Message):
        """The operator left the filter (enter keeps the text, escape has cleared it)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(placeholder=PLACEHOLDER, id=id, compact=True)
        self.target = ""  # which pane the text filters: "procs", "fleet" or "log"

    def open(self, target: str, text: str) -> None:
        self.target = target
        self.placeholder = LOG_PLACEHOLDER if target == "log" else PLACEHOLDER
        self.value = text
        self.focus()

    def action_clear_filter(self) -> None:
        self.value = ""  # posts Changed, so the pane shows everything again
        self.post_message(self.Done())

    async def action_submit(self) -> None:
        self.post_message(self.Done())


class FilterProblem(Static):
    """Why the filter cannot be read (gputui.views.filter.FilterError's words), beside the box; empty
    and hidden while it can."""

    DEFAULT_CSS = """
    FilterProblem {
        width: auto;
        max-width: 70%;
        height: 1;
        color: $error;
        text-style: bold;
        display: none;
    }
    """

    def say(self, words: str) -> None:
        self.update(words)
        self.display = bool(words)

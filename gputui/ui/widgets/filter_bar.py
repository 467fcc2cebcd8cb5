"""The `/` filter input: filters as you type; enter keeps the filter, escape clears it."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input


class FilterBar(Input):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "clear_filter", "Clear filter"),
    ]

    class Done(Message):
        """The operator left the filter (enter keeps the text, escape has cleared it)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            placeholder="part of a command, user or PID (enter: keep, esc: clear)", id=id, compact=True
        )
        self.target = ""  # which pane the text filters: "procs", "fleet" or "log"

    def open(self, target: str, text: str) -> None:
        self.target = target
        self.value = text
        self.focus()

    def action_clear_filter(self) -> None:
        self.value = ""  # posts Changed, so the pane shows everything again
        self.post_message(self.Done())

    async def action_submit(self) -> None:
        self.post_message(self.Done())

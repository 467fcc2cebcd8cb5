"""The `/` filter input: filters as you type; enter keeps the filter, escape clears it.

Enter and escape are handled in turn with the typing, here, not as bindings the app runs when the
key has bubbled up to it: keys that come in one read (a paste, an SSH link) must find the box
closed after the enter, and those queued here before the focus moved are handed back to the app.

The fleet and process tables read it in the filter language (gputui/views/filter.py: `user:alice
state:idle-held mem>40G`; a plain word searches as before); the action log as plain text. A filter
that cannot be read says why beside the box (`FilterProblem`), and the table keeps the last one that
could, so typing `mem>` on the way to `mem>40G` never empties it."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.widgets import Input, Static

PLACEHOLDER = (
    "a word, or user:alice state:idle-held host:gpu0* mem>40G -kind:monitor (enter: keep, esc: clear)"
)
LOG_PLACEHOLDER = "part of a log line (enter: keep, esc: clear)"


class FilterBar(Input):
    BINDINGS: ClassVar[list[BindingType]] = [
        # Handled in `_on_key`; the binding names the key in the footer.
        Binding("escape", "leave(False)", "Clear filter"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(placeholder=PLACEHOLDER, id=id, compact=True)
        self.target = ""  # which pane the text filters: "procs", "fleet" or "log"
        # What enter (True: keep the text) and escape (False: clear it) do: the screen's, set by it.
        self.leave: Callable[[bool], None] = lambda keep: None

    def open(self, target: str, text: str) -> None:
        self.target = target
        self.placeholder = LOG_PLACEHOLDER if target == "log" else PLACEHOLDER
        self.value = text
        # Now, not at the next turn of the loop (`focus()`): the keys after the `/` are this box's.
        self.screen.set_focus(self)

    async def on_key(self, event: events.Key) -> None:
        if self.screen.focused is not self:  # (not `has_focus`: that follows with the Blur message)
            # Queued here in the read of the enter that closed the box: the app routes it again, to
            # where the focus is now.
            event.prevent_default()
            event.stop()
            self.app.post_message(events.Key(event.key, event.character))
        elif event.key in ("enter", "escape"):
            event.prevent_default()
            event.stop()
            self.leave(event.key == "enter")

    def action_leave(self, keep: bool) -> None:
        self.leave(keep)


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
        /* one line: cut with a mark, never mid-sentence without one; the tooltip has it whole */
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def say(self, words: str) -> None:
        # Text, not a str: the words quote what was typed, which may look like markup ("[b]").
        self.update(Text(words))
        self.tooltip = Text(words) if words else None
        self.display = bool(words)

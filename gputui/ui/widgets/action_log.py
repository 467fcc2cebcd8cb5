"""The action log pane: what plans did, stage by stage, with millisecond timestamps.

Fed from the fleet's `event` and `error` records (and by the kill flow, with `note`). It keeps the
last MAX_ENTRIES lines; a filter shows only the lines that contain its text.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import RichLog

from gputui.model import Event

from .. import fmt

MAX_ENTRIES = 5000
LEVELS = ("info", "ok", "warn", "error")
# Results that end well or badly, for the line's style.
_GOOD = {"clean", "exited", "vanished", "sent", "accepted", "ok"}
_BAD = {"held", "ghost-memory", "unkillable", "permission-denied", "survived", "refused", "outcome-unknown"}


def stamp(t: float) -> str:
    """Local wall time with milliseconds: 18:51:03.123."""
    whole = int(t)
    return time.strftime("%H:%M:%S", time.localtime(whole)) + f".{int((t - whole) * 1000):03d}"


@dataclass(frozen=True, slots=True)
class Entry:
    time: float
    host: str
    level: str
    text: str  # already made safe

    def haystack(self) -> str:
        return f"{self.host} {self.text}".casefold()


def event_entry(host: str, event: Event) -> Entry:
    parts = [event.plan[:8], event.stage]
    if event.gpu is not None:
        parts.append(f"gpu {event.gpu}")
    if event.pid is not None:
        parts.append(f"pid {event.pid}")
    if event.result:
        parts.append(event.result)
    text = " ".join(parts)
    if event.message:
        text += f": {fmt.safe(event.message, 300)}"
    level = "ok" if event.result in _GOOD else "error" if event.result in _BAD else "info"
    if event.stage == "done":
        level = "ok" if event.data.get("clean") else "error"
    return Entry(event.time or time.time(), host, level, text)


class ActionLog(Vertical):
    COMPONENT_CLASSES: ClassVar[set[str]] = {f"log--{level}" for level in LEVELS} | {"log--time", "log--host"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.entries: deque[Entry] = deque(maxlen=MAX_ENTRIES)
        self.filter_text = ""

    def compose(self) -> ComposeResult:
        yield RichLog(max_lines=MAX_ENTRIES, wrap=False, markup=False, auto_scroll=True, id="log-lines")

    def on_mount(self) -> None:
        fmt.set_title(self, "Action log")
        self._rewrite()

    def add_event(self, host: str, event: Event) -> None:
        self.add(event_entry(host, event))

    def note(self, host: str, text: str, level: str = "info", when: float | None = None) -> None:
        """A line from the app itself (a plan being sent, a refusal); `text` is untrusted."""
        self.add(Entry(when if when is not None else time.time(), host, level, fmt.safe(text, 500)))

    def add(self, entry: Entry) -> None:
        self.entries.append(entry)
        if len(self.entries) == 1:
            self._rewrite()  # replaces the "nothing yet" line
        elif self._shows(entry):
            self.query_one(RichLog).write(self._line(entry))

    def set_filter(self, text: str) -> None:
        self.filter_text = text
        self._rewrite()
        fmt.set_title(self, f"Action log · filter: {fmt.safe(text, 40)}" if text else "Action log")

    def restyle(self) -> None:
        self._rewrite()

    def _rewrite(self) -> None:
        lines = self.query_one(RichLog)
        lines.clear()
        if not self.entries:
            hint = "Nothing yet: plans started with f, F or x show here, stage by stage."
            lines.write(Text(hint, self._style("log--time")))
        for entry in self.entries:
            if self._shows(entry):
                lines.write(self._line(entry))

    def _shows(self, entry: Entry) -> bool:
        return not self.filter_text or self.filter_text.casefold() in entry.haystack()

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(name, partial=True)

    def _line(self, entry: Entry) -> Text:
        line = Text(no_wrap=True)
        line.append(stamp(entry.time), self._style("log--time"))
        line.append(" ")
        line.append(fmt.safe(entry.host, 40), self._style("log--host"))
        line.append(" ")
        line.append(entry.text, self._style(f"log--{entry.level}"))
        return line

"""The action log pane: what plans did, stage by stage, with millisecond timestamps.

`12:01:03.120 gpu-a GPU3  SIGTERM -> 4121 python train.py`: fed with each plan's events as they
come (and by the kill flow, with `note`). It keeps the last MAX_ENTRIES lines; a filter shows only
the lines that contain its text (the plan id matches too, though it is not shown). While plans run,
a status line under the lines says what they wait for.
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
from textual.widgets import RichLog, Static

from gputui.model import Event
from gputui.words import stage_text

from .. import fmt

MAX_ENTRIES = 5000
LEVELS = ("info", "ok", "warn", "error")
# Results that end well or badly, for the line's style.
_GOOD = {"clean", "exited", "vanished", "confirmed", "idle"}
_WARN = {"timeout", "zombie", "pid-reused", "protected", "found"}
_BAD = {
    "held",
    "ghost-memory",
    "unkillable",
    "permission-denied",
    "survived",
    "refused",
    "outcome-unknown",
    "error",
    "not-clean",
    "not-sent",
}


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
    tag: str = ""  # matched by the filter, not shown: the plan id

    def haystack(self) -> str:
        return f"{self.host} {self.text} {self.tag}".casefold()


def event_level(event: Event) -> str:
    if event.stage == "done":
        return "ok" if event.data.get("clean") else "error"
    if event.stage == "escalate" and event.result == "sent":
        return "warn"  # SIGKILL: the process ignored SIGTERM
    if event.result in _GOOD:
        return "ok"
    if event.result in _WARN:
        return "warn"
    return "error" if event.result in _BAD else "info"


def event_entry(host: str, event: Event) -> Entry:
    text = fmt.safe(stage_text(event), 400)
    if not event.message:
        text = f"{text} {event.stage} {event.result or ''}".strip()
    return Entry(event.time or time.time(), host, event_level(event), text, tag=event.plan)


class ActionLog(Vertical):
    COMPONENT_CLASSES: ClassVar[set[str]] = {f"log--{level}" for level in LEVELS} | {"log--time", "log--host"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.entries: deque[Entry] = deque(maxlen=MAX_ENTRIES)
        self.filter_text = ""
        self._progress = ""

    def compose(self) -> ComposeResult:
        yield RichLog(max_lines=MAX_ENTRIES, wrap=False, markup=False, auto_scroll=True, id="log-lines")
        yield Static("", id="log-progress", markup=False)

    def on_mount(self) -> None:
        self._title()
        self._rewrite()

    def set_progress(self, text: str) -> None:
        """The status line under the log ("" hides it): what running plans wait for."""
        if text != self._progress and self.is_mounted:
            self._progress = text
            line = self.query_one("#log-progress", Static)
            line.display = bool(text)
            line.update(Text(text, no_wrap=True, overflow="ellipsis"))
            self._title()

    def _title(self) -> None:
        title = "Action log"
        if self.filter_text:
            title += f" · filter: {fmt.safe(self.filter_text, 40)}"
        if self._progress:
            title += " · running"
        fmt.set_title(self, title)

    def add_event(self, host: str, event: Event) -> None:
        self.add(event_entry(host, event))

    def note(
        self, host: str, text: str, level: str = "info", when: float | None = None, tag: str = ""
    ) -> None:
        """A line from the app itself (a plan being sent, a refusal); `text` is untrusted."""
        entry = Entry(when if when is not None else time.time(), host, level, fmt.safe(text, 500), tag)
        self.add(entry)

    def add(self, entry: Entry) -> None:
        self.entries.append(entry)
        if not self.is_mounted:
            return  # on_mount writes them all
        if len(self.entries) == 1:
            self._rewrite()  # replaces the "nothing yet" line
        elif self._shows(entry):
            self.query_one(RichLog).write(self._line(entry))

    def set_filter(self, text: str) -> None:
        self.filter_text = text
        self._rewrite()
        self._title()

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

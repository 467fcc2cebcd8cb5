"""The action log pane: what plans did, stage by stage, with millisecond timestamps.

A line reads left to right: time, host, GPU, PID, what happened, and the command last:
`12:01:03.120 gpu-a GPU3     4121 SIGTERM sent  python train.py`. It is fed with each plan's events as
they come (and by the kill flow, with `note`). The columns come from the event's fields (gpu, pid,
the outcome, data.command); an event without a PID keeps its message. A line never runs past the
pane: what happened wraps under its column, the command is cut with an ellipsis (the tables' rule,
widgets.table.fit). It keeps the last MAX_ENTRIES lines; a filter shows only the lines that contain
its text (the plan id matches too, though it is not shown). While plans run, a status line under the
lines says what they wait for.
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

from gputui.model import Event, brief_command
from gputui.model.textsafe import printable
from gputui.text.words import event_message, where

from .. import fmt
from .borders import set_title
from .cells import Cell, fit

MAX_ENTRIES = 5000
HOST_WIDTH = 16  # at most: a longer host name is cut, with an ellipsis
PID_WIDTH = 7  # PIDs go up to 4194304
GPU_WIDTH = 7  # "GPU 0,1"; a longer list widens it for its line
COMMAND_ROOM = 12  # a command with less room than this on the last line gets a line of its own
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
    """One line of the action log, in the fields it is laid out by."""

    time: float
    host: str
    level: str
    text: str  # what happened, already made safe
    tag: str = ""  # matched by the filter, not shown: the plan id
    gpu: str = ""  # "GPU3", "GPU0,1"
    pid: int | None = None
    command: str = ""  # already made safe

    def plain(self) -> str:
        """The line without its time: host, GPU, PID, what happened, the command."""
        parts = (self.host, self.gpu, str(self.pid) if self.pid is not None else "", self.text, self.command)
        return " ".join(p for p in parts if p)

    def haystack(self) -> str:
        return f"{self.plain()} {self.tag}".casefold()


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


def _label_words(event: Event) -> str:
    """How the probe names the process in its messages (`4121 python train.py`, without the PID)."""
    command = event.data.get("command")
    if isinstance(command, list) and command and all(isinstance(w, str) for w in command):
        words = brief_command(command)
    else:
        name = event.data.get("name")
        words = name if isinstance(name, str) and name else "?"
    return words[:97] + "..." if len(words) > 100 else words


def what_happened(event: Event) -> tuple[str, str]:
    """(what happened, the command) of an event about a process; an event without a PID keeps its
    message, and so does one whose message does not name the process as the probe does."""
    # Without the `GPU 3: ` the line's GPU column says already.
    message = event_message(event) or f"{event.stage} {event.result or ''}".strip()
    if event.pid is None:
        return message, ""
    words = _label_words(event)
    # The probe wrote the label from the raw command; the message was made printable on arrival,
    # so the label is looked for as printable too (an escape is the same wherever it falls).
    label = printable(f"{event.pid} {words}")
    if label not in message:
        return message, ""
    before, _, after = message.partition(label)
    before, after = before.strip(), after.strip().removeprefix(":").strip()
    if before.endswith("->"):  # "SIGTERM -> 4121 python x[: already exited]"
        signal = before.removesuffix("->").strip()
        what = f"{signal}: {after}" if after else f"{signal} sent"
    else:  # "4121 python x exited after SIGTERM", "4121 python x: identity confirmed (pidfd)"
        what = " ".join(p for p in (before, after) if p) or (event.result or event.stage)
    return what, words


def event_entry(host: str, event: Event) -> Entry:
    what, command = what_happened(event)
    return Entry(
        event.time or time.time(),
        host,
        event_level(event),
        fmt.safe(what, 400),
        tag=event.plan,
        gpu=where(event),
        pid=event.pid,
        command=fmt.safe(command, 200),
    )


class ActionLog(Vertical):
    COMPONENT_CLASSES: ClassVar[set[str]] = {f"log--{level}" for level in LEVELS} | {"log--time", "log--host"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.entries: deque[Entry] = deque(maxlen=MAX_ENTRIES)
        self.filter_text = ""
        self._progress = ""
        self._width = 0  # the width the lines were laid out for
        self._host_width = 0

    def compose(self) -> ComposeResult:
        # min_width=1: RichLog draws narrower lines at 78 cells otherwise (a pane of 77 would scroll).
        yield RichLog(
            max_lines=MAX_ENTRIES, wrap=False, markup=False, auto_scroll=True, min_width=1, id="log-lines"
        )
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
            line.update(fit(Cell.numbers(text), max(line.size.width, self._line_width())))
            self._title()

    def _title(self) -> None:
        title = "Action log"
        if self.filter_text:
            title += f" · filter: {fmt.safe(self.filter_text, 40)}"
        if self._progress:
            title += " · running"
        set_title(self, title)

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
        host = min(len(entry.host), HOST_WIDTH)
        if len(self.entries) == 1 or host > self._host_width:
            self._rewrite()  # replaces the "nothing yet" line; or a wider host: the columns move
        elif self._shows(entry):
            self.query_one(RichLog).write(self._line(entry))

    def on_resize(self) -> None:
        if self._line_width() != self._width:
            self._rewrite()  # the lines are laid out for a width: wrap them again

    def set_filter(self, text: str) -> None:
        self.filter_text = text
        self._rewrite()
        self._title()

    def restyle(self) -> None:
        self._rewrite()

    def _line_width(self) -> int:
        """What a line may take: the pane's width inside its border, less the scrollbar; while the
        pane is hidden (not laid out yet), the screen's."""
        width = self.query_one(RichLog).scrollable_content_region.width
        return width if width > 0 else max(self.app.size.width - 3, 20)

    def _rewrite(self) -> None:
        lines = self.query_one(RichLog)
        lines.clear()
        self._width = self._line_width()
        self._host_width = max((min(len(e.host), HOST_WIDTH) for e in self.entries), default=0)
        if not self.entries:
            hint = "Nothing yet: plans started with f, F or x show here, stage by stage."
            lines.write(fit(Cell(hint, self._style("log--time")), self._width))
        for entry in self.entries:
            if self._shows(entry):
                lines.write(self._line(entry))

    def _shows(self, entry: Entry) -> bool:
        return not self.filter_text or self.filter_text.casefold() in entry.haystack()

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(name, partial=True)

    def _line(self, entry: Entry) -> Text:
        """The entry in columns, no wider than the pane: what happened wraps under its column, and
        the command takes what is left of the last line (cut with an ellipsis), or a line of its
        own when too little is."""
        width = self._width or self._line_width()
        head = Text(no_wrap=True)
        head.append(stamp(entry.time), self._style("log--time"))
        head.append(" ")
        host = fit(Cell(fmt.safe(entry.host, 40)), self._host_width or HOST_WIDTH)
        head.append(host.plain.ljust(self._host_width), self._style("log--host"))
        head.append(f" {entry.gpu:<{GPU_WIDTH}} {'' if entry.pid is None else entry.pid:>{PID_WIDTH}} ")
        indent = head.cell_len
        room = max(width - indent, 20)  # a very narrow pane: the line runs on, its end scrolls
        style = self._style(f"log--{entry.level}")
        wrapped = Text(entry.text, style).wrap(self.app.console, room, overflow="fold")
        lines = [Text.assemble(head if i == 0 else " " * indent, part) for i, part in enumerate(wrapped)]
        if not lines:
            lines = [head]
        if entry.command:
            command = Cell(entry.command, self._style("log--time"))
            left = room - wrapped[-1].cell_len - 2 if wrapped else room
            if left >= min(COMMAND_ROOM, command.cell_len):
                lines[-1].append("  ")
                lines[-1].append_text(fit(command, left))
            else:
                lines.append(Text.assemble(" " * indent, fit(command, room)))
        return Text("\n").join(lines)

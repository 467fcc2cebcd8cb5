"""The fleet's changes, recorded as they come and drawn by one redraw at a time: GpuTuiApp's intake.

How live data reaches the screen:
- The fleet's host sessions are asyncio tasks on the app's loop; they await their links (subprocess
  pipes, SSH channels), so no blocking call (NVML, /proc) ever runs on the UI loop: that happens in
  the probes.
- A fleet callback only records what changed (a set of host names) and, for a sample, when it
  arrived by the app's clock. A newer sample therefore simply replaces an older one that was not
  drawn yet: there is no queue to back up, whatever the number of hosts or their rate.
- The first change after a quiet spell is drawn at once; changes that come while the last redraw
  is less than `REDRAW_GAP` old wait for one timer, so there are at most 10 redraws a second however
  many hosts report, and a sample waits at most `REDRAW_GAP` for its redraw. Above 256 hosts the
  gap grows with the fleet (`redraw_gap`: 0.25 s at 512 hosts, 0.5 s from 1,024): every redraw
  walks the changed hosts and repaints the rows in view, and at a thousand hosts ten of them a
  second were a fifth of the app's work for numbers that change once a second anyway. A redraw draws the
  changed hosts into the visible widgets, in place, inside one `batch_update` (and the tables repaint
  only the rows that changed). A 1 s tick redraws the sample ages. While another screen (help, a
  dialog, the command palette) is on top, nothing is redrawn; the changes are drawn when it closes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from textual.app import App

from gputui.fleet.fleet import Fleet
from gputui.fleet.session import (
    ErrorArrived,
    EventArrived,
    FleetEvent,
    HelloArrived,
    SampleArrived,
    StatusChanged,
)
from gputui.model import Event
from gputui.text.words import count

from . import spinner as actions
from .screens.main import MainScreen

REDRAW_GAP = 0.1  # seconds between two redraws, at least: at most 10 a second, however many hosts report
REDRAW_GAP_HOSTS = 256  # above this many hosts the gap grows with the fleet (redraw_gap)
REDRAW_GAP_MAX = 0.5


def redraw_gap(hosts: int) -> float:
    """The least time between two redraws for a fleet of `hosts`."""
    if hosts <= REDRAW_GAP_HOSTS:
        return REDRAW_GAP
    return max(REDRAW_GAP, min(REDRAW_GAP_MAX, REDRAW_GAP * hosts / (REDRAW_GAP_HOSTS * 0.8)))


AGES_INTERVAL = 1.0  # seconds: sample ages move even when nothing arrives
APP_HOST = "gputui"  # the host column of the app's own log lines
PENDING_MAX = 2000  # log lines kept for the next redraw (a dialog may be open); the rest are counted


@dataclass(frozen=True, slots=True)
class Note:
    """A line of the app's own for the action log (`log_note`), kept until the log is mounted."""

    text: str
    level: str
    tag: str


# A line kept for the action log: its host, and a plan's event, a probe's error record or a note.
LogLine: TypeAlias = tuple[str, Event | dict[str, Any] | Note]


class FleetIntake(App[None]):
    """What the fleet reports, recorded for the next redraw; the redraws, and the action log's lines
    (GpuTuiApp sets the attributes below in its __init__)."""

    fleet: Fleet
    clock: Callable[[], float]
    received: dict[str, float]  # host -> clock() when its last sample arrived
    running: dict[str, actions.Progress]  # plan id -> what it is doing
    _main: MainScreen | None
    _changed: set[str]
    _restyle: bool
    _pending_log: list[LogLine]
    _pending_dropped: int
    _last_ages: float
    _last_redraw: float  # time.monotonic() at the start of the last redraw
    _redraw_due: bool  # a redraw is scheduled (at once, or by a timer)
    _show_log_later: bool

    def _on_fleet(self, change: FleetEvent) -> None:
        """Runs on the event loop after every fleet change: record it, draw nothing."""
        view = change.view
        match change:
            case SampleArrived():
                self.received[view.name] = self.clock()
                main = self._main
                if not view.news and main is not None and not main.shows_in_full(view.name):
                    return  # nothing the fleet's views draw has changed (gputui/fleet/news.py)
            case EventArrived(event=event) if event.plan in self.running:
                self.running[event.plan].heard = True  # its own worker renders it, as it comes
            case EventArrived(event=event):
                self._queue_log((view.name, event))
            case ErrorArrived(record=record):
                self._queue_log((view.name, record))
            case StatusChanged() | HelloArrived():
                pass  # drawn from the view
        self._changed.add(view.name)
        self.want_redraw()

    def _queue_log(self, item: LogLine) -> None:
        """Keep a log line for the next redraw; past PENDING_MAX (a flood while a dialog is open),
        count it instead: the log says how many were dropped."""
        if len(self._pending_log) < PENDING_MAX:
            self._pending_log.append(item)
        else:
            self._pending_dropped += 1

    def age_of(self, host: str) -> float | None:
        received = self.received.get(host)
        return max(0.0, self.clock() - received) if received is not None else None

    def want_redraw(self) -> None:
        """Schedule a redraw: now if the last one is REDRAW_GAP old, else when it is (one pending)."""
        if self._redraw_due:
            return
        self._redraw_due = True
        wait = self._last_redraw + redraw_gap(len(self.fleet.hosts)) - time.monotonic()
        if wait > 0:
            # asyncio's timer, not Textual's: a one-shot Textual timer whose delay has passed by the
            # time its task starts is skipped, never fired (Timer's skip), and no redraw would come.
            asyncio.get_running_loop().call_later(wait, self.call_later, self._redraw)
        else:
            self.call_later(self._redraw)

    def _redraw(self) -> None:
        self._redraw_due = False
        self._last_redraw = time.monotonic()
        main = self._main
        if not self.is_running:
            return  # shutting down: the widgets are being taken down, with their styles
        if main is None or self.screen is not main or not main.is_mounted:
            return  # a modal is open: keep collecting, draw when it closes
        changed, self._changed = self._changed, set()
        restyle, self._restyle = self._restyle, False
        now = time.monotonic()
        ages = now - self._last_ages >= 0.9 * AGES_INTERVAL  # the tick may come a little early
        if ages:
            self._last_ages = now
        if restyle:
            main.restyle()
        elif changed or ages:
            main.refresh_data(changed, ages=ages)
        if self._show_log_later:
            self._show_log_later = False
            main.show_log()
        log, self._pending_log = self._pending_log, []
        if self._pending_dropped:
            dropped, self._pending_dropped = self._pending_dropped, 0
            main.action_log.note(
                APP_HOST, f"{count(dropped, 'log line')} dropped while the screen was busy", "warn"
            )
        for host, line in log:
            if isinstance(line, Event):
                main.action_log.add_event(host, line)
            elif isinstance(line, Note):
                main.action_log.note(host, line.text, line.level, tag=line.tag)
            else:
                text = f"probe error {line.get('code')}: {line.get('message')}"
                main.action_log.note(host, text, "error")

    def show_log(self) -> None:
        main = self._main
        if main is not None and main.is_mounted:
            main.show_log()
        else:
            self._show_log_later = True
            self.want_redraw()

    def log_note(self, host: str, text: str, level: str = "info", tag: str = "") -> None:
        main = self._main
        if main is not None and main.is_mounted:
            main.action_log.note(host, text, level, tag=tag)
        else:
            self._queue_log((host, Note(text, level, tag)))
            self.want_redraw()

    def log_event(self, host: str, event: Event) -> None:
        main = self._main
        if main is not None and main.is_mounted:
            main.action_log.add_event(host, event)
        else:
            self._queue_log((host, event))
            self.want_redraw()

"""A running plan as the dashboard shows it: the status line over the action log ("waiting for 2
processes to exit after SIGTERM (1.2 s of 5 s)").

Planning, sending, logging and judging are gputui.kill.operate's; this only follows the events the app
hands it. Plain Python, tested without a terminal.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gputui.kill.plan.record import KILL_WAIT, Plan
from gputui.model import Event
from gputui.text.words import count, gpus_words

from . import fmt

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


@dataclass
class Progress:
    """What a running plan is doing, from its events, in words for the log pane's status line."""

    host: str
    plan: Plan
    started: float = field(default_factory=time.monotonic)
    phase: str = "sending the plan"
    since: float = field(default_factory=time.monotonic)
    limit: float | None = None
    signal: str | None = None
    waiting: set[int] = field(default_factory=set)
    done: Event | None = None
    heard: bool = False  # an event came back: the probe has the plan

    def _enter(self, phase: str, now: float, limit: float | None = None) -> None:
        if phase != self.phase:
            self.phase, self.since, self.limit = phase, now, limit

    def on_event(self, event: Event, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self.heard = True
        stage, result = event.stage, event.result
        if stage == "accepted":
            self._enter("checking the targets", now)
        elif stage == "signal" and result == "sent" and self.plan.signal is not None:
            self._enter(f"{event.signal} sent: reading the process's state", now, self.plan.deadline)
        elif stage in ("signal", "escalate") and result == "sent" and event.pid is not None:
            if event.signal != self.signal:
                self.waiting.clear()
                self.signal = event.signal
            self.waiting.add(event.pid)
            limit = KILL_WAIT if stage == "escalate" else self.plan.term_timeout
            self._enter(f"waiting for exits after {event.signal}", now, limit)
        elif stage == "wait" and result == "exited" and event.pid is not None:
            self.waiting.discard(event.pid)
        elif stage == "wait" and result == "timeout":
            self._enter("the next signal to the survivors", now)
        elif stage == "rescan":
            self._enter("rescanning the holders", now)
        elif stage == "verify" and result == "polling":
            if self.plan.cleans_gpus:
                what = f"verifying {gpus_words(self.plan.gpu_indexes)} clean"
            else:
                what = "verifying the targets gone, their memory released"
            self._enter(f"{what} (NVML polled)", now, self.plan.verify_timeout)
        elif stage == "verdict":
            self._enter("verdicts", now)
        elif stage == "done":
            self.done = event

    def line(self, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        phase = self.phase
        if phase.startswith("waiting for exits"):
            phase = (
                f"waiting for {count(len(self.waiting), 'process', 'processes')} to exit after {self.signal}"
            )
        spent = max(0.0, now - self.since)
        clock = f"{spent:.1f} s of {self.limit:g} s" if self.limit else f"{spent:.1f} s"
        return f"{fmt.safe(self.host, 40)}: {phase} ({clock})"


def spinner(now: float | None = None) -> str:
    now = time.monotonic() if now is None else now
    return SPINNER[int(now * 10) % len(SPINNER)]

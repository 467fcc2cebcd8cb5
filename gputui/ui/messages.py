"""What the operator asked the UI to free: the message between the main screen and the app.

The main screen only gathers the targets (`f` on a GPU, `F` on a host, `x`/enter on selected
processes) and posts `PlanRequested` with one gputui.kill.operate.Request per host; the app plans them
(gputui.kill.operate), shows the confirmation dialog and runs the confirmed plans. The screen never
touches processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message
from textual.screen import Screen

from gputui.kill.operate import AnyRequest


@dataclass(frozen=True, slots=True)
class View:
    """Where the operator is: the screen on top, and the host the dashboard shows on it (None: all
    hosts, or a screen of one process). A plan asked from one view opens over that view only: keys
    typed while it is made (`x` then `?` or `]` in one read) may have taken the operator elsewhere."""

    screen: Screen[Any]
    host: str | None = None


class PlanRequested(Message):
    """Posted by the main screen; handled by the app (bubbles up from the screen).

    One request per host: a selection that spans hosts becomes one plan per host, shown in one
    dialog and run concurrently, each by its own probe."""

    def __init__(self, *requests: AnyRequest, view: View | None = None) -> None:
        super().__init__()
        self.requests = requests
        self.view = view  # where it was asked from (None: the dialog opens wherever the operator is)

    @property
    def request(self) -> AnyRequest:
        return self.requests[0]


class ResetRequested(Message):
    """Posted by the GPU view (`r` where memory is orphaned); the app asks the probe for a dry run,
    shows what blocks a reset or confirms it, and only then resets (gputui.kill.operate.reset)."""

    def __init__(self, host: str, gpu: int) -> None:
        super().__init__()
        self.host = host
        self.gpu = gpu

"""What the operator asked the UI to free: the message between the main screen and the app.

The main screen only gathers the targets (`f` on a GPU, `F` on a host, `x`/enter on selected
processes) and posts `PlanRequested` with one gputui.kill.operate.Request per host; the app plans them
(gputui.kill.operate), shows the confirmation dialog and runs the confirmed plans. The screen never
touches processes.
"""

from __future__ import annotations

from textual.message import Message

from gputui.kill.operate import AnyRequest


class PlanRequested(Message):
    """Posted by the main screen; handled by the app (bubbles up from the screen).

    One request per host: a selection that spans hosts becomes one plan per host, shown in one
    dialog and run concurrently, each by its own probe."""

    def __init__(self, *requests: AnyRequest) -> None:
        super().__init__()
        self.requests = requests

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

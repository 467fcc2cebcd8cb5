"""What the operator asked the UI to free: the hook the kill flow (issue 4) builds on.

The main screen only gathers the targets (`f` on a GPU, `F` on a host, `x`/enter on selected
processes) and posts `PlanRequested`; `GpuTuiApp.request_plans` turns it into plans, a confirmation
dialog and the staged kill. The screen never touches processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from textual.message import Message

from gputui.model import Proc, Sample

Scope = Literal["processes", "gpu", "host"]


@dataclass(frozen=True, slots=True)
class PlanRequest:
    host: str
    scope: Scope  # processes: the ones chosen by hand; gpu: free `gpus`; host: free every GPU of `host`
    gpus: tuple[int, ...] = ()
    processes: tuple[Proc, ...] = ()  # chosen by hand (space), or the one under the cursor
    sample: Sample | None = None  # what the operator was looking at when asking


class PlanRequested(Message):
    """Posted by the main screen; handled by the app (bubbles up from the screen).

    One request per host: a selection that spans hosts becomes one plan per host, shown in one
    dialog and run concurrently, each by its own probe."""

    def __init__(self, *requests: PlanRequest) -> None:
        super().__init__()
        self.requests = requests

    @property
    def request(self) -> PlanRequest:
        return self.requests[0]

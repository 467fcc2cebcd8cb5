"""What the operator asked the UI to free: the hook the kill flow (issue 4) builds on.

The main screen only gathers the targets (`f` on a GPU, `F` on a host, `x`/enter on selected
processes) and posts `PlanRequested`; `GpuTuiApp.request_plan` turns it into a plan, a confirmation
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
    """Posted by the main screen; handled by the app (bubbles up from the screen)."""

    def __init__(self, request: PlanRequest) -> None:
        super().__init__()
        self.request = request

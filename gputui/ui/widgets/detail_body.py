"""The body of the process detail and of its environment: rows of a process drawn as one group,
redrawn only when what they say changed."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.console import Group, RenderableType

from gputui.fleet.fleet import DETAIL_TIMEOUT
from gputui.model import ProcDetail

from .. import fmt, kinds
from .status import StyledStatic


class DetailBody(StyledStatic):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *kinds.STYLE.values(),
        "pdetail--label",
        "pdetail--muted",
        "pdetail--warn",
        "pdetail--status",
        # The process's history charts (proc_detail.py).
        "pdetail--gpu",
        "pdetail--sm",
        "pdetail--cpu",
        "pdetail--rss",
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._group = Group()

    def show(self, parts: list[RenderableType]) -> None:
        signature = tuple(str(p) for p in parts)
        if signature != self._last:
            self._last = signature
            self._group = Group(*parts)
            self.update(self._group)


def no_answer_words(host: str) -> str:
    """No detail came from `host` (already escaped) in time: what the detail screens say first."""
    return f"No answer from {host} within {DETAIL_TIMEOUT:g} s (not connected, or busy with a plan)"


def unread_words(detail: ProcDetail) -> str:
    """Why a process's /proc was not read, after "PID N": it has exited, its PID names another
    process now (the message names both start times), or it could not be read (the message says
    why: a malformed request, a replay)."""
    if detail.result == "exited":
        return "has exited"
    what = "could not be read" if detail.result == "refused" else "is gone: its PID names another process now"
    return f"{what} ({fmt.safe(detail.message, 300)})" if detail.message else what

"""The body of the process detail and of its environment: rows of a process drawn as one group,
redrawn only when what they say changed."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.console import Group, RenderableType

from .. import kinds
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

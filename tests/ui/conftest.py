"""For every UI test: no blinking cursor, wall times in UTC. The helpers that build and drive apps
are in tests/support/apps.py and tests/support/pilot.py."""

from __future__ import annotations

import time
from typing import Any

import pytest
from textual.widgets import Input


@pytest.fixture(autouse=True)
def no_cursor_blink(monkeypatch: pytest.MonkeyPatch) -> None:
    """A blinking input cursor makes screenshots depend on timing."""
    original = Input.__init__

    def init(self: Input, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.cursor_blink = False

    monkeypatch.setattr(Input, "__init__", init)


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Wall times (a process's start, in its detail) shown in local time read the same everywhere."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()

"""Fixtures for the hub's tests: `live`, a live demo of the test's own (tests/support/livedemo.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.livedemo import Live, live_demo


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    with live_demo(tmp_path) as demo:
        yield demo

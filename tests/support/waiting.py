"""Waiting for a condition by polling it: in a plain test (`wait_until`) and in one that runs on the
event loop (`eventually`). Both give the condition's last answer, asked once more at the deadline,
so a test asserts on it (`assert wait_until(...)`) and a slow machine only makes the wait longer.
The dashboard's own waits (under Textual's pilot) are in tests/support/pilot.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float, step: float = 0.02) -> T:
    """`predicate()` once it is true, polled every `step` seconds; its answer at `timeout` else."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


async def eventually(predicate: Callable[[], T], timeout: float, step: float = 0.02) -> T:
    """`wait_until` on the event loop: the loop runs (the fleet, its links) while this waits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(step)
    return predicate()

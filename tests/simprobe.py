"""Shared fixtures for tests that kill: in-process probes over the simulated GPUs, always closed.

`sim_probe(...)` opens a SimReader (scenario "empty" unless asked) and a Probe on it; at the end every
probe is closed (which stops every process its sim started) and the test fails if any process a sim
started is still alive. Tests signal nothing themselves: the reaper does, and only to sim jobs.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gputui.probe.core import Probe
from gputui.probe.readers.sim import SimReader, start_time


def alive(pid: int, started: int | None) -> bool:
    """The process (pid, start time) exists and has not exited (a zombie has exited)."""
    if started is None or start_time(pid) != started:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return False
    return raw[raw.rindex(b")") + 2 :].split()[0] != b"Z"


def wait_gone(pid: int, started: int | None, timeout: float) -> bool:
    """Until the process has exited (event-driven on a pidfd); whether it did in time."""
    try:
        fd = os.pidfd_open(pid)
    except (ProcessLookupError, AttributeError):
        return not alive(pid, started)
    try:
        if start_time(pid) == started:
            select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    return not alive(pid, started)


@pytest.fixture
def sim_probe() -> Iterator[Callable[..., tuple[Probe, SimReader]]]:
    made: list[tuple[Probe, SimReader]] = []

    def make(gpus: int = 4, read_only: bool = False, **kwargs: Any) -> tuple[Probe, SimReader]:
        kwargs.setdefault("scenario", "empty")
        reader = SimReader(gpus=gpus, **kwargs)
        probe = Probe(reader, read_only=read_only, hostname="sim-test")
        made.append((probe, reader))
        hello = probe.start()
        assert hello["error"] is None, hello["error"]
        return probe, reader

    yield make
    left = []
    for probe, reader in made:
        started = [(pid, st) for job in reader.jobs for pid, st in job.processes()]
        probe.close()
        deadline = time.monotonic() + 10
        for pid, st in started:
            if not wait_gone(pid, st, max(0.0, deadline - time.monotonic())):
                left.append(pid)
    assert not left, f"sim processes left behind: {left}"

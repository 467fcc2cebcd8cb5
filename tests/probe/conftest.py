"""Fixtures for the probe tests: sims and in-process probes over them, always closed.

`sim_probe(...)` opens a SimReader (scenario "empty" unless asked) and a Probe on it; `make_sim(...)`
a SimReader alone. At the end every one is closed (which stops every process its sim started) and
the test fails if any process a sim started is still alive. Tests signal nothing themselves: the
reaper does, and only to sim jobs.

Some tests run a sim job as another user (`nobody`), which reaches its sim by path: where the
TMPDIR the suite runs under is private (mode 700, as a careful user sets it), their sims are made
in a directory of this session's own that every user may search (`sim_base`), and the sim says in
one line what it needs when a job's user cannot reach it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gputui.probe.core import Probe
from gputui.probe.readers.sim import SimReader, start_time
from gputui.probe.readers.sim.directory import reach_problem
from tests.support.simprobe import all_processes, wait_gone


@pytest.fixture(scope="session")
def sim_base() -> Iterator[str | None]:
    """Where the tests' sims go: the temporary directory (None) where `nobody` can reach it, else a
    directory of this session's own in /tmp (root's, sticky) that every user may search."""
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        yield None
        return
    if os.geteuid() != 0 or reach_problem(tempfile.gettempdir(), nobody.pw_uid, nobody.pw_gid) is None:
        yield None
        return
    base = tempfile.mkdtemp(prefix="gputui-test-sims-", dir="/tmp")
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def sim_probe(sim_base: str | None) -> Iterator[Callable[..., tuple[Probe, SimReader]]]:
    made: list[tuple[Probe, SimReader]] = []

    def make(gpus: int = 4, read_only: bool = False, **kwargs: Any) -> tuple[Probe, SimReader]:
        kwargs.setdefault("scenario", "empty")
        if not kwargs.get("attach"):
            kwargs.setdefault("base_dir", sim_base)
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


@pytest.fixture
def make_sim(sim_base):
    """Open SimReaders; close them all afterwards and check nothing they started is left."""
    readers = []

    def make(**kwargs):
        kwargs.setdefault("scenario", "empty")
        if not kwargs.get("attach"):
            kwargs.setdefault("base_dir", sim_base)
        reader = SimReader(**kwargs)
        readers.append(reader)
        reader.open()
        reader.test_session_start = start_time(reader.session_pid) if reader.session_pid else None
        return reader

    yield make
    left = []
    for reader in readers:
        reader.close()
        if reader.session_pid is None:
            continue
        left += [pid for pid, started in all_processes(reader) if started and start_time(pid) == started]
        assert not os.path.exists(reader.directory)
    assert not left, f"processes left behind: {left}"

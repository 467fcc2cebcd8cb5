"""The sim's processes as the probe tests see them: alive (by PID and start time, a zombie has
exited), waited for until gone, every process a reader started, the files a process holds open.
The fixtures that open sims and probes and check that nothing they started is left are in
tests/probe/conftest.py (`sim_probe`, `make_sim`)."""

from __future__ import annotations

import os
import select

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


def all_processes(reader: SimReader) -> list[tuple[int | None, int | None]]:
    """(pid, start time) of the session process and every process of every job."""
    found: list[tuple[int | None, int | None]] = [
        (reader.session_pid, getattr(reader, "test_session_start", None))
    ]
    for job in reader.jobs:
        found.extend(job.processes())
    return found


def fd_links(pid: int) -> set[str]:
    """Targets of /proc/PID/fd (empty for a zombie or a process that is gone)."""
    links: set[str] = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return links
    for name in names:
        try:
            links.add(os.readlink(f"/proc/{pid}/fd/{name}"))
        except OSError:
            pass
    return links

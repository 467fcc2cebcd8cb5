"""Processes a test started through `python -m gputui ...`, read from /proc: what runs below it, each
by PID and start time, and ending the probes it left (they outlive an app killed mid-plan), then
checking that everything is gone. Only processes recorded by start time are ever signalled."""

from __future__ import annotations

import os
import select
import signal
from pathlib import Path


def children(pid: int) -> list[int]:
    """The PIDs whose parent is `pid` now (every thread's children)."""
    found: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            found += [int(p) for p in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            pass
    return found


def probes_below(pid: int) -> set[tuple[int, int | None]]:
    """The probes process `pid` started, each by (PID, start time): its children whose command line
    holds the launcher's word `gputui-probe`."""
    return {(c, start_time(c)) for c in children(pid) if b"gputui-probe" in cmdline(c).split(b"\0")}


def descendants(pid: int) -> list[int]:
    """Every PID below `pid` now."""
    out, todo = [], [pid]
    while todo:
        for child in children(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def start_time(pid: int) -> int | None:
    """The process's start time (clock ticks after boot), or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return int(raw[raw.rindex(b")") + 2 :].split()[19])


def end_probes(started: list[tuple[int, int | None]]) -> None:
    """SIGTERM the probes `gputui clean` started (checked by start time), then wait for everything."""
    probes = [(pid, st) for pid, st in started if st is not None and b"gputui-probe" in cmdline(pid)]
    for pid, st in probes:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            if start_time(pid) == st:
                signal.pidfd_send_signal(fd, signal.SIGTERM)
        finally:
            os.close(fd)
    for pid, st in started:
        assert gone_within(pid, st, 20), f"{pid} ({cmdline(pid)!r}) is still running"


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def gone_within(pid: int, st: int | None, timeout: float) -> bool:
    """Whether the process exits within `timeout` (waiting on a pidfd: readable at exit)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        if start_time(pid) == st:
            select.select([fd], [], [], timeout)
        return start_time(pid) != st or select.select([fd], [], [], 0)[0] != []
    finally:
        os.close(fd)

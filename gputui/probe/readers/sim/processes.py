"""Which process is which, for a sim that signals only its own: a process's lineage below the sim's
session, a signal sent through a pidfd only to a process of the sim that is still the one reported,
a wait for a process's exit, and this process's PID namespace.

Apart from the reader: the job session, the demo daemon and the benchmarks signal and wait for sim
processes with these, and none of it knows of GPUs.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import os
import select
import signal
import time
from typing import List, Optional, Tuple  # noqa: F401  (used in type comments)

from .client import start_time

# How far below its session a sim process may be signalled: a job, its child, an orphan of a job
# (the session adopts them) are one to three levels down.
MAX_SESSION_DEPTH = 64


def _pidfd_open(pid):
    # type: (int) -> Optional[int]
    """A pidfd for `pid`, or None where the kernel or Python (< 3.9) has none.

    Raises ProcessLookupError when the process does not exist."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd = opener(pid)  # type: int
        return fd
    except ProcessLookupError:
        raise
    except OSError:
        return None


def _parent_and_start(pid):
    # type: (int) -> Optional[Tuple[int, int]]
    """Fields 4 (ppid) and 22 (start time) of /proc/PID/stat, or None when the process is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            raw = f.read()
        fields = raw[raw.rindex(b")") + 2 :].split()
        return int(fields[1]), int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def _lineage(pid, ancestor):
    # type: (int, int) -> Optional[List[Tuple[int, int, int]]]
    """(pid, start, ppid) from `pid` up to a child of `ancestor`; None if the chain does not reach it
    within MAX_SESSION_DEPTH (or a process on it is gone)."""
    chain = []  # type: List[Tuple[int, int, int]]
    while len(chain) < MAX_SESSION_DEPTH:
        found = _parent_and_start(pid)
        if found is None:
            return None
        ppid, started = found
        chain.append((pid, started, ppid))
        if ppid == ancestor:
            return chain
        if ppid <= 1:
            return None
        pid = ppid
    return None


def descends_from(pid, ancestor, ancestor_start):
    # type: (int, int, Optional[int]) -> bool
    """Whether process `pid` is below `ancestor`, the process that started at `ancestor_start`
    (walking the ppid chain in /proc, at most MAX_SESSION_DEPTH levels).

    The chain must read the same twice in a row: a link read while a parent died and its PID went
    to another process would differ (its child's ppid changes when it is re-parented). A few tries,
    for a chain that changes as it is read (a ghost's parent exiting: its child goes to the session)."""
    if pid == ancestor or ancestor_start is None or start_time(ancestor) != ancestor_start:
        return False
    chain = _lineage(pid, ancestor)
    for _ in range(3):
        again = _lineage(pid, ancestor)
        if again == chain:
            return chain is not None and start_time(ancestor) == ancestor_start
        chain = again
    return False


def signal_checked(pid, expected_start, sig, session):
    # type: (int, Optional[int], int, Optional[Tuple[int, Optional[int]]]) -> bool
    """Send `sig` to `pid` only if it is a process of the sim whose session is `session` ((pid, start
    time)): below the session, and still the process that started at `expected_start`.

    The pidfd is opened before the checks, so the checks and the signal are about the same process
    (without pidfds, Python 3.8, the checks come just before kill). Returns whether it was sent."""
    if session is None or expected_start is None:
        return False
    try:
        fd = _pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        if start_time(pid) != expected_start or not descends_from(pid, session[0], session[1]):
            return False
        if start_time(pid) != expected_start:
            return False  # replaced during the walk (only possible without a pidfd)
        if fd is not None and hasattr(signal, "pidfd_send_signal"):
            signal.pidfd_send_signal(fd, sig)  # novermin (3.9+, guarded by hasattr)
        else:
            os.kill(pid, sig)
        return True
    except OSError:
        return False
    finally:
        if fd is not None:
            os.close(fd)


def wait_exit(pid, expected_start, timeout):
    # type: (int, Optional[int], float) -> bool
    """Wait until the process `pid` (started at `expected_start`) has exited and been reaped.

    Event-driven with a pidfd; the /proc check after it only covers the instant between exit and
    reaping. Without pidfds (Python 3.8, old kernels) it polls every 5 ms. Returns whether it is gone."""
    deadline = time.monotonic() + timeout
    try:
        fd = _pidfd_open(pid)
    except ProcessLookupError:
        return True
    if fd is not None:
        try:
            if start_time(pid) == expected_start:
                poller = select.poll()  # a pidfd is readable once the process has exited
                poller.register(fd, select.POLLIN)
                poller.poll(max(0, int((deadline - time.monotonic()) * 1000)))
        finally:
            os.close(fd)
    while start_time(pid) == expected_start:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.002 if fd is not None else 0.005)
    return True


def pid_namespace():
    # type: () -> Optional[str]
    """This process's PID namespace ("pid:[4026531836]"), None where /proc does not say."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None

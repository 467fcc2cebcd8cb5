"""Which processes hold GPU device files: a /proc fd scan, incremental between samples.

The full scan is dominated by the kernel's readlink (GPU_FACTS.md "Costs": ~4.6 us per fd), so a
steady-state scan lists each process's fd directory and reads links only for fd numbers it has not
seen for that (pid, start time). fd numbers are reused (fd 7 closed, later reopened as
/dev/nvidiactl), so such a cache can miss a new holder: every process is re-read in full at least
every `refresh_every` scans (round-robin), which bounds how stale the view can be, and the scanner
reports that bound. Kill plans and verification always ask for a full scan.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import os
from typing import Dict, Optional

from .procfs import PF_KTHREAD, PROC, read_stat

# fd number -> link target, or None when the target is not a device file
FdMap = Dict[int, Optional[str]]


class Entry(object):
    __slots__ = ("fds", "last_full", "start_time", "state")

    def __init__(self, start_time, state):
        # type: (int, str) -> None
        self.start_time = start_time
        self.state = state
        self.fds = {}  # type: FdMap
        self.last_full = 0


class ScanResult(object):
    __slots__ = ("full", "holders", "reread", "states", "unreadable")

    def __init__(self):
        # type: () -> None
        # pid -> (start_time, sorted device files held)
        self.holders = {}  # type: Dict[int, Tuple[int, Tuple[str, ...]]]
        # pid -> state letter, for every process seen (zombies and kernel threads included)
        self.states = {}  # type: Dict[int, str]
        self.full = False
        self.unreadable = 0
        self.reread = 0  # links actually read this scan


class HolderScanner(object):
    """Keeps a per-process fd cache; scan() returns the current holders of `prefix*` files."""

    def __init__(self, prefix="/dev/nvidia", proc=PROC, refresh_every=30):
        # type: (str, str, int) -> None
        self.prefix = prefix
        self.proc = proc
        self.refresh_every = max(1, refresh_every)
        self._cache = {}  # type: Dict[int, Entry]
        self._scans = 0

    def scan(self, full=False):
        # type: (bool) -> ScanResult
        self._scans += 1
        result = ScanResult()
        result.full = full
        seen = set()  # type: Set[int]
        for name in os.listdir(self.proc):
            if not name.isdigit():
                continue
            pid = int(name)
            seen.add(pid)
            entry = self._cache.get(pid)
            # Round-robin: spread the full re-reads (start time and every link) over the scans.
            refresh = full or (self._scans + pid) % self.refresh_every == 0
            if entry is None or refresh:
                stat = read_stat(pid, self.proc)
                if stat is None:
                    continue
                if entry is None or entry.start_time != stat.start_time:
                    entry = Entry(stat.start_time, stat.state)
                    self._cache[pid] = entry
                else:
                    entry.state = stat.state
                if stat.flags & PF_KTHREAD:  # no fds, never a holder
                    result.states[pid] = stat.state
                    continue
            if not self._update(pid, entry, refresh, result):
                continue
            result.states[pid] = entry.state
            held = sorted(set(t for t in entry.fds.values() if t is not None))
            if held:
                result.holders[pid] = (entry.start_time, tuple(held))
        for pid in list(self._cache):
            if pid not in seen:
                del self._cache[pid]
        return result

    def _update(self, pid, entry, refresh, result):
        # type: (int, Entry, bool, ScanResult) -> bool
        """Bring one process's fd map up to date. False when the process vanished."""
        fd_dir = "%s/%d/fd" % (self.proc, pid)
        try:
            names = os.listdir(fd_dir)
        except PermissionError:
            result.unreadable += 1
            return True
        except OSError:
            return False
        if not names and entry.fds:
            # An empty fd table for a process that had fds: it exited (zombie) or is exiting.
            stat = read_stat(pid, self.proc)
            if stat is None:
                return False
            entry.state = stat.state
        fds = {}  # type: FdMap
        old = {} if refresh else entry.fds
        prefix = self.prefix
        for name in names:
            fd = int(name)
            if fd in old:
                fds[fd] = old[fd]
                continue
            try:
                target = os.readlink(fd_dir + "/" + name)
            except OSError:
                continue  # closed between listdir and readlink
            result.reread += 1
            fds[fd] = target if target.startswith(prefix) else None
        entry.fds = fds
        if refresh:
            entry.last_full = self._scans
        return True

    def staleness_scans(self):
        # type: () -> int
        """How many scans ago, at most, any process's fd table was last read in full."""
        return self.refresh_every

    def forget(self, pid):
        # type: (int) -> None
        self._cache.pop(pid, None)

    def known_state(self, pid):
        # type: (int) -> Optional[str]
        entry = self._cache.get(pid)
        return entry.state if entry else None


def holders_of(prefix, proc=PROC):
    # type: (str, str) -> Dict[int, List[str]]
    """One-shot full scan, for callers that keep no scanner (tests, benchmarks)."""
    result = HolderScanner(prefix, proc).scan(full=True)
    return {pid: list(held) for pid, (_, held) in result.holders.items()}

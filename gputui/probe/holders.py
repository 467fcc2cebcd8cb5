"""Which processes hold GPU device files: a /proc fd scan, incremental between samples.

A full scan lists every process's fd directory and reads every link; its cost is dominated by the
kernel's readlink (GPU_FACTS.md "Costs": ~4.6 us per fd). The steady-state scan does far less:
- a process seen for the first time (new pid, or the same pid with another start time) is read in full;
- a known holder, and every PID NVML lists (`watch`), has its fd directory listed every scan, and
  only fd numbers not seen before are read;
- a known non-holder is listed once every `check_every` scans (round-robin by pid), and on a busy
  host less often, so that about `budget` such directories are listed per scan: a long-running
  process that opens a GPU file later is found within that many scans (one that makes a CUDA
  context is listed by NVML at once, and so watched from the next scan);
- fd numbers are reused (fd 7 closed, later reopened as /dev/nvidiactl), so a cache keyed by fd
  number can miss a new holder: every process has every link re-read once every `refresh_every`
  scans. That bounds how stale the view can be; the probe reports the bound in each sample.
- kernel threads have no fds and are never listed again.
Kill plans and their verification always ask for a full scan.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import os
from typing import Collection, Dict, List, Optional, Tuple  # noqa: F401  (type comments)

from .procfs import PF_KTHREAD, PROC, read_stat

# fd number -> link target, or None when the target is not a device file
FdMap = Dict[int, Optional[str]]


class Entry(object):
    __slots__ = ("fds", "holds", "kthread", "start_time", "state")

    def __init__(self, start_time, state, kthread):
        # type: (int, str, bool) -> None
        self.start_time = start_time
        self.state = state
        self.kthread = kthread
        self.fds = {}  # type: FdMap
        self.holds = ()  # type: Tuple[str, ...]


class ScanResult(object):
    __slots__ = ("full", "holders", "listed", "reread", "states", "unreadable")

    def __init__(self, full):
        # type: (bool) -> None
        self.full = full
        # pid -> (start_time, sorted device files held)
        self.holders = {}  # type: Dict[int, Tuple[int, Tuple[str, ...]]]
        # pid -> state letter for every process in /proc (as last read: exact for holders,
        # for processes read this scan, and for every process after a full scan)
        self.states = {}  # type: Dict[int, str]
        self.unreadable = 0  # fd directories this user may not read (not root)
        self.listed = 0  # fd directories listed
        self.reread = 0  # links read


class HolderScanner(object):
    """Keeps a per-process fd cache; scan() returns the current holders of `prefix*` files."""

    def __init__(self, prefix="/dev/nvidia", proc=PROC, refresh_every=30, check_every=5, budget=100):
        # type: (str, str, int, int, int) -> None
        self.prefix = prefix
        self.proc = proc
        self.base_refresh_every = self.refresh_every = max(1, refresh_every)
        self.min_check_every = max(1, min(check_every, self.refresh_every))
        self.check_every = self.min_check_every
        self.budget = max(1, budget)
        self._cache = {}  # type: Dict[int, Entry]
        self._scans = 0

    def scan(self, full=False, watch=()):
        # type: (bool, Collection[int]) -> ScanResult
        self._scans += 1
        n = self._scans
        result = ScanResult(full)
        cache = self._cache
        fresh = {}  # type: Dict[int, Entry]
        for name in os.listdir(self.proc):
            if not name.isdigit():
                continue
            pid = int(name)
            entry = cache.get(pid)
            refresh = full or (n + pid) % self.refresh_every == 0
            if entry is None or refresh:
                entry = self._identify(pid, entry)
                if entry is None:
                    continue
                check = True
            else:
                check = bool(entry.holds) or pid in watch or (n + pid) % self.check_every == 0
            fresh[pid] = entry
            result.states[pid] = entry.state
            if entry.kthread:
                continue
            if check and not self._update(pid, entry, refresh, result):
                del fresh[pid]
                continue
            if entry.holds:
                result.holders[pid] = (entry.start_time, entry.holds)
        self._cache = fresh
        # Keep the round-robin to about `budget` listings per scan however many processes there are.
        self.check_every = max(self.min_check_every, -(-len(fresh) // self.budget))
        self.refresh_every = max(self.base_refresh_every, 4 * self.check_every)
        return result

    def _identify(self, pid, entry):
        # type: (int, Optional[Entry]) -> Optional[Entry]
        """(Re)read a process's stat; a new start time means a new process behind a reused pid."""
        stat = read_stat(pid, self.proc)
        if stat is None:
            return None
        if entry is None or entry.start_time != stat.start_time:
            return Entry(stat.start_time, stat.state, bool(stat.flags & PF_KTHREAD))
        entry.state = stat.state
        return entry

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
        result.listed += 1
        if not names and entry.fds:
            # An empty fd table where there were fds: it exited (a zombie) or is exiting.
            stat = read_stat(pid, self.proc)
            if stat is None:
                return False
            entry.state = result.states[pid] = stat.state
        old = {} if refresh else entry.fds
        fds = {}  # type: FdMap
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
        entry.holds = tuple(sorted(set(t for t in fds.values() if t is not None)))
        return True

    def staleness(self):
        # type: () -> Tuple[int, int]
        """(scans within which a known process that opens a device file is seen, worst case bound
        when an fd number is reused). Multiply by the sample interval for seconds."""
        return self.check_every, self.refresh_every

    def state_of(self, pid):
        # type: (int) -> Optional[str]
        entry = self._cache.get(pid)
        return entry.state if entry else None


def holders_of(prefix, proc=PROC):
    # type: (str, str) -> Dict[int, List[str]]
    """One-shot full scan, for callers that keep no scanner (tests, benchmarks)."""
    result = HolderScanner(prefix, proc).scan(full=True)
    return {pid: list(held) for pid, (_, held) in result.holders.items()}

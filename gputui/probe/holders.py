"""Which processes hold GPU device files: a /proc fd scan, incremental between samples, targeted
during a kill plan.

A full scan lists every process's fd directory and reads every link; its cost is dominated by the
kernel's readlink (GPU_FACTS.md "Costs": ~4.6 us per fd). The other two kinds of scan read less.

The steady-state scan (every sample):
- a process seen for the first time (new pid, or the same pid with another start time) is read in
  full at once. /proc is listed when the kernel has handed out a PID since the last listing (the
  last one is in /proc/loadavg), and at least every `recheck_every` scans;
- known holders and every PID NVML lists (`watch`) get a turn every scan; every other known process
  gets one every `check_every` scans, at its own place on a wheel of scans (on a busy host less
  often: about `budget` turns per scan);
- a turn starts with /proc/PID/schedstat. When it is what it was right before the process's fds were
  last listed, the process has not run since (see "The sleeper rule"), so its fd table is what was
  read: nothing more is read. Otherwise its fd directory is listed and only fd numbers not seen
  before are read;
- fd numbers are reused (fd 7 closed, later reopened as /dev/nvidiactl), so a cache keyed by fd
  number can miss a new holder: a process that has run since its last full read (every link re-read)
  gets one within `refresh_every` scans (4 turn periods);
- and every process gets a full read within `recheck_every` scans (32 turn periods), whatever the
  rule says: the honest worst case, which `staleness()` reports with the turn period. After a full
  scan, which reads every process at once, the next ones come due spread out by pid (earlier).
- kernel threads have no fds and are never listed again.
On 2,000 idle processes of 40 fds (docs/BENCHMARKS.md section 2) a turn is one 3-syscall read, and
a scan about 100 of them, the holders' and 3 full reads.

The sleeper rule. /proc/PID/schedstat is "run time (ns), run delay (ns), times scheduled in" of the
process's main thread. A thread that gets a CPU adds to the third number and, when it leaves it or
at the scheduler's tick (every 1 to 10 ms; every second on a nohz_full CPU), to the first. So equal
readings a turn apart mean the thread never ran in between, unless it was on a CPU at the first
reading and stayed there with no tick: ruled out by taking the first reading as a baseline only
when stat, read right after it, shows the thread asleep (S, D, T or I: a thread that was on its way
to sleep leaves the CPU and adds run time). Changing an fd table takes a system call by a thread
that shares it (io_uring and seccomp add fds through the process's own threads); a process that had
one thread (stat field 20) after the baseline, and whose thread has not run since, had no thread
that could make one: it created none without running. What the rule cannot see: another *process*
sharing the fd table (clone(CLONE_FILES) without CLONE_THREAD; no CUDA program, launcher or language
runtime we know of does it), and a thread on a nohz_full CPU that ran through two turns less than a
second apart. `recheck_every` bounds both. Where schedstat is missing, zeroed (a kernel without
CONFIG_SCHED_INFO) or unreadable, the rule never applies. tests/probe/test_holders.py proves it on
real processes: a sleeper is skipped, and one that opens, closes or reuses an fd number is not.

The targeted scan (a kill plan's rescans and its verification: run/state.RunState.look): every link of
`also` (the plan's own PIDs and its targets' pre-signal descendants) and of every process new since
the last scan; and, when `around` names PIDs, every process's /proc/PID/stat (cheap: no fd listed)
to read in full those PIDs' process groups, sessions and subtrees too (`related`; `holders`: every
known holder as well, for a plan that sweeps). classify.py links a holder to a PID only through its
process group, session or ancestry, so a holder outside that set is linked to none of `around`
(reaper.py says why that is enough for a plan).

Kill plans and resets start from a full scan; the full scan reads everything, rule or no rule.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import os
from typing import Collection, Dict, Iterable, List, Optional, Set, Tuple  # noqa: F401  (type comments)

from .procfs import PF_KTHREAD, PROC, STAT_SIZE, read_head

# fd number -> link target, or None when the target is not a device file
FdMap = Dict[int, Optional[str]]
# What a turn reads of /proc/PID/stat: (state, ppid, pgid, sid, flags, threads, start time)
StatLine = Tuple[str, int, int, int, int, int, int]

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
_ASLEEP = frozenset(("S", "D", "T", "t", "I"))  # states in which the process is off every CPU
_NO_SCHEDSTAT = b"0 0 0\n"  # what a kernel without scheduler statistics prints


def read_stat_line(pid, proc=PROC):
    # type: (int, str) -> Optional[StatLine]
    """The fields of /proc/PID/stat a scan needs; None when the process is gone. The command name
    may hold spaces and parentheses: split after the last ')'."""
    raw = read_head("%s/%d/stat" % (proc, pid), STAT_SIZE)
    if not raw:
        return None
    try:
        f = raw[raw.rindex(b")") + 2 :].split(None, 20)  # up to field 22, the start time
        return (
            f[0].decode("ascii", "replace"),
            int(f[1]),
            int(f[2]),
            int(f[3]),
            int(f[6]),
            int(f[17]),
            int(f[19]),
        )
    except (ValueError, IndexError):
        return None  # torn by an exit mid-read


def read_schedstat(pid, proc=PROC):
    # type: (int, str) -> Optional[bytes]
    """/proc/PID/schedstat as read, or None where it says nothing (missing, unreadable, zeroed)."""
    raw = read_head("%s/%d/schedstat" % (proc, pid), 128)
    if not raw or raw == _NO_SCHEDSTAT:
        return None
    return raw


def descendants(roots, proc=PROC):
    # type: (Iterable[int], str) -> Dict[int, int]
    """Every process below `roots` in the process tree now: {pid: start time}. One pass over /proc,
    reading each stat in three system calls (procfs.read_stat takes twice as many)."""
    children = {}  # type: Dict[int, List[Tuple[int, int]]]
    for name in os.listdir(proc):
        if name.isdigit():
            line = read_stat_line(int(name), proc)
            if line is not None:
                children.setdefault(line[1], []).append((int(name), line[6]))
    out = {}  # type: Dict[int, int]
    todo = list(roots)
    while todo:
        for pid, start in children.get(todo.pop(), ()):
            if pid not in out:
                out[pid] = start
                todo.append(pid)
    return out


def related(entries, around, also=(), holders=False, new=()):
    # type: (Dict[int, Entry], Collection[int], Collection[int], bool, Collection[int]) -> Set[int]
    """What a targeted scan reads in full (module docstring, "The targeted scan"): the PIDs `around`,
    every process in their process groups or sessions or below them in the tree `entries` describe
    (pid -> its stat as read), `also`, `new`, and, when `holders`, every entry holding a device file.
    classify.py links a holder to a PID only through its process group, session or ancestry, so a
    holder not in this set is linked to none of `around` (tests/probe/test_rescan.py proves it on
    generated process trees)."""
    roots = set(around)
    out = set(roots)
    out.update(also)
    out.update(new)
    children = {}  # type: Dict[int, List[int]]
    for pid, entry in entries.items():
        if entry.pgid in roots or entry.sid in roots or (holders and entry.holds):
            out.add(pid)
        children.setdefault(entry.ppid, []).append(pid)
    below = set()  # type: Set[int]
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in below:
                below.add(child)
                todo.append(child)
    out.update(below)
    return out


class Entry(object):
    __slots__ = (
        "fds",
        "full_at",
        "full_sched",
        "holds",
        "kthread",
        "listed_sched",
        "pgid",
        "ppid",
        "sid",
        "start_time",
        "state",
        "turn_due",
    )

    def __init__(self, line):
        # type: (StatLine) -> None
        self.start_time = line[6]
        self.kthread = bool(line[4] & PF_KTHREAD)
        self.state, self.ppid, self.pgid, self.sid = line[0], line[1], line[2], line[3]
        self.fds = {}  # type: FdMap
        self.holds = ()  # type: Tuple[str, ...]
        self.full_at = 0  # scan number of the last full read (every link)
        # schedstat right before the last listing and before the last full read, where the sleeper
        # rule holds for it (one thread, asleep); None where it does not
        self.listed_sched = None  # type: Optional[bytes]
        self.full_sched = None  # type: Optional[bytes]
        self.turn_due = 0  # scan number of its next turn in the steady-state scan

    def update(self, line):
        # type: (StatLine) -> None
        self.state, self.ppid, self.pgid, self.sid = line[0], line[1], line[2], line[3]


class ScanResult(object):
    __slots__ = ("full", "holders", "listed", "reread", "skipped", "states", "targeted", "unreadable")

    def __init__(self, full, targeted=False):
        # type: (bool, bool) -> None
        self.full = full
        self.targeted = targeted  # every stat read; what can hold the given PIDs' memory read in full
        # pid -> (start_time, sorted device files held)
        self.holders = {}  # type: Dict[int, Tuple[int, Tuple[str, ...]]]
        # pid -> state letter for every process in /proc (as last read: exact for holders, for
        # processes read this scan, and for every process after a full or targeted scan)
        self.states = {}  # type: Dict[int, str]
        self.unreadable = 0  # fd directories this user may not read (not root)
        self.listed = 0  # fd directories listed
        self.reread = 0  # links read
        self.skipped = 0  # turns that read only schedstat: the process had not run


class HolderScanner(object):
    """Keeps a per-process fd cache; scan() returns the current holders of `prefix*` files."""

    def __init__(
        self, prefix="/dev/nvidia", proc=PROC, refresh_every=30, check_every=5, budget=100, recheck_every=None
    ):
        # type: (str, str, int, int, int, Optional[int]) -> None
        self.prefix = prefix
        self.proc = proc
        self.base_refresh_every = self.refresh_every = max(1, refresh_every)
        self.min_check_every = max(1, min(check_every, self.refresh_every))
        self.check_every = self.min_check_every
        self.budget = max(1, budget)
        # The unconditional full read: by default every 4 refresh periods (module docstring).
        self.base_recheck_every = max(self.refresh_every, recheck_every or 4 * self.refresh_every)
        self.recheck_every = self.base_recheck_every
        self._cache = {}  # type: Dict[int, Entry]
        self._states = {}  # type: Dict[int, str]  # pid -> state letter as last read, of the cache
        self._names = set()  # type: Set[str]  # /proc names of the processes in the cache
        self._holding = set()  # type: Set[int]  # pids in the cache that hold a device file
        self._wheel = {}  # type: Dict[int, List[int]]  # scan number -> pids whose turn it is
        self._share = 1
        self._last_pid = []  # type: List[bytes]  # /proc/loadavg's last PID at the last listing
        self._listed_at = 0  # scan number of the last listing of /proc
        self._scans = 0

    # -- the three scans ---------------------------------------------------------------------

    def scan(self, full=False, watch=(), around=None, also=(), holders=False):
        # type: (bool, Collection[int], Optional[Collection[int]], Collection[int], bool) -> ScanResult
        """Full: every process, every link. `around` (PIDs): targeted (module docstring; `also`:
        more PIDs to read in full; `holders`: every known holder too). Otherwise the steady-state
        scan; `watch` (the PIDs NVML lists) get a turn every scan."""
        self._scans += 1
        names = self._listing(full or around is not None)
        # Pace the turns (and stagger the first turns of new processes) for this many processes.
        self._pace(len(self._cache) or len(names or ()))
        if names is None:
            result = ScanResult(False)
            self._steady(None, result, watch)
        elif full or around:
            result = ScanResult(full, targeted=not full)
            self._stat_pass(names, result, full, around or (), also, holders)
            self._turns(result, read=not full)
        elif around is not None:
            result = ScanResult(False, targeted=True)
            self._explicit(names, result, also, holders)
            self._turns(result)
        else:
            result = ScanResult(False)
            self._steady(names, result, watch)
        cache = self._cache
        result.states = dict(self._states)
        for pid in self._holding:
            entry = cache[pid]
            result.holders[pid] = (entry.start_time, entry.holds)
        self._pace(len(cache))
        return result

    def _listing(self, needed):
        # type: (bool) -> Optional[List[str]]
        """/proc's entries; None when no process can have appeared since the last listing: the last
        PID the kernel handed out (/proc/loadavg, this PID namespace's) is the same, and that listing
        is less than recheck_every scans old (PIDs that wrapped round to exactly the same one: within
        the worst case the scanner reports)."""
        last = read_head(self.proc + "/loadavg", 256)
        if (
            not needed
            and last is not None
            and last.rsplit(None, 1)[-1:] == self._last_pid
            and self._scans - self._listed_at < self.recheck_every
        ):
            return None
        names = os.listdir(self.proc)
        self._last_pid = last.rsplit(None, 1)[-1:] if last is not None else []
        self._listed_at = self._scans
        return names

    def _steady(self, names, result, watch):
        # type: (Optional[List[str]], ScanResult, Collection[int]) -> None
        """`names`: /proc's entries, or None when nothing new can be there (processes that have gone
        leave at their next turn)."""
        cache = self._cache
        if names is not None:
            now = set(names)
            for name in self._names - now:
                self._drop(int(name))
            for name in now - self._names:
                if name.isdigit():
                    self._new(int(name), result)
        # Holders and listed PIDs every scan; then the turns due now.
        every = set(self._holding)
        every.update(p for p in watch if p in cache)
        for pid in every:
            self._turn(pid, result)
        self._turns(result, skip=every)

    def _turns(self, result, read=True, skip=()):
        # type: (ScanResult, bool, Collection[int]) -> None
        """The turns due this scan (`read`: take them; else, after a full scan, only plan the next)."""
        n = self._scans
        cache = self._cache
        for pid in self._wheel.pop(n, ()):
            entry = cache.get(pid)
            if entry is None or entry.turn_due != n:
                continue  # gone, or a later process on that pid with a turn of its own
            if read and pid not in skip:
                self._turn(pid, result)
                entry = cache.get(pid)
            if entry is not None:
                self._plan(pid, entry, n + self.check_every)

    def _stat_pass(self, names, result, full, around, also, holders):
        # type: (List[str], ScanResult, bool, Collection[int], Collection[int], bool) -> None
        """Full or targeted: every process's stat now, then the full reads (every process's when
        `full`; else what can hold the memory of `around`)."""
        cache = self._cache
        fresh = {}  # type: Dict[int, Entry]
        new = []  # type: List[int]
        for name in names:
            if not name.isdigit():
                continue
            pid = int(name)
            # A full scan reads schedstat first: the sleeper rule's baseline (see _list).
            sched = read_schedstat(pid, self.proc) if full else None
            line = read_stat_line(pid, self.proc)
            if line is None:
                continue
            entry = cache.get(pid)
            if entry is None or entry.start_time != line[6]:
                entry = self._fresh_entry(pid, line, entry)
                new.append(pid)
            if full and not entry.kthread:
                if not self._list(pid, entry, line, sched, True, result):
                    continue  # gone since its stat
                # Read together, due together: date the read back by up to a recheck period, by
                # pid, so that the next full reads come spread out (earlier is never late).
                entry.full_at -= pid % self.recheck_every
            else:
                entry.update(line)
            fresh[pid] = entry
        self._cache = fresh
        self._states = dict((pid, e.state) for pid, e in fresh.items())
        self._names = set(str(pid) for pid in fresh)
        self._holding = set(pid for pid, e in fresh.items() if e.holds)
        if not full:
            for pid in related(fresh, around, also, holders, new):
                entry = fresh.get(pid)
                if entry is not None and not entry.kthread:
                    self._read(pid, entry, read_schedstat(pid, self.proc), True, result)

    def _explicit(self, names, result, also, holders):
        # type: (List[str], ScanResult, Collection[int], bool) -> None
        """Targeted around no PID: no stat pass (no process group, session or subtree to find), only
        the new processes and `also` (and the known holders, when asked) read in full."""
        cache = self._cache
        now = set(names)
        for name in self._names - now:
            self._drop(int(name))
        new = set()  # type: Set[int]
        for name in now - self._names:
            if name.isdigit():
                new.add(int(name))
                self._new(int(name), result)
        wanted = set(also) | (self._holding if holders else set())
        for pid in wanted - new:
            entry = cache.get(pid)
            if entry is not None and not entry.kthread:
                self._read(pid, entry, read_schedstat(pid, self.proc), True, result)

    # -- reading one process -----------------------------------------------------------------

    def _fresh_entry(self, pid, line, old):
        # type: (int, StatLine, Optional[Entry]) -> Entry
        """The entry of a process seen for the first time; its turns are staggered by pid (a later
        process on a known pid keeps the turn that pid had)."""
        entry = Entry(line)
        if entry.kthread:
            return entry  # no fds, no turns
        if old is not None and old.turn_due > self._scans:
            entry.turn_due = old.turn_due
        else:
            self._plan(pid, entry, self._scans + 1 + pid % self.check_every)
        return entry

    def _new(self, pid, result):
        # type: (int, ScanResult) -> None
        sched = read_schedstat(pid, self.proc)
        line = read_stat_line(pid, self.proc)
        if line is None:
            return
        entry = self._fresh_entry(pid, line, None)
        if not entry.kthread and not self._list(pid, entry, line, sched, True, result):
            return
        self._cache[pid] = entry
        self._states[pid] = entry.state
        self._names.add(str(pid))

    def _turn(self, pid, result):
        # type: (int, ScanResult) -> None
        """A known process's turn in the steady-state scan."""
        entry = self._cache[pid]
        if entry.kthread:
            return
        sched = read_schedstat(pid, self.proc)
        since = self._scans - entry.full_at
        full = since >= self._due(self.recheck_every) or (
            since >= self._due(self.refresh_every) and (sched is None or sched != entry.full_sched)
        )
        if not full and sched is not None and sched == entry.listed_sched:
            result.skipped += 1  # it has not run since its fds were listed: nothing changed
            return
        self._read(pid, entry, sched, full, result)

    def _read(self, pid, entry, sched, full, result):
        # type: (int, Entry, Optional[bytes], bool, ScanResult) -> None
        """Read a known process's stat (after `sched`, which the caller read), then its fds."""
        line = read_stat_line(pid, self.proc)
        if line is not None and line[6] != entry.start_time:
            # Another process behind a reused pid: new to us, read in full.
            entry = self._cache[pid] = self._fresh_entry(pid, line, entry)
            self._holding.discard(pid)
            if entry.kthread:
                return
            full = True
        if line is None or not self._list(pid, entry, line, sched, full, result):
            self._drop(pid)

    def _list(self, pid, entry, line, sched, full, result):
        # type: (int, Entry, StatLine, Optional[bytes], bool, ScanResult) -> bool
        """List the fds of a process: every link when `full`, else the fd numbers not seen before.
        `sched` was read before `line`, and `line` before the listing: when `line` shows one thread,
        asleep, `sched` is the baseline the sleeper rule compares later turns with. False when the
        process has gone."""
        entry.update(line)
        self._states[pid] = entry.state
        try:
            # Links read relative to the open directory: the kernel resolves /proc/PID/fd once, not
            # once per fd (a fifth less time per link).
            dir_fd = os.open("%s/%d/fd" % (self.proc, pid), _DIRECTORY)
        except PermissionError:
            result.unreadable += 1
            entry.listed_sched = entry.full_sched = None
            return True
        except OSError:
            return False
        try:
            names = os.listdir(dir_fd)
            result.listed += 1
            old = {} if full else entry.fds
            fds = {}  # type: FdMap
            prefix = self.prefix
            for name in names:
                fd = int(name)
                if fd in old:
                    fds[fd] = old[fd]
                    continue
                try:
                    target = os.readlink(name, dir_fd=dir_fd)
                except OSError:
                    continue  # closed between listdir and readlink
                result.reread += 1
                fds[fd] = target if target.startswith(prefix) else None
        except OSError:
            return False  # gone while listed
        finally:
            os.close(dir_fd)
        entry.fds = fds
        entry.holds = tuple(sorted(set(t for t in fds.values() if t is not None)))
        if entry.holds:
            self._holding.add(pid)
        else:
            self._holding.discard(pid)
        trusted = sched if sched is not None and line[5] == 1 and line[0] in _ASLEEP else None
        entry.listed_sched = trusted
        if full:
            entry.full_at = self._scans
            entry.full_sched = trusted
        return True

    def _due(self, period):
        # type: (int) -> int
        """Scans after its last full read at which a process's next full read is due, so that it comes
        within `period` (its next turn may be check_every scans away)."""
        return max(1, period - self.check_every + 1)

    def _plan(self, pid, entry, at):
        # type: (int, Entry, int) -> None
        """Its next turn at scan `at`, or earlier where that scan has its share already (so that the
        turns stay spread evenly when processes come and go, or the pace changes)."""
        wheel = self._wheel
        while at > self._scans + 1 and len(wheel.get(at, ())) >= self._share:
            at -= 1
        entry.turn_due = at
        wheel.setdefault(at, []).append(pid)

    def _drop(self, pid):
        # type: (int) -> None
        self._cache.pop(pid, None)
        self._states.pop(pid, None)
        self._names.discard(str(pid))
        self._holding.discard(pid)

    def _pace(self, count):
        # type: (int) -> None
        """Keep to about `budget` turns per scan with `count` processes."""
        self.check_every = max(self.min_check_every, -(-count // self.budget))
        self._share = -(-count // self.check_every) + 1  # turns per scan, and one for rounding
        self.refresh_every = max(self.base_refresh_every, 4 * self.check_every)
        # The unconditional full read costs as much as ~25 turns: at one per 32 turn periods, a
        # host of idle processes pays about 3 full reads per 100 turns.
        self.recheck_every = max(self.base_recheck_every, 32 * self.check_every, self.refresh_every)

    # -- what the probe reports --------------------------------------------------------------

    def staleness(self):
        # type: () -> Tuple[int, int]
        """(scans within which a known process that opens a device file is seen: its next turn; scans
        within which every process has had every link re-read: the worst case, an fd number reused
        or an fd table shared with another process). Multiply by the sample interval for seconds."""
        furthest = max(self._wheel) - self._scans if self._wheel else 0
        check = max(self.check_every, furthest)
        return check, max(self.recheck_every, check)

    def state_of(self, pid):
        # type: (int) -> Optional[str]
        entry = self._cache.get(pid)
        return entry.state if entry else None


def holders_of(prefix, proc=PROC):
    # type: (str, str) -> Dict[int, List[str]]
    """One-shot full scan, for callers that keep no scanner (tests, benchmarks)."""
    result = HolderScanner(prefix, proc).scan(full=True)
    return {pid: list(held) for pid, (_, held) in result.holders.items()}

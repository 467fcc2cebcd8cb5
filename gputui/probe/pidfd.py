"""Process handles (pidfds): how this host opens them, and the pins the probe keeps.

A pidfd refers to one process for its whole life: it becomes readable when that process exits, and
a signal sent through it cannot reach a later owner of the PID. A process is named by (pid, start
time) everywhere, but start times count clock ticks (10 ms): a PID reused within one tick names a
newcomer with the same start time, which nothing in /proc tells from the process the operator saw.
Only a handle taken when the process was seen can.

Pins: the probe opens a pidfd for each live GPU process (NVML user, hidden holder, monitor: what a
plan can target) when a scan first lists it, before it reads the process's stat and command line,
and keeps it while the process stays a GPU process. A plan naming (pid, start time) borrows that
pidfd (`lend`): if it has become readable, the process the scan listed has exited, whatever holds the
PID now; else signals go through it to that process and no other. Records:
- a live pin: (start time, pidfd);
- a tombstone: the pinned process exited. Kept while a process with the same (pid, start time) may
  exist (a twin started in the same tick: it is never pinned under the name of the dead one, and a
  plan naming that name is told the process exited), dropped once the PID names a process with
  another start time, or none and the clock is past that tick.
Where no pin could be taken (no pidfd on this host, past the descriptor budget, a process first seen
by the plan's own check), the kill engine falls back to opening a pidfd at its check (checks.py).

Descriptors: at most half the soft limit, less a reserve, go to pins; an EMFILE stops the pinning
for that scan. A pin that could not be taken only means the weaker check; nothing is ever taken for
gone without a readable pidfd or /proc saying so.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import errno
import os
import platform
import select
import signal
import time
from typing import Callable, Dict, Iterable, List, Optional, Tuple  # noqa: F401  (type comments)

from .procfs import CLOCK_TICKS, close_quietly, read_stat

# pidfd_open / pidfd_send_signal in the unified syscall table (Linux 5.1+), for Python 3.8.
_SYSCALLS = {"pidfd_send_signal": 424, "pidfd_open": 434}
_UNIFIED_ARCHES = ("x86_64", "amd64", "aarch64", "arm64", "ppc64le", "s390x", "riscv64", "i686", "i386")
PIN_RESERVE = 128  # descriptors pins leave to the rest of the probe (besides half the limit)
MAX_PINS = 1 << 16


class Syscalls(object):
    """pidfd_open and pidfd_send_signal through libc's syscall(), where Python lacks them (3.8)."""

    def __init__(self):
        # type: () -> None
        import ctypes

        self._ctypes = ctypes
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.syscall.restype = ctypes.c_long

    def _check(self, result):
        # type: (int) -> int
        if result < 0:
            err = self._ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return result

    def pidfd_open(self, pid):
        # type: (int) -> int
        c = self._ctypes
        return self._check(self._libc.syscall(c.c_long(_SYSCALLS["pidfd_open"]), c.c_int(pid), c.c_uint(0)))

    def pidfd_send_signal(self, fd, sig):
        # type: (int, int) -> None
        c = self._ctypes
        number = c.c_long(_SYSCALLS["pidfd_send_signal"])
        self._check(self._libc.syscall(number, c.c_int(fd), c.c_int(sig), c.c_void_p(None), c.c_uint(0)))


def best_method():
    # type: () -> str
    """pidfd when both Python and the kernel have it; else the raw syscalls; else plain kill()."""
    if hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal"):
        if pidfd_works(os.pidfd_open):  # type: ignore[attr-defined]  # novermin (3.9+, checked)
            return "pidfd"
        return "kill"
    if platform.system() == "Linux" and platform.machine().lower() in _UNIFIED_ARCHES:
        try:
            sys_calls = Syscalls()
        except (OSError, AttributeError):
            return "kill"
        if pidfd_works(sys_calls.pidfd_open):
            return "pidfd-syscall"
    return "kill"


def pidfd_works(pidfd_open):
    # type: (Callable[[int], int]) -> bool
    try:
        os.close(pidfd_open(os.getpid()))
        return True
    except OSError:
        return False  # ENOSYS: a kernel before 5.3


def opener(method):
    # type: (str) -> Optional[Callable[[int], int]]
    """pidfd_open for `method` ("pidfd", "pidfd-syscall"); None for "kill" (no pidfds)."""
    if method == "pidfd":
        pidfd_open = os.pidfd_open  # type: ignore[attr-defined]  # novermin (3.9+, checked)
        return pidfd_open  # type: ignore[no-any-return]
    if method == "pidfd-syscall":
        return Syscalls().pidfd_open
    return None


def exited(fds):
    # type: (Iterable[int]) -> List[int]
    """Those of `fds` whose process has exited (readable), in one poll that does not wait."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return [fd for fd, _ in poller.poll(0)]


def _ticks_since_boot():
    # type: () -> int
    """Now, in the clock start times count: CLOCK_BOOTTIME on the kernels that have pidfds (5.3 and
    later; from 5.5 start times count boot time, before it monotonic time, which lags boot time only
    after a suspend)."""
    clock = getattr(time, "CLOCK_BOOTTIME", None)
    now = time.clock_gettime(clock) if clock is not None else time.monotonic()
    return int(now * CLOCK_TICKS)


# What `Pins.lend` answers.
NO_PIN, PINNED, EXITED = "no-pin", "pinned", "exited"


class _Pin(object):
    __slots__ = ("fd", "lent", "start_time")

    def __init__(self, start_time, fd):
        # type: (int, Optional[int]) -> None
        self.start_time = start_time
        self.fd = fd  # None: a tombstone (the pinned process exited)
        self.lent = False


class Pins(object):
    """The pidfds of the GPU processes the probe lists (module docstring)."""

    def __init__(self, method, proc="/proc"):
        # type: (str, str) -> None
        self.method = method
        self._open = opener(method)
        self._proc = proc
        self._pins = {}  # type: Dict[int, _Pin]
        self._pending = {}  # type: Dict[int, int]  # pid -> pidfd opened by begin(), not yet settled
        self._live = 0  # open pidfds held (lent ones included)
        self._closed = False

    @property
    def enabled(self):
        # type: () -> bool
        return self._open is not None

    def __len__(self):
        # type: () -> int
        return self._live

    # -- the scan's two steps ----------------------------------------------------------------

    def begin(self, pids):
        # type: (Iterable[int]) -> None
        """Before the probe reads the stat and command line of `pids` (the GPU processes a scan
        found): note the pinned processes that have exited, and open a pidfd for each PID not
        pinned yet, so that what is read next is read of the process the pidfd pins."""
        if self._open is None or self._closed:
            return
        self._close_pending()
        self._note_exits()
        room = self._room()
        for pid in pids:
            pin = self._pins.get(pid)
            if pid in self._pending or (pin is not None and pin.fd is not None):
                continue  # pinned already (or lent to a plan)
            if room <= 0:
                break
            try:
                fd = self._open(pid)
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    break  # no descriptor left: the rest stay unpinned this time
                continue  # ESRCH: gone already
            self._pending[pid] = fd
            self._live += 1
            room -= 1

    def settle(self, seen):
        # type: (Dict[int, int]) -> None
        """After the reads: `seen` is {pid: start time} of the live GPU processes the scan describes.
        A pidfd opened by begin() becomes a pin when its process is still alive now (its reads were
        of it) and it is not the twin of a tombstone; pins and tombstones no longer needed go."""
        pending, self._pending = self._pending, {}
        gone = set(exited(pending.values())) if pending else set()
        for pid, fd in pending.items():
            start = seen.get(pid)
            old = self._pins.get(pid)
            if fd in gone or start is None or (old is not None and old.start_time == start):
                # Exited before it could be confirmed, not a GPU process, or the same name as a
                # pinned process that exited (a twin started within its clock tick).
                self._close(fd)
                continue
            self._pins[pid] = _Pin(start, fd)
        now = _ticks_since_boot()
        for pid in list(self._pins):
            pin = self._pins[pid]
            start = seen.get(pid)
            if pin.lent or (pin.fd is not None and start == pin.start_time):
                continue  # in a plan's hands, or still a GPU process: kept
            if start is not None and start != pin.start_time:
                # The PID names a later process: the pinned one has exited (a live process keeps its
                # PID), and its tick is past.
                if pin.fd is not None:
                    self._close(pin.fd)
                del self._pins[pid]
                continue
            if pin.fd is not None:
                # No longer a GPU process, or gone: alive, it is no target any more; exited, it
                # leaves a tombstone for as long as a twin could take its name.
                fd, pin.fd = pin.fd, None
                alive = not exited([fd])
                self._close(fd)
                if alive:
                    del self._pins[pid]
                    continue
            if not self._may_have_twin(pid, pin.start_time, now):
                del self._pins[pid]

    # -- a plan's side -----------------------------------------------------------------------

    def lend(self, pid, start_time):
        # type: (int, int) -> Tuple[str, Optional[int]]
        """(PINNED, pidfd) of the process a scan listed as (pid, start_time), lent until give_back;
        (EXITED, None) when that process has exited, whatever holds the PID now; (NO_PIN, None)
        when it was never pinned."""
        pin = self._pins.get(pid)
        if pin is None or pin.start_time != start_time or pin.lent:
            return NO_PIN, None
        if pin.fd is None:
            return EXITED, None
        if exited([pin.fd]):
            self._close(pin.fd)
            pin.fd = None
            return EXITED, None
        pin.lent = True
        return PINNED, pin.fd

    def give_back(self, pid, fd):
        # type: (int, int) -> None
        """A lent pidfd returns to its pin (the next scan sees whether its process has exited)."""
        pin = self._pins.get(pid)
        if pin is None or pin.fd != fd or not pin.lent:
            self._close(fd)  # not a pin's (never happens), but not leaked either
        elif self._closed:
            del self._pins[pid]
            self._close(fd)
        else:
            pin.lent = False

    def close(self):
        # type: () -> None
        """Close every pidfd but those lent to a running plan (each closes when given back)."""
        self._closed = True
        self._close_pending()
        for pid, pin in list(self._pins.items()):
            if not pin.lent:
                if pin.fd is not None:
                    self._close(pin.fd)
                del self._pins[pid]

    # -- helpers -----------------------------------------------------------------------------

    def _note_exits(self):
        # type: () -> None
        held = dict((pin.fd, pin) for pin in self._pins.values() if pin.fd is not None and not pin.lent)
        for fd in exited(held) if held else []:
            self._close(fd)
            held[fd].fd = None

    def _may_have_twin(self, pid, start_time, now):
        # type: (int, int, int) -> bool
        """Can a process named (pid, start_time) exist, now or later? While one does, or while the
        clock is still within that tick (with one to spare)."""
        if now <= start_time + 1:
            return True
        stat = read_stat(pid, self._proc)
        return stat is not None and stat.start_time == start_time

    def _room(self):
        # type: () -> int
        try:
            import resource

            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        except (ImportError, OSError, ValueError):
            return MAX_PINS - self._live
        limit = MAX_PINS if soft == resource.RLIM_INFINITY else min(MAX_PINS, soft // 2 - PIN_RESERVE)
        return limit - self._live

    def _close_pending(self):
        # type: () -> None
        pending, self._pending = self._pending, {}
        for fd in pending.values():
            self._close(fd)

    def _close(self, fd):
        # type: (int) -> None
        close_quietly(fd)
        self._live -= 1

"""How a signal reaches one process, and that process only: the targets' records and the sender.

A target is a process, not a PID: a PID is reused once its process exits. `Proc` names one by PID
and start time and holds the pidfd that pins it (the probe's pin from the scan that listed it,
lent for the plan, or one opened at the check: pidfd.py), and everything that happened to it.
`Killer` sends through that pidfd where the host has them (kernel >= 5.3: a signal cannot reach a
later owner of the PID); without one it re-reads the start time right before kill(). Apart from
the run (reaper.py) so that the one place a signal leaves the probe can be read whole.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import os
import signal
from typing import Any, Dict, List, Optional, Tuple  # noqa: F401  (type comments)

from ..common import brief_command
from ..pidfd import Syscalls, best_method
from ..procfs import read_stat_strict

FD_RESERVE = 64  # descriptors a plan leaves free for /proc reads, scans and NVML
# Set by tests to force a kill method ("pidfd", "pidfd-syscall" or "kill"); None picks the best.
FORCE_METHOD = None  # type: Optional[str]


class Proc(object):
    """One process the plan may signal, and everything that happened to it."""

    __slots__ = (
        "allow",
        "command",
        "exit_signal",
        "exited_ms",
        "fd",
        "gpus",
        "lent",
        "name",
        "origin",
        "parent",
        "pid",
        "ppid",
        "reason",
        "role",
        "signals",
        "start_time",
        "state",
        "uid",
        "user",
        "verdict",
        "why",
    )

    def __init__(self, pid, start_time, reason, gpus, origin):
        # type: (int, int, str, List[int], str) -> None
        self.pid = pid
        self.start_time = start_time
        self.reason = reason  # why the plan (or the rescan) targets it
        self.gpus = gpus
        self.origin = origin  # "plan", "rescan" or "sweep"
        self.role = None  # type: Optional[str]  # its part in a job (orders.JOB_ROLES), or None
        # Its parent when checked, if that parent is part of the same work (a supervisor, a
        # launcher): (pid, start time). A verdict names it when it outlives the plan (restarts).
        self.parent = None  # type: Optional[Tuple[int, int]]
        self.fd = None  # type: Optional[int]
        self.lent = False  # fd is the probe's pin (pidfd.Pins), lent for the plan: given back, not closed
        self.name = None  # type: Optional[str]
        self.command = []  # type: List[str]
        self.user = None  # type: Optional[str]
        self.uid = None  # type: Optional[int]
        self.ppid = None  # type: Optional[int]
        self.state = None  # type: Optional[str]
        self.verdict = None  # type: Optional[str]  # set once final
        self.why = None  # type: Optional[str]  # words for the verdict
        self.allow = None  # type: Optional[str]  # what would allow a refused signal
        self.signals = []  # type: List[str]
        self.exited_ms = None  # type: Optional[float]
        self.exit_signal = None  # type: Optional[str]

    @property
    def pending(self):
        # type: () -> bool
        """Signalled or to be signalled, and not known to have exited."""
        return self.verdict is None and self.exited_ms is None

    def label(self):
        # type: () -> str
        """ "4121 python train.py --lr 3e-4" for messages (the full command is in `data.command`)."""
        words = brief_command(self.command) if self.command else (self.name or "?")
        if len(words) > 100:
            words = words[:97] + "..."
        return "%d %s" % (self.pid, words)

    def identity(self):
        # type: () -> Dict[str, Any]
        return {
            "name": self.name,
            "command": self.command,
            "user": self.user,
            "uid": self.uid,
            "gpus": self.gpus,
            "origin": self.origin,
            "reason": self.reason,
            "role": self.role,
        }


class Killer(object):
    """Opens process handles and sends signals by the best method this host has."""

    def __init__(self, method=None):
        # type: (Optional[str]) -> None
        self.method = method or FORCE_METHOD or best_method()
        self._sys = Syscalls() if self.method == "pidfd-syscall" else None

    @property
    def uses_pidfd(self):
        # type: () -> bool
        return self.method != "kill"

    def open(self, pid):
        # type: (int) -> Optional[int]
        """A pidfd for `pid` (raises ProcessLookupError when it is gone); None without pidfds."""
        if self.method == "pidfd":
            return os.pidfd_open(pid)  # type: ignore[attr-defined]  # novermin (3.9+, checked)
        if self._sys is not None:
            return self._sys.pidfd_open(pid)
        return None

    def send(self, proc, sig):
        # type: (Proc, int) -> None
        if proc.fd is not None:
            if self._sys is not None:
                self._sys.pidfd_send_signal(proc.fd, sig)
            else:
                signal.pidfd_send_signal(proc.fd, sig)  # type: ignore[attr-defined]  # novermin (3.9+, checked)
            return
        # No pidfd: the start time is re-read right before kill(); the window left is a few us.
        stat = read_stat_strict(proc.pid)  # OSError (no descriptor left, say) is not "gone"
        if stat is None or stat.start_time != proc.start_time:
            raise ProcessLookupError(proc.pid)
        os.kill(proc.pid, sig)


METHOD_NOTE = {
    "pidfd": "pidfd: signals cannot reach a reused PID",
    "pidfd-syscall": "pidfd through syscall() (this Python has no os.pidfd_open)",
    "kill": "no pidfd on this host (kernel < 5.3 or unknown architecture): start time re-checked "
    "right before kill(); waiting polls /proc every 10 ms",
}


def signal_name(sig):
    # type: (int) -> str
    try:
        return signal.Signals(sig).name
    except ValueError:
        return str(sig)


def pidfd_budget():
    # type: () -> int
    """How many pidfds a plan may hold at once: the descriptor limit less those open now, less a
    reserve for reading /proc (a process that cannot be looked at is never taken for gone). The
    probe raises its soft limit to the hard one at start; this is for a hard limit of 1,024."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        open_now = len(os.listdir("/proc/self/fd"))
    except (ImportError, OSError, ValueError):
        return 1 << 30
    if soft == resource.RLIM_INFINITY:
        return 1 << 30
    return max(0, soft - open_now - FD_RESERVE)

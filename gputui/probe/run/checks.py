"""The `check` stage of a run: is each target still the process the operator confirmed, and may it
be signalled?

docs/ARCHITECTURE.md "Staged kill-and-verify", step 1. Never signalled: PID 1, the probe and its
ancestors, kernel threads, a monitor the operator did not include, and, as a job's root, an init or
a person's session (`protection`). A target is the process the scan listed when its pidfd, pinned
since that scan, has not become readable, or, without a pin, when its start time still matches
after a pidfd is opened now (`identify`); it must still hold a GPU device file or be listed by NVML
(a job's root, the processes between, and a signal plan's one target need none). A target that
fails a check is never signalled, and its verdict says why (`mark_not_signalled`). Apart from the
stages (reaper.py): these are the rules that keep a signal from the wrong process.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import errno
import os
from typing import Any, Dict, List, Optional, Set, Tuple  # noqa: F401  (type comments)

from ..classify import MONITOR, MONITOR_NAMES
from ..common import SCOPE_SIGNAL
from ..jobs import INIT_COMMS, SESSION_COMMS, boundary, interactive_shell, read_node
from ..peers import PROTECTED as PEER
from ..peers import peer_probe
from ..pidfd import EXITED, PINNED
from ..procfs import (
    PF_KTHREAD,
    PROC,
    holds_device,
    read_cmdline,
    read_stat,
    read_stat_strict,
    read_status,
    user_name,
)
from .orders import Settings  # noqa: F401  (type comments)
from .signals import Proc
from .state import RunState
from .view import View  # noqa: F401  (type comments)
from .words import short_command, zombie_words

NO_GPU_WORDS = "not signalled: holds no GPU now (no GPU device file, not listed by NVML); still running"


class Checks(RunState):
    """A run's `check` stage: takes each target on (`admit`), or says why it will not be signalled."""

    def admit(self, pid, start_time, reason, gpus, origin, view):
        # type: (int, int, str, List[int], str, View) -> Proc
        """The `check` stage: is this still the process the operator confirmed, and may it be signalled?"""
        proc = Proc(pid, start_time, reason, gpus, origin)
        if origin == "plan":
            proc.role = self.plan.roles.get(pid)
        self.procs[pid] = proc
        record = view.records.get(pid)
        fill(proc, record)
        refusal = protection(proc, record, self.probe, self.plan)
        if refusal is not None:
            proc.verdict, proc.why = "protected", refusal
            self.event(
                "check", "protected", "%s: protected (%s), not signalled" % (proc.label(), refusal), proc
            )
            return proc
        try:
            return self.identify(proc, view)
        except OSError as exc:
            # Out of file descriptors, /proc unreadable...: what cannot be looked at is not signalled,
            # and it is not "gone" either.
            return self.mark_not_signalled(
                proc, "not-checked", "could not be checked (%s)" % (exc.strerror or exc)
            )

    def identify(self, proc, view):
        # type: (Proc, View) -> Proc
        """Confirm the target's identity and that it still holds a GPU. The pidfd the probe pinned
        when a scan first listed the process is proof (pidfd.py); without one, a pidfd is opened
        now and the start time re-read after it."""
        pid, start_time = proc.pid, proc.start_time
        pins = getattr(self.probe, "pins", None) if self.killer.uses_pidfd else None
        if pins is not None:
            pinned, fd = pins.lend(pid, start_time)
            if pinned == EXITED:
                return self.exited_since_scan(proc)
            if pinned == PINNED:
                proc.fd, proc.lent = fd, True
        stat = read_stat_strict(pid)
        if stat is None:
            return self.mark_not_signalled(proc, "vanished", "exited before any signal")
        if stat.start_time != start_time:
            return self.mark_not_signalled(proc, "pid-reused", reused_words(start_time, stat.start_time))
        note = "identity confirmed (start time)"
        if proc.lent:
            note = "identity pinned (pidfd held since the scan that listed it)"
        elif self.killer.uses_pidfd and self.pidfds_left <= 0:
            # Descriptors kept for reading /proc: without them a live process could not be told
            # from a gone one. The start time is re-checked right before kill() instead.
            note = "identity confirmed (start time; pidfds kept within the descriptor limit)"
        elif self.killer.uses_pidfd:
            try:
                proc.fd = self.killer.open(pid)
            except ProcessLookupError:
                return self.mark_not_signalled(proc, "vanished", "exited before any signal")
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE):
                    raise
                # No descriptor left for a pidfd: fall back to the start-time check right before
                # kill(), as on a kernel without pidfds.
                self.pidfds_left = 0
                note = "no file descriptor left for a pidfd: start time re-checked before each signal"
            if proc.fd is not None:
                self.pidfds_left -= 1
                note = "identity confirmed (pidfd)"
                # The pidfd pins this process: a start time that still matches now is proof of
                # identity, but for a PID reused within one clock tick (same start time) since the
                # scan; the check below, and the pins where there are some, cover that.
                stat = read_stat_strict(pid)
                if stat is None:
                    return self.mark_not_signalled(proc, "vanished", "exited before any signal")
                if stat.start_time != start_time:
                    return self.mark_not_signalled(
                        proc, "pid-reused", reused_words(start_time, stat.start_time)
                    )
        proc.state, proc.ppid = stat.state, stat.ppid
        if stat.state == "Z":
            return self.mark_not_signalled(proc, "zombie", zombie_words(stat.ppid))
        # What made it a target (a GPU device file, or NVML's list) must still be true: a process
        # that let go of its GPU is not signalled (and is left running: its verdict says so), and
        # without a pin, a PID reused within one clock tick by a process holding no GPU is caught.
        # A job's root and the processes between need no GPU: a launcher holds none; nor does the
        # one process a signal plan names (identified by its pidfd and start time above).
        if proc.role not in ("root", "between") and self.plan.scope != SCOPE_SIGNAL:
            holds = holds_device(pid, self.probe.scanner.prefix)
            if holds is False and pid not in view.listed and pid not in self.probe.read_gpus()[1]:
                return self.mark_not_signalled(proc, "no-gpu", NO_GPU_WORDS)
        proc.parent = supervisor_of(proc, self.probe)
        self.event("check", "ok", "%s: %s" % (proc.label(), note), proc, data={"state": stat.state})
        return proc

    def exited_since_scan(self, proc):
        # type: (Proc) -> Proc
        """The pidfd pinned when a scan listed the target says it has exited: whatever holds its PID
        now is another process, even one with the same start time (started in the same tick)."""
        stat = read_stat_strict(proc.pid)
        if stat is None:
            return self.mark_not_signalled(proc, "vanished", "exited before any signal")
        if stat.start_time != proc.start_time:
            return self.mark_not_signalled(proc, "pid-reused", reused_words(proc.start_time, stat.start_time))
        if stat.state == "Z":  # a zombie keeps its PID: this is the process itself
            proc.ppid = stat.ppid
            return self.mark_not_signalled(proc, "zombie", zombie_words(stat.ppid))
        return self.mark_not_signalled(
            proc,
            "pid-reused",
            "exited before any signal (its pidfd, held since the scan that listed it, says so); PID "
            "%d now names another process, started in the same clock tick" % proc.pid,
        )

    def mark_not_signalled(self, proc, verdict, why):
        # type: (Proc, str, str) -> Proc
        """A target that will not be signalled, and why."""
        self.close(proc)
        proc.verdict, proc.why = verdict, why
        data = {"ppid": proc.ppid} if verdict == "zombie" else {}
        words = why if "not signalled" in why else "%s, not signalled" % why
        self.event("check", verdict, "%s: %s" % (proc.label(), words), proc, data=data)
        return proc


def supervisor_of(proc, probe):
    # type: (Proc, Any) -> Optional[Tuple[int, int]]
    """The target's parent, when it is part of the same work (jobs.boundary: not an init, a
    session, a unit's, Slurm job's or container's edge): one that outlives the plan may start
    the target again (a supervisor, an elastic launcher, a `bash run.sh` loop)."""
    if proc.ppid is None or proc.ppid <= 2:
        return None
    finder = getattr(probe, "jobs", None)
    stop = finder.stop if finder is not None else set()  # type: Set[int]
    child, parent = read_node(proc.pid), read_node(proc.ppid)
    if child is None or parent is None or child.start != proc.start_time or child.ppid != parent.pid:
        return None
    if boundary(child, parent, stop | probe.protected_pids()) is not None:
        return None
    return (parent.pid, parent.start)


def fill(proc, record):
    # type: (Proc, Optional[Dict[str, Any]]) -> None
    """Name, command and owner for the log and the operator, from the scan or from /proc."""
    if record is not None and record.get("start_time") == proc.start_time:
        proc.name, proc.command = record.get("name"), short_command(record.get("command") or [])
        proc.user, proc.uid = record.get("user"), record.get("uid")
        if not proc.gpus:
            proc.gpus = list(record.get("gpus") or [])
        return
    stat = read_stat(proc.pid)
    if stat is None or stat.start_time != proc.start_time:
        return
    proc.name = stat.comm
    proc.command = short_command(read_cmdline(proc.pid))
    status = read_status(proc.pid)
    proc.uid = status.uid if status else None
    proc.user = user_name(proc.uid)


def protection(proc, record, probe, plan):
    # type: (Proc, Optional[Dict[str, Any]], Any, Settings) -> Optional[str]
    """Why `proc` must not be signalled, or None. PID 1, the probe, its ancestors and kernel
    threads are never signalled; a monitor only when the operator included it explicitly."""
    pid = proc.pid
    if pid == 1:
        return "pid-1"
    if pid == probe.pid:
        return "probe"
    if pid in probe.protected_pids():
        return "probe-ancestor"
    stat = read_stat(pid)
    if stat is not None and stat.flags & PF_KTHREAD:
        return "kernel-thread"
    if record is not None and record.get("protected") and record.get("protected") != "monitor":
        reason = str(record["protected"])
        return reason
    # Another gputui's probe, read now: the scan's record may be older than the process, or the
    # plan (a signal plan) may name a process the scan did not list. A process NVML lists on a
    # GPU uses it, whatever its command line says.
    listed = record is not None and record.get("kind") in ("user", "ghost")
    if not listed and peer_probe(pid):
        return PEER
    # A monitor by the scan's classification or by name (one that holds no device file just now).
    monitor = (record is not None and record.get("kind") == MONITOR) or (
        stat is not None and stat.comm in MONITOR_NAMES
    )
    if monitor and pid not in plan.include_protected:
        return "monitor"
    if (proc.role in ("root", "between") or plan.scope == SCOPE_SIGNAL) and stat is not None:
        return head_protection(proc, stat, probe)  # a signal plan's target needs no GPU: as a root
    return None


def head_protection(proc, stat, probe):
    # type: (Proc, Any, Any) -> Optional[str]
    """A job's root (or a process between it and its members) is never an init or a person's
    session, whatever the plan says: the app finds roots below them, and this is the check
    that does not trust it. The processes that act as init here (the probe's ancestors, a
    reader's subreaper such as the sim's session) are never a root either, nor the gputui that
    owns another gputui's probe."""
    finder = getattr(probe, "jobs", None)
    stop = finder.stop if finder is not None else set()  # type: Set[int]
    if proc.pid in stop or proc.pid <= 2 or stat.comm in INIT_COMMS:
        return "init"
    if stat.comm in SESSION_COMMS:
        return "session"
    if drives_peer_probe(proc.pid):
        return PEER
    node = read_node(proc.pid)
    if node is not None and node.start == proc.start_time and interactive_shell(node):
        return "session"
    return None


def children(pid, proc=PROC):
    # type: (int, str) -> List[int]
    """The children of `pid` (every thread's, /proc/PID/task/TID/children), read now."""
    out = []  # type: List[int]
    try:
        tasks = os.listdir("%s/%d/task" % (proc, pid))
    except OSError:
        return out
    for tid in tasks:
        try:
            with open("%s/%d/task/%s/children" % (proc, pid, tid)) as f:
                out.extend(int(word) for word in f.read().split())
        except (OSError, ValueError):
            continue
    return out


def drives_peer_probe(pid, proc=PROC):
    # type: (int, str) -> bool
    """Whether `pid` is the gputui that owns another gputui's probe: the probe is its child, or its
    grandchild through a `sudo -n` or a wrapper (`pct exec`, `nsenter`)."""
    for child in children(pid, proc):
        if peer_probe(child, proc) or any(peer_probe(grand, proc) for grand in children(child, proc)):
            return True
    return False


def reused_words(expected, found):
    # type: (int, int) -> str
    return "PID reused: start time %d, the plan's was %d" % (found, expected)

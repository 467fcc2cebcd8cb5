"""What a kill run holds, and the primitives each of its stages uses.

A run (reaper.Run for a plan, signal_run.SignalRun for one signal) keeps its targets (`Proc`, with
their pidfds), the GPUs it reports on, their memory before, and the rule of what a rescan may take on
(scope.py). Every stage emits events (`event`: one protocol record each, elapsed time included),
looks at the host (`look`: NVML, a holder scan, classification), sends a signal and records why one
did not go (`deliver`), waits on the pidfds for its processes to exit (`wait`, `pause`), and
emits a process's verdict (verdicts.py words it). Those are here, below the stages (reaper.py) and
the checks (checks.py), which build on them.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import os
import select
import signal
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple  # noqa: F401  (type comments)

from ..common import ERROR
from ..procfs import close_quietly, read_stat_strict
from ..wire import VERSION
from . import scope, verdicts
from .orders import Settings  # noqa: F401  (type comments)
from .signals import Killer, Proc, pidfd_budget, signal_name  # noqa: F401  (type comments)
from .view import View

FALLBACK_POLL_S = 0.01  # /proc polling when there is no pidfd to wait on
# What a look reads (RunState.look): the steady-state scan, what can hold the plan's memory, everything.
INCREMENTAL, TARGETED, FULL = "incremental", "targeted", "full"
# Set by benchmarks to FULL to time every rescan and the confirmation as a full scan.
RESCAN_LOOK = TARGETED


def run_to_the_end(run, what, steps, ok_key):
    # type: (RunState, str, Callable[[], Optional[Dict[str, Any]]], str) -> Optional[Dict[str, Any]]
    """`steps()`'s `done` event; a bug inside it ends the run with a `done` error event (its
    outcome under `ok_key` false) rather than killing the probe."""
    try:
        return steps()
    except Exception as exc:  # a bug must end the plan visibly, not kill the probe
        failure = "%s: %s" % (type(exc).__name__, exc)
        return run.event(
            "done",
            ERROR,
            "%s %s failed inside the probe: %s" % (what, run.plan.id, failure),
            data={ok_key: False, "gpus": {}, "processes": [], "error": failure},
        )


class RunState(object):
    """A run's record of its targets and GPUs, and the primitives its stages share."""

    # Why a target that exited before the run's first signal to it was not signalled.
    VANISHED_WHY = "exited before any signal"

    def __init__(self, probe, settings, emit, stop_requested=None):
        # type: (Any, Settings, Callable[[Dict[str, Any]], None], Optional[Callable[[], Optional[str]]]) -> None
        self.probe = probe
        self.plan = settings
        self._emit = emit
        self._stop_requested = stop_requested
        self.cancelled = None  # type: Optional[str]  # why the app stopped the further signals
        self.link_lost = False
        self.sampling_failed = False  # a sample during the plan failed: no more until its end
        self.killer = Killer()
        self.t0 = time.monotonic()
        self.procs = {}  # type: Dict[int, Proc]
        self.before = {}  # type: Dict[int, Optional[int]]
        self.idle_ms = {}  # type: Dict[int, float]
        self.touched = set()  # type: Set[int]  # GPUs the plan cleans or its targets use
        self.pidfds_left = pidfd_budget()  # pidfds this plan may hold open at once
        self.scan_cost = 0.0
        self.scan_kind = INCREMENTAL  # what the last look read
        self.rule = scope.Rule(
            settings.gpus,
            [t[0] for t in settings.targets],
            settings.ghosts,
            sweep=[(t[0], t[1]) for t in settings.sweep],
        )

    # -- output --------------------------------------------------------------------------------

    def ms(self):
        # type: () -> float
        return round((time.monotonic() - self.t0) * 1e3, 1)

    def event(self, stage, result, message, proc=None, gpu=None, sig=None, data=None):
        # type: (str, Optional[str], str, Optional[Proc], Optional[int], Optional[str], Optional[Dict[str, Any]]) -> Dict[str, Any]
        body = {"elapsed_ms": self.ms()}  # type: Dict[str, Any]
        if proc is not None:
            body.update(proc.identity())
        body.update(data or {})
        record = {
            "type": "event",
            "v": VERSION,
            "plan": self.plan.id,
            "time": time.time(),
            "stage": stage,
            "pid": proc.pid if proc is not None else None,
            "start_time": proc.start_time if proc is not None else None,
            "gpu": gpu,
            "signal": sig,
            "result": result,
            "message": message,
            "data": body,
        }
        self.send(record)
        return record

    def send(self, record):
        # type: (Dict[str, Any]) -> None
        if not self.link_lost:
            try:
                self._emit(record)
            except (OSError, ValueError):
                # The app went away (broken pipe): finish the plan regardless, silently.
                self.link_lost = True

    # -- looking -------------------------------------------------------------------------------

    def look(self, how=TARGETED):
        # type: (str) -> View
        """NVML, a holder scan and classification. TARGETED for the rescans and the confirmation: it
        reads in full what can hold the memory of what NVML lists and of the plan's processes (module
        docstring); FULL reads everything (a sweep's first rescan, a verification that timed out);
        the accept stage only needs names and kinds, which the INCREMENTAL scan has (a full scan of
        2,000 processes costs 0.4 s or more)."""
        t = time.monotonic()
        gpus, listed = self.probe.read_gpus()
        scanner = self.probe.scanner
        if how == TARGETED:
            how = RESCAN_LOOK
        if how == FULL:
            scan = scanner.scan(full=True)
        elif how == TARGETED:
            around, also = self.around(listed)
            scan = scanner.scan(around=around, also=also, holders=bool(self.plan.sweep))
        else:
            scan = scanner.scan(watch=listed)
        records = self.probe.describe(listed, scan)
        view = View(gpus, listed, {r["pid"]: r for r in records})
        self.scan_cost = time.monotonic() - t
        self.scan_kind = how
        return view

    def around(self, listed):
        # type: (Dict[int, Dict[int, Optional[int]]]) -> Tuple[Set[int], Set[int]]
        """What a targeted look reads: (the PIDs whose process groups, sessions and subtrees it reads,
        the PIDs it reads themselves). The first: what NVML lists on a GPU the plan cleans or
        reports on (`touched`), and what it lists of the plan's own (targets, named ghosts, what the
        plan took on or sweeps). classify.py links a hidden holder only to a PID NVML lists, through
        its process group, session or ancestry: one tied to none of these is attributed to no GPU
        of the plan's and linked to nothing of the plan's (module docstring). The second: the
        plan's own PIDs, listed or not, and the targets' descendants taken before any signal."""
        own = self.rule.targets | self.rule.ghosts | set(self.procs)
        own.update(pid for pid, _ in self.rule.sweep)
        roots = set(pid for pid, mem in listed.items() if pid in own or self.touched.intersection(mem))
        return roots, own | set(self.rule.descendants)

    # -- signalling ----------------------------------------------------------------------------

    def deliver(self, proc, sig, stage):
        # type: (Proc, int, str) -> bool
        """Send `sig` to `proc`; whether it went. When it did not, the process's verdict says why,
        in a `stage` event: it had exited (before any signal of the run's it `vanished`; after one,
        that signal worked), the kernel refused (`permission-denied`, with what would allow it), or
        another error (`not-checked`: the signal may not have been sent, so never read as gone)."""
        name = signal_name(sig)
        try:
            self.killer.send(proc, sig)
            return True
        except ProcessLookupError:
            # Exited since the last look: before any signal it vanished, else our signal worked.
            if not proc.signals:
                proc.verdict, proc.why = "vanished", self.VANISHED_WHY
                self.close(proc)
            else:
                self.exited(proc)
            self.event(stage, "vanished", "%s -> %s: already exited" % (name, proc.label()), proc, sig=name)
        except PermissionError:
            proc.verdict, proc.why = "permission-denied", "the kernel refused %s (EPERM)" % name
            proc.allow = self.what_would_allow(proc)
            self.close(proc)
            self.event(
                stage,
                "permission-denied",
                "%s -> %s: permission denied; %s" % (name, proc.label(), proc.allow),
                proc,
                sig=name,
                data={"allow": proc.allow},
            )
        except OSError as exc:
            # Not "no such process": the signal may not have been sent. Never read as gone.
            proc.verdict = "not-checked"
            proc.why = "%s could not be sent (%s)" % (name, exc.strerror or exc)
            self.close(proc)
            self.event(stage, "error", "%s -> %s: %s" % (name, proc.label(), proc.why), proc, sig=name)
        return False

    def resume(self, proc):
        # type: (Proc) -> bool
        """SIGCONT right after a soft signal, as systemd does: a stopped process (a forgotten
        Ctrl-Z, SIGSTOP) acts on a signal only once continued; left stopped, it would sit out the
        whole wait and die of SIGKILL, without the clean shutdown the soft signal asks for. Harmless
        to a running one. Whether it was sent; a failure changes nothing (the soft signal went)."""
        try:
            self.killer.send(proc, signal.SIGCONT)
        except OSError:
            return False  # exited since (ESRCH), or refused: the wait and SIGKILL still follow
        return True

    def what_would_allow(self, proc):
        # type: (Proc) -> str
        if os.geteuid() != 0:
            owner = proc.user or (str(proc.uid) if proc.uid is not None else "its owner")
            return "run the probe as root or as user %s (sudo = true in the host config)" % owner
        return (
            "the probe runs as root and the kernel still refused: the process is in another user or "
            "PID namespace, or a security module (SELinux, AppArmor) forbids it; run the probe there"
        )

    # -- waiting -------------------------------------------------------------------------------

    def wait(self, procs, timeout, sig_name, quiet=False):
        # type: (List[Proc], float, str, bool) -> None
        """Until every process in `procs` has exited or `timeout` passes; ends at the last exit.
        `quiet`: no `timeout` event (a job's grace: what follows says what is still running)."""
        pending = [p for p in procs if p.pending]
        if not pending:
            return
        deadline = time.monotonic() + timeout
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.pause(pending, left)
            pending = [p for p in pending if p.pending]
        if pending and not quiet:
            self.event(
                "wait",
                "timeout",
                "%d still running %.1f s after %s: %s"
                % (len(pending), timeout, sig_name, ", ".join(str(p.pid) for p in pending)),
                data={"pids": [p.pid for p in pending], "after": sig_name},
            )

    def pause(self, procs, timeout):
        # type: (List[Proc], float) -> None
        """Block until one of `procs` exits, `timeout` passes or the host's next sample is due;
        record the exits. Every caller loops until its own deadline, so an early return is safe."""
        timeout = min(timeout, self.sample_if_due())
        with_fd = [p for p in procs if p.fd is not None and p.pending]
        without = [p for p in procs if p.fd is None and p.pending]
        if without:
            timeout = min(timeout, FALLBACK_POLL_S)  # no pidfd: /proc must be polled
        if with_fd:
            poller = select.poll()
            by_fd = {}
            for proc in with_fd:
                assert proc.fd is not None
                poller.register(proc.fd, select.POLLIN)
                by_fd[proc.fd] = proc
            for fd, _ in poller.poll(max(0.0, timeout) * 1e3):
                self.exited(by_fd[fd])
        elif timeout > 0:
            # Nothing to wait on but time: the verify loop's NVML interval or the fallback poll.
            select.select([], [], [], timeout)
        for proc in without:
            try:
                stat = read_stat_strict(proc.pid)
            except OSError:
                continue  # cannot look just now: still running as far as anyone knows
            if stat is None or stat.start_time != proc.start_time or stat.state == "Z":
                self.exited(proc)

    def sample_if_due(self):
        # type: () -> float
        """The host's samples go on while the plan runs (the line loop is blocked in it): the
        operator sees the memory drain and the host stays fresh. Read-only, from this thread, so
        nothing races the plan's own looks; the verdict still comes from the verification. The
        seconds until the next sample is due (infinity where there is none to send)."""
        send = self.probe.while_waiting
        if send is None or self.link_lost or self.sampling_failed:
            return float("inf")
        try:
            return max(0.0, float(send()))
        except (OSError, ValueError):
            self.link_lost = True  # the app went away (broken pipe): the plan ends regardless
        except Exception:  # a bug in sampling must not end a confirmed plan half-way
            self.sampling_failed = True
        return float("inf")

    def exited(self, proc):
        # type: (Proc) -> None
        proc.exited_ms = self.ms()
        proc.exit_signal = proc.signals[-1] if proc.signals else None
        self.reap(proc)
        self.close(proc)
        after = " after %s" % proc.exit_signal if proc.exit_signal else ""
        self.event(
            "wait",
            "exited",
            "%s exited%s" % (proc.label(), after),
            proc,
            sig=proc.exit_signal,
            data={"exited_ms": proc.exited_ms},
        )

    def reap(self, proc):
        # type: (Proc) -> None
        """A killed child of the probe itself stays a zombie until the probe reaps it."""
        try:
            if proc.fd is not None and hasattr(os, "P_PIDFD"):
                os.waitid(os.P_PIDFD, proc.fd, os.WEXITED | os.WNOHANG)  # type: ignore[attr-defined]  # novermin (3.9+, checked)
            elif proc.ppid == os.getpid():
                os.waitpid(proc.pid, os.WNOHANG)
        except OSError:
            pass  # ECHILD: not our child (the usual case), or already reaped

    def close(self, proc):
        # type: (Proc) -> None
        if proc.fd is not None and proc.lent:
            self.probe.pins.give_back(proc.pid, proc.fd)  # the probe's pin: it keeps it
            proc.fd, proc.lent = None, False
        elif proc.fd is not None:
            close_quietly(proc.fd)
            proc.fd = None
            self.pidfds_left += 1

    # -- verdicts ------------------------------------------------------------------------------------

    def process_verdict(self, proc):
        # type: (Proc) -> Dict[str, Any]
        """The verdict on `proc` (verdicts.process_verdict), in a `verdict` event; its data, as the
        `done` event lists it."""
        data, words = verdicts.process_verdict(proc)
        record = self.event("verdict", proc.verdict, words, proc, data=dict(data))
        return dict(record["data"], pid=proc.pid, start_time=proc.start_time)

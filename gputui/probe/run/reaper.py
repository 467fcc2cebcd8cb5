"""Executing a kill plan on this host: staged signals, then proof that the GPUs are free.

docs/ARCHITECTURE.md "Staged kill-and-verify", grounded in docs/GPU_FACTS.md:
1. check each target: not protected, and the process the operator saw. The probe pinned a pidfd
   when a scan first listed it (pidfd.py): readable means it has exited, whatever holds the PID now
   (a PID reused within one clock tick has the same start time); else signals go through it, to
   that process only. Without a pin, a pidfd is opened now and the start time re-read after it (a
   mismatch: the PID was reused). Either way it must still hold a GPU device file or be listed by
   NVML: one that let go of its GPU is not signalled, and its verdict says it runs on;
2. SIGTERM (SIGINT first when asked), each soft signal followed by SIGCONT (a stopped job acts on
   it only once continued, as systemd knows), then wait on the pidfds (readable when the process
   exits) up to the TERM timeout; 3. SIGKILL the survivors;
4. rescan: hidden holders now attributed to a targeted GPU (a ghost's data-loader child) and holders
   tied to a target get the same stages; so do, when the plan sweeps, the listed unattributed holders;
5. verify: read NVML every 20 ms until each targeted GPU is back at its idle memory with no listed
   process, then confirm with a holder scan; give up at the verify timeout;
6. verdicts per process and per GPU, then `done`: a plan of processes is `stopped` only when every
   target is gone (a target not signalled, left running, makes it `not-stopped`).
Nothing sleeps for a fixed time: every wait is a poll() on the pidfds with the next deadline as its
timeout (the NVML polling interval while verifying), so it ends the moment a process exits.

What the rescans and the confirmation read (state.RunState.around; gputui/probe/holders.py, "The targeted
scan"), all of it every link, no rule trusted:
- the plan's own PIDs (targets, named ghosts, what it took on or sweeps) and the targets'
  descendants taken before any signal (a killed parent's children are re-parented at once);
- every process new since the last scan;
- every process in the process group or session of, or below, a PID NVML lists on a GPU the plan
  cleans or reports on, or lists of the plan's own (a dead target NVML still lists holds memory
  through a child or a group member). That needs every process's stat: skipped when no such PID is
  listed, the usual case at the confirmation.
Why nothing else can matter: classify.py links a hidden holder only to a PID NVML lists, through its
process group, session or ancestry, and attributes it to that PID's GPUs. A holder outside the set
is linked to no listed PID on a GPU the plan touches and to nothing of the plan's: scope.py never
takes it on (not attributed to a plan GPU, not tied to a target: not a descendant taken before the
signals, no link), it is on no GPU a verdict reports, and no ghost of the plan's names it. Were it to
keep memory of a plan GPU (a ghost's child that left its session), NVML would still list that
memory's owner there: no confirmation, and the full scan at the timeout names it among the
suspects, as before. tests/probe/test_rescan.py proves the rule on generated process trees and on
real processes. A full scan (every link of every process: 0.8 s with 2,000 processes) only where the
scope needs one: the first rescan of a plan that sweeps the unattributed holders (the later looks
re-read every holder it knows), and the final look of a verification that timed out (its verdict
names every possible holder of the memory still used).

Without pidfds (Python 3.8 on an architecture whose syscall numbers are unknown, or a kernel before
5.3) the engine says so in the `accepted` event and falls back to a start-time check right before
os.kill, and to reading /proc every 10 ms while waiting.

Where the rest is: the plan record's parsing (orders.py), the one place a signal leaves the probe
(signals.py), what every stage uses: events, looks, delivery, the waits (state.py), the check
stage (checks.py), the verdicts (verdicts.py); a `signal` record's run is signal_run.py.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import os
import signal
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple  # noqa: F401  (type comments)

from ..classify import HIDDEN, USER
from ..common import KILL_WAIT_S, MAX_ROUNDS, POLL_FAST_FOR_S, POLL_FAST_S, POLL_S, job_grace, verify_poll
from ..holders import descendants
from ..procfs import holds_device, read_stat
from ..wire import error
from . import goal, scope, verdicts
from .checks import Checks
from .orders import Settings, parse_or_refuse
from .signals import METHOD_NOTE, Proc, signal_name  # noqa: F401  (type comments)
from .state import FULL, INCREMENTAL, TARGETED, run_to_the_end
from .view import View  # noqa: F401  (type comments)
from .words import by_key, gpu_list, gpus_words, pid_list


def execute(probe, plan, emit, stop_requested=None):
    # type: (Any, Dict[str, Any], Callable[[Dict[str, Any]], None], Optional[Callable[[], Optional[str]]]) -> Optional[Dict[str, Any]]
    """Run one plan to its end, emitting protocol events; return the `done` event (None if refused).

    A plan that has started runs to its end even if the app goes away: the operator confirmed it, and
    half of it (SIGTERM sent, no SIGKILL, nothing verified) would be the worst outcome. Only the app
    can stop its further signals (`stop_requested` returns why, once its audit log has failed: what
    it cannot record must not happen); the verification and the verdicts still come."""
    settings = parse_or_refuse(probe, plan, emit, "plan", Settings)
    if settings is None:
        return None
    run = Run(probe, settings, emit, stop_requested)
    return run_to_the_end(run, "plan", run.run_plan, "clean")


class Run(Checks):
    """One plan, from its `accepted` event to its `done` event: the stages, the rescans, the
    verification, the verdicts (the checks are the base class's; what the verdicts and the goal
    say, verdicts.py and goal.py)."""

    # -- the stages ----------------------------------------------------------------------------

    def run_plan(self):
        # type: () -> Optional[Dict[str, Any]]
        """The plan from `accepted` to `done` (module docstring, steps 1 to 6): check and stop its
        targets, then up to MAX_ROUNDS rescans for what the kills uncovered, then the verification
        and the verdicts. Every pidfd it holds is closed (or given back) at the end, whatever
        happens. None (an error record sent) when the plan names a GPU this host does not have."""
        plan = self.plan
        view = self.look(INCREMENTAL)
        unknown = [i for i in plan.gpus if i not in view.gpus]
        if unknown:
            have = gpu_list(sorted(view.gpus))
            self.send(
                error(
                    "bad-message",
                    "bad plan: no %s here (its GPUs: %s)" % (gpus_words(unknown), have),
                    plan.id,
                )
            )
            return None
        self.touched = goal.touched_gpus(plan, view)
        self.before = {i: g.get("memory_used") for i, g in view.gpus.items() if i in self.touched}
        self.event(
            "accepted",
            "accepted",
            "plan %s: %s; %s" % (plan.id, goal.goal_words(plan), METHOD_NOTE[self.killer.method]),
            data={
                "method": self.killer.method,
                "scope": plan.scope,
                "gpus": plan.gpus,
                "touched": sorted(self.touched),
                "ghosts": plan.ghosts,
                "targets": [t[0] for t in plan.targets],
                "roots": sorted(pid for pid, role in plan.roles.items() if role == "root"),
                "sweep": [t[0] for t in plan.sweep],
                "signals": plan.signals,
                "term_timeout": plan.term_timeout,
                "verify_timeout": plan.verify_timeout,
                "memory_before": by_key(self.before),
                "operator": plan.operator,
                "probe_uid": os.geteuid(),
            },
        )
        try:
            first = [self.admit(pid, st, why, gpus, "plan", view) for pid, st, why, gpus in plan.targets]
            self.remember_descendants(first)
            first += self.job_members(first, view)
            self.stages(first)
            for round_no in range(MAX_ROUNDS):
                if self.cancel_requested():
                    break
                # The sweep needs every unattributed holder: one full scan, on the first round.
                sweeping = round_no == 0 and bool(plan.sweep)
                found = self.rescan(self.look(FULL if sweeping else TARGETED), sweep=round_no == 0)
                if not found:
                    break
                self.stages(found)
                if all(p.origin == "sweep" for p in found):
                    break  # unattributed holders: stopping them attributes nothing new to a GPU
            final = self.verify()
            return self.finish(final)
        finally:
            for proc in self.procs.values():
                self.close(proc)

    def remember_descendants(self, procs):
        # type: (List[Proc]) -> None
        """The processes under these targets, taken before any signal: a killed parent's children
        are re-parented at once, and the rescan must still know they were its children."""
        roots = [p.pid for p in procs if p.pending]
        if roots:
            for pid, start in descendants(roots).items():
                self.rule.descendants.setdefault(pid, start)
        self.rule.targets.update(p.pid for p in procs)

    def job_members(self, procs, view):
        # type: (List[Proc], View) -> List[Proc]
        """The GPU processes below the job roots of the plan that it does not name (started since
        the app's scan), taken right before the first signal: a job is stopped whole. They join
        as members (origin "rescan": the app did not list them), checked like every target."""
        roots = [p.pid for p in procs if p.role == "root" and p.pending]
        if not roots:
            return []
        prefix = self.probe.scanner.prefix
        out = []  # type: List[Proc]
        for pid, start in sorted(descendants(roots).items()):
            if pid in self.procs:
                continue
            record = view.records.get(pid)
            if record is not None and record.get("start_time") == start:
                if record.get("kind") not in (USER, HIDDEN) or record.get("state") == "Z":
                    continue
            elif pid not in view.listed and holds_device(pid, prefix) is not True:
                continue
            gpus = list(view.listed.get(pid, {})) or list((record or {}).get("gpus") or [])
            proc = self.admit(
                pid,
                start,
                "member of a job root of the plan, found before the first signal",
                gpus,
                "rescan",
                view,
            )
            proc.role = "member"
            out.append(proc)
        if out:
            self.remember_descendants(out)
        return [p for p in out if p.pending]

    def stages(self, procs):
        # type: (List[Proc]) -> None
        """The plan's soft signals (SIGTERM; SIGINT first if asked) with a wait after each; then
        SIGKILL the survivors and wait."""
        live = [p for p in procs if p.pending]
        if not live:
            return
        soft = [getattr(signal, name) for name in self.plan.signals]
        for sig in soft:
            roots = [p for p in live if p.role == "root"]
            if roots:
                sent = self.job_signal(roots, [p for p in live if p.role != "root"], sig)
            else:
                sent = self.send_all(live, sig, "signal")
            self.wait(sent, self.plan.term_timeout - (self.grace if roots else 0.0), signal_name(sig))
            live = [p for p in live if p.pending]
            if not live:
                return
        # SIGKILL for every survivor at once, the job roots first (the list keeps the plan's order).
        live.sort(key=lambda p: 0 if p.role == "root" else 1)
        sent = self.send_all(live, signal.SIGKILL, "escalate")
        self.wait(sent, KILL_WAIT_S, "SIGKILL")
        for proc in sent:
            if proc.pending:
                stat = read_stat(proc.pid)
                proc.state = stat.state if stat is not None else proc.state

    @property
    def grace(self):
        # type: () -> float
        return job_grace(self.plan.term_timeout)

    def job_signal(self, roots, rest, sig):
        # type: (List[Proc], List[Proc], int) -> List[Proc]
        """A soft signal to a job: its roots first (a launcher, a supervisor passes it on to its
        ranks, which then shut down as they were written to), then, after the grace (common.
        job_grace) or as soon as every process of the job has exited, the same signal to each member
        (and process between) still running: a root that forwards nothing, or is gone already,
        leaves none behind. Returns every process signalled; the caller waits out the TERM timeout."""
        name = signal_name(sig)
        sent = self.send_all(roots, sig, "signal")
        waiting = [p for p in rest if p.pending]
        if sent and waiting:
            self.wait(sent + waiting, self.grace, name, quiet=True)
        left = [p for p in rest if p.pending]
        if left:
            self.event(
                "signal",
                "members",
                "%d of the job still running %.1f s after the root's %s: %s to %s"
                % (len(left), self.grace, name, name, pid_list([p.pid for p in left])),
                sig=name,
                data={"pids": [p.pid for p in left], "grace_s": self.grace},
            )
            sent += self.send_all(left, sig, "signal")
        return sent + [p for p in rest if p not in sent and p.pending]

    def cancel_requested(self):
        # type: () -> bool
        """Has the app cancelled the plan's further signals? Says so once, in a `cancel` event."""
        if self.cancelled is None and self._stop_requested is not None:
            reason = self._stop_requested()
            if reason:
                self.cancelled = reason
                self.event(
                    "cancel", "cancelled", "plan cancelled by the app (%s): no further signal" % reason
                )
        return self.cancelled is not None

    def send_all(self, procs, sig, stage):
        # type: (List[Proc], int, str) -> List[Proc]
        """`sig` to each of `procs` still pending, in `stage` events (signal, escalate); a soft signal
        is followed by SIGCONT (resume). Returns those it reached. Once the app has cancelled the
        plan, nothing: the ones not signalled yet are `not-signalled`."""
        name = signal_name(sig)
        sent = []  # type: List[Proc]
        if self.cancel_requested():
            for proc in procs:
                if proc.pending and not proc.signals:
                    proc.verdict, proc.why = "not-signalled", "the plan was cancelled before its signal"
                    self.close(proc)
            return sent
        for proc in procs:
            if not proc.pending or not self.deliver(proc, sig, stage):
                continue
            proc.signals.append(name)
            sent.append(proc)
            if sig == signal.SIGKILL:
                self.event(stage, "sent", "%s -> %s" % (name, proc.label()), proc, sig=name)
                continue
            continued = self.resume(proc)
            was_stopped = (
                " (it was stopped: SIGCONT after it, so it can act on it)" if proc.state in ("T", "t") else ""
            )
            self.event(
                stage,
                "sent",
                "%s -> %s%s" % (name, proc.label(), was_stopped if continued else ""),
                proc,
                sig=name,
                data={"continued": continued},
            )
        return sent

    # -- rescans -------------------------------------------------------------------------------

    def rescan(self, view, sweep):
        # type: (View, bool) -> List[Proc]
        """Holders the kills uncovered that the plan's scope covers (gputui/probe/run/scope.py): hidden
        holders now attributed to a GPU the plan cleans, holders tied to a target and, on the first
        round of a sweeping plan, the listed unattributed holders. Others on the same GPUs are
        reported, never signalled."""
        done = set(self.procs)
        found = scope.admissible(view.records, self.rule, done)
        swept = scope.sweepable(view.records, self.rule, done) if sweep else []
        added = set(c.pid for c in found) | set(c.pid for c in swept)
        left = scope.untouched(view.records, self.rule, self.touched, done | added)
        remaining = goal.blockers(self.plan, self.rule, self.procs, view)
        words = "rescan: %d more to stop" % len(added)
        if left:
            words += "; not in the plan, left alone: %s" % pid_list(left)
        if remaining:
            words += "; still in the way: %s" % pid_list(remaining)
        self.event(
            "rescan",
            "found" if added else "none",
            words,
            data={
                "attributed": [c.pid for c in found if c.origin == "attributed"],
                "tied": [c.pid for c in found if c.origin == "tied"],
                "sweep": [c.pid for c in swept],
                "untouched": left,
                "remaining": remaining,
                "scan_ms": round(self.scan_cost * 1e3, 1),
                "scan": self.scan_kind,
            },
        )
        procs = [
            self.admit(c.pid, c.start_time, c.why, c.gpus, "sweep" if c.origin == "sweep" else "rescan", view)
            for c in found + swept
        ]
        self.remember_descendants(procs)
        return [p for p in procs if p.pending]

    # -- verification --------------------------------------------------------------------------

    def verify(self):
        # type: () -> View
        """Poll NVML until the plan's goal holds (each GPU it cleans idle with nothing listed; none
        of its processes or named ghosts listed anywhere), then confirm with a targeted holder scan
        (what can hold the memory of the plan's processes and of what NVML lists: look()); at most
        the verify timeout, after which a full scan names every possible holder. Returns the last
        view."""
        plan = self.plan
        began = time.monotonic()
        deadline = began + plan.verify_timeout
        what = "%s clean" % gpus_words(plan.gpus) if plan.gpus else "the targets gone, their memory released"
        self.event(
            "verify",
            "polling",
            "verifying %s: NVML every %d ms, then every %d ms after %g s, up to %.1f s"
            % (what, POLL_FAST_S * 1e3, POLL_S * 1e3, POLL_FAST_FOR_S, plan.verify_timeout),
            data={"poll_ms": POLL_S * 1e3, "fast_poll_ms": POLL_FAST_S * 1e3, "gpus": plan.gpus},
        )
        next_scan = 0.0
        polls = 0
        while True:
            gpus, listed = self.probe.read_gpus()
            polls += 1
            now = time.monotonic()
            ready = self.nvml_idle(gpus, listed) and goal.released(plan, self.procs, listed)
            if ready and now >= next_scan:
                view = self.look(TARGETED)
                if (
                    not goal.blockers(self.plan, self.rule, self.procs, view)
                    and goal.all_idle(plan, view)
                    and goal.released(plan, self.procs, view.listed)
                ):
                    self.event(
                        "verify",
                        "confirmed",
                        "%s: verified (holder scan) after %d poll%s"
                        % (what[0].upper() + what[1:], polls, "" if polls == 1 else "s"),
                        data={
                            "polls": polls,
                            "scan": self.scan_kind,
                            "scan_ms": round(self.scan_cost * 1e3, 1),
                        },
                    )
                    return view
                # On a big host even a targeted scan costs tens of ms: not back to back.
                next_scan = time.monotonic() + max(0.1, 2 * self.scan_cost)
            left = deadline - time.monotonic()
            if left <= 0:
                break
            every = verify_poll(time.monotonic() - began)
            self.pause([p for p in self.procs.values() if p.pending], min(every, left))
        view = self.look(FULL)
        self.event(
            "verify",
            "timeout",
            "not verified after %.1f s: %s" % (plan.verify_timeout, what),
            data={"polls": polls, "blockers": goal.blockers(self.plan, self.rule, self.procs, view)},
        )
        return view

    def nvml_idle(self, gpus, listed):
        # type: (List[Dict[str, Any]], Dict[int, Dict[int, Optional[int]]]) -> bool
        """NVML's side for the GPUs the plan cleans: each at its idle memory with no process listed.
        Says when each is first seen so (its `idle_ms`, in the GPU's verdict)."""
        idle = goal.idle_gpus(self.plan, gpus, listed)
        for index in idle:
            if index not in self.idle_ms:
                self.idle_ms[index] = self.ms()
                self.event("verify", "idle", "GPU %d: memory back at idle, nothing listed" % index, gpu=index)
        return all(g["index"] in idle for g in gpus if g["index"] in self.plan.gpus)

    # -- verdicts ------------------------------------------------------------------------------

    def finish(self, view):
        # type: (View) -> Dict[str, Any]
        """Every verdict from the final `view` (verdicts.py), then the `done` event that sums them
        up: `clean` (a plan of GPUs) or `stopped` (a plan of processes) only when the goal was
        proved."""
        plan = self.plan
        processes = [self.process_verdict(p) for p in self.procs.values()]
        found = verdicts.restarts(self.procs, view, self.probe)
        again = verdicts.taken_again(found, plan.gpus)
        gpus = {}  # type: Dict[str, Dict[str, Any]]
        for index in sorted(self.touched):
            if index in plan.gpus:
                gpus[str(index)] = self.gpu_verdict(index, view, again.get(index, []))
            else:
                gpus[str(index)] = self.release_verdict(index, view)
        released = goal.released(plan, self.procs, view.listed)
        result, ok, words = verdicts.outcome(plan, gpus, processes, released)
        taken = sorted(again)
        left = verdicts.left_words(processes, taken, found)
        after = {str(i): g.get("memory_used") for i, g in view.gpus.items() if i in self.touched}
        return self.event(
            "done",
            result,
            verdicts.done_words(plan.id, words, self.ms(), left),
            data={
                "ok": ok,
                "scope": plan.scope,
                "gpus": gpus,
                "processes": processes,
                "refused": verdicts.refused(processes),
                "memory_before": by_key(self.before),
                "memory_after": after,
                "method": self.killer.method,
                "link_lost": self.link_lost,
                "cancelled": self.cancelled,
                "restarts": found,
                "taken_again": taken,
            },
        )

    def gpu_verdict(self, index, view, again=()):
        # type: (int, View, verdicts.Again) -> Dict[str, Any]
        """A GPU the plan cleans (verdicts.gpu_verdict), in a `verdict` event; its data."""
        data, words = verdicts.gpu_verdict(
            index, view, self.plan, self.probe, self.before, self.idle_ms, again
        )
        self.event("verdict", data["result"], "GPU %d: %s" % (index, words), gpu=index, data=data)
        return data

    def release_verdict(self, index, view):
        # type: (int, View) -> Dict[str, Any]
        """A GPU only the plan's processes used (verdicts.release_verdict), in a `verdict` event."""
        data, words = verdicts.release_verdict(index, view, self.plan, self.rule, self.procs, self.before)
        self.event("verdict", data["result"], "GPU %d: %s" % (index, words), gpu=index, data=data)
        return data

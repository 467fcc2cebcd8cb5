"""The operator's side of a kill, headless: requests -> plans from fresh full scans -> the probe (through
the fleet) -> the audit log, before and after -> typed verdicts.

`gputui clean` and the dashboard both go through `Operations`: the CLI only parses arguments and
prints, the dashboard only renders and takes keys. Nothing here prints, draws or touches a process;
the probe of each host runs the plan (gputui/probe/run/reaper.py) and this side follows its events.

The order of a run is what makes it safe to trust:
1. a sample after a full holder scan from each host (`scans`), since a plan trusts no incremental view;
2. plans built from those samples (`build`), shown to the operator, confirmed;
3. `run`: the plan and one intent per process are fsync'd to the audit log *before* the plan is sent;
   every event is logged as it comes; the verdict is logged, and parsed once into a `PlanVerdict`.
   A link that drops, or a probe silent past what the plan's stages allow, or a plan past its
   deadline, ends as "outcome unknown" (logged as such, and reported again at the next start); an
   audit log that cannot take the write-ahead record ends it as "not sent" (nothing was).
At a start, `report_unfinished` reads what an earlier run left unfinished and acknowledges it once.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ..config.killoptions import KillOptions, PlanError
from ..fleet.fleet import Fleet
from ..model import (
    NO_GPU_CODES,
    NOT_SENT,
    OUTCOME_UNKNOWN,
    Event,
    Job,
    MigPlace,
    PlanVerdict,
    Proc,
    Sample,
    WireScope,
    done_event,
)
from ..transport.base import TransportError
from .auditlog import ActionLog, AuditError
from .auditpath import UnsafeLog, default_log_path
from .plan.entries import Excluded, PlanWarning, excluded_entry
from .plan.jobs import excluded_root, job_for_pid, job_words
from .plan.mig import instance_left
from .plan.planner import PlanOptions, plan_for_host, plan_for_selection
from .plan.record import Plan
from .plan.signal import plan_for_signal
from .unfinished import Unfinished, unfinished

FRESH_TIMEOUT = 10.0  # seconds to wait for a full holder scan from a host before planning without one
RESET_DEADLINE = 180.0  # seconds a reset ladder may take (nvidia-smi --gpu-reset, then the verification)
AUDIT_LOG_ERROR = "audit-log"  # the error of a not-sent verdict: the log could not take the plan

__all__ = [
    "FRESH_TIMEOUT",
    "AnyRequest",
    "HostProblem",
    "Operations",
    "Planned",
    "Request",
    "RequestScope",
    "SignalRequest",
    "UnfinishedReport",
    "status_of",
]


# What a Request may ask: the wire's scopes, and jobs (planned as a selection of processes).
RequestScope = Literal[WireScope, "jobs"]


@dataclass(frozen=True, slots=True)
class Request:
    """What the operator asked on one host.

    scope: "host" (every GPU), "gpus" (`gpus`), "processes" (`pids` by number, as the CLI takes
    them, and/or `processes` by identity, as the dashboard selects them: a process whose PID now
    names another process is not a target), or "jobs" (`jobs`, as the dashboard shows them: each is
    stopped root first, then the members left; a job whose root's PID now names another process,
    or whose root has gone, is not a target). GPUs, processes and jobs may be asked together. A PID
    that is a job's root (a launcher holding no GPU) chooses its job (plan.job_for_pid).
    `instances`: MIG instances freed alone (scope "gpus": `--gpu MIG-...`), the processes in them
    stopped and each proved clean, never their GPU's other instances (plan/mig.py)."""

    host: str
    scope: RequestScope
    gpus: tuple[int, ...] = ()
    pids: tuple[int, ...] = ()
    processes: tuple[Proc, ...] = ()
    jobs: tuple[Job, ...] = ()
    instances: tuple[MigPlace, ...] = ()
    sweep: bool = False
    include: tuple[int, ...] = ()  # protected monitors the operator includes explicitly
    # The sweep takes only these users' holders where named (PlanOptions.sweep_users: clean --user).
    sweep_users: tuple[str, ...] = ()
    # A ladder of SIGNAL_PLANS for this request alone (the dashboard's T, K, I and F9), else the
    # configured one: the plan dialog shows it and can still change it.
    signals: str | None = None


@dataclass(frozen=True, slots=True)
class SignalRequest:
    """One signal on one host: `signal` (a name of probe.common.SIGNAL_CHOICES), sent once to
    `target` (pid, start time), with no ladder and no verification (plan.plan_for_signal)."""

    host: str
    signal: str
    target: tuple[int, int | None]


AnyRequest = Request | SignalRequest  # what Operations.plan takes: requests of either shape


@dataclass(frozen=True, slots=True)
class HostProblem:
    """Why a host cannot take a plan now: status is no-gpu, unreachable, refused or busy."""

    host: str
    status: str
    message: str


@dataclass(frozen=True, slots=True)
class UnfinishedReport:
    """What an earlier gputui left unfinished, as a start reports it: the actions (acknowledged, so
    reported once), or why the audit log could not be read; and why the acknowledgement could not be
    written (then the same actions are reported again at the next start). Problems are sentences."""

    actions: tuple[Unfinished, ...] = ()
    read_problem: str | None = None
    write_problem: str | None = None


@dataclass
class Planned:
    """The plans built for a request, what could not be planned, and the samples they came from."""

    plans: list[Plan] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # requests that could not be planned, in words
    samples: dict[str, Sample] = field(default_factory=dict)  # what each plan was built from


class Operations:
    """The kill flow for one fleet, one audit log and one operator."""

    def __init__(
        self,
        fleet: Fleet,
        audit: ActionLog,
        *,
        kill: KillOptions | None = None,
        operator: str | None = None,
    ) -> None:
        self.fleet = fleet
        self.audit = audit
        self.kill = kill or KillOptions()
        self.operator = operator or audit.operator or getpass.getuser()
        self.running: dict[str, Plan] = {}  # plan id -> plan, while its verdict is awaited
        self._abandoned: set[str] = set()  # actions whose outcome-unknown `done` is written
        self._abandon_lock = threading.Lock()  # a hard exit writes it from another thread

    @classmethod
    def open(
        cls,
        fleet: Fleet,
        log_path: str | Path | None = None,
        *,
        kill: KillOptions | None = None,
        operator: str | None = None,
    ) -> Operations:
        """The kill flow with its audit log at `log_path` (the user's by default), opened at the
        first write: how `gputui clean`, the dashboard and the API build it."""
        audit = ActionLog(log_path if log_path is not None else default_log_path(), operator=operator)
        return cls(fleet, audit, kill=kill, operator=operator)

    # -- which hosts can take a plan -----------------------------------------------------------

    def problem(self, host: str) -> HostProblem | None:
        """Why `host` cannot take a plan now, or None."""
        view = self.fleet.view(host)
        facts = view.facts
        if facts is not None and facts.error_code in NO_GPU_CODES:
            return HostProblem(host, "no-gpu", facts.error_message or facts.error_code or "no GPU")
        if view.read_only or (facts is not None and facts.read_only):
            return HostProblem(host, "refused", "read-only host: kill actions are disabled here")
        if view.sample is None or facts is None:
            return HostProblem(
                host, "unreachable", view.shown_detail or view.reason or "no sample arrived in time"
            )
        if any(p.host == host for p in self.running.values()):
            return HostProblem(host, "busy", f"a plan is running on {host}: wait for its verdict")
        return None

    # -- planning ------------------------------------------------------------------------------

    async def scans(
        self, hosts: Iterable[str], timeout: float = FRESH_TIMEOUT
    ) -> tuple[dict[str, Sample], set[str]]:
        """A full-scan sample of each host (or its latest one where none came in time, listed apart)."""
        return await self.fleet.full_scans(list(hosts), timeout)

    def build(
        self, requests: Sequence[AnyRequest], samples: dict[str, Sample], late: Iterable[str] = ()
    ) -> Planned:
        """One plan per request, from `samples`. Hosts in `late` got no full scan in time: their
        plan says it was built on the latest sample."""
        out = Planned(samples=dict(samples))
        stale = set(late)
        for request in requests:
            sample = samples.get(request.host)
            if sample is None:
                out.problems.append(f"{request.host}: no sample yet, nothing to plan on")
                continue
            try:
                plan = self._plan(request, sample)
            except PlanError as exc:
                out.problems.append(str(exc))
                continue
            if request.host in stale:
                note = PlanWarning(
                    "stale-scan",
                    "the full holder scan did not come in time: planned on the last sample (the probe "
                    "rescans fully before it verifies)",
                )
                plan = replace(plan, warnings=(*plan.warnings, note))
            out.plans.append(plan)
        return out

    async def plan(self, requests: Sequence[AnyRequest], timeout: float = FRESH_TIMEOUT) -> Planned:
        """`scans` then `build`, for the hosts of `requests`."""
        samples, late = await self.scans((r.host for r in requests), timeout)
        return self.build(requests, samples, late)

    def _plan(self, request: AnyRequest, sample: Sample) -> Plan:
        view = self.fleet.view(request.host)
        kill = self.kill
        if isinstance(request, Request) and request.signals is not None:
            kill = replace(kill, signals=request.signals)
        options = PlanOptions(
            operator=self.operator,
            kill=kill,
            probe_uid=view.facts.uid if view.facts is not None else None,
            sweep_users=request.sweep_users if isinstance(request, Request) else (),
        )
        host = request.host
        if isinstance(request, SignalRequest):
            pid, start = request.target
            return plan_for_signal(sample, pid, start, request.signal, host=host, options=options)
        if request.scope == "host":
            plan = plan_for_host(sample, host=host, sweep=request.sweep, options=options)
        else:
            present = {p.key for p in sample.processes}
            pids_now = {p.pid: p for p in sample.processes}
            pids = list(request.pids)
            lost = []
            for proc in request.processes:
                if proc.key in present:
                    pids.append(proc.pid)
                    continue
                # Chosen by (pid, start time): a PID that now names another process is not a target.
                why = (
                    "its PID now names another process (reused)"
                    if proc.pid in pids_now
                    else "exited since it was selected"
                )
                lost.append(excluded_entry(host, proc, why, chosen=True))
            jobs = []
            for job in request.jobs:
                now = sample.job(job.id) or job_for_pid(sample, job.root)  # a part of a job
                if now is not None and now.key == job.key:
                    jobs.append(now)  # as the fresh scan sees it: members that started since too
                    continue
                lost.append(_lost_job(host, job, sample))
            plan = plan_for_selection(
                sample,
                host=host,
                gpu_indexes=request.gpus,
                pids=pids,
                jobs=jobs,
                instances=request.instances,
                sweep=request.sweep,
                options=options,
            )
            if lost:
                plan = replace(plan, excluded=plan.excluded + tuple(lost))
        return plan.including(request.include) if request.include else plan

    # -- running -------------------------------------------------------------------------------

    async def run(self, plan: Plan, on_event: Callable[[Event], None] | None = None) -> PlanVerdict:
        """Send `plan` to its host's probe with write-ahead logging; follow its events; return the
        verdict. Every failure is a verdict: not-sent (the audit log could not take the plan, error
        AUDIT_LOG_ERROR, or the link could not send it), outcome-unknown; a log that fails mid-plan
        cancels the plan (the probe sends no further signal) and says so."""
        # Before the probe can act: the write-ahead record, with the state the GPUs were in.
        try:
            self.audit.write_plan(plan, provenance=self.provenance(plan))
        except OSError as exc:
            return self._not_logged(plan.id, exc)
        self.running[plan.id] = plan
        guard = AuditGuard(self.audit, self.fleet, plan.host, plan.id, "plan")
        try:
            events = self.fleet.execute(
                plan.host,
                plan.to_wire(),
                deadline=plan.deadline,
                silence=plan.silence_limit,
                kind="signal" if plan.signal is not None else "plan",
            )
            await guard.follow(events, on_event)
            done = guard.done
        except TransportError as exc:
            done = done_event(plan.id, NOT_SENT, f"plan not sent: {exc.message}", error=exc.reason)
            guard.write(done)
            if on_event is not None:
                on_event(done)
        finally:
            self.running.pop(plan.id, None)
        if done is None:  # the stream ended without a verdict: nobody knows what happened
            done = done_event(plan.id, OUTCOME_UNKNOWN, "the probe sent no verdict")
            guard.write(done)
        verdict = guard.verdict(PlanVerdict.from_event(done, allowed=plan.pids_allowed()))
        if plan.instances and verdict.ok:
            verdict = await self._prove_instances(plan, verdict, on_event)
        return verdict

    async def _prove_instances(
        self, plan: Plan, verdict: PlanVerdict, on_event: Callable[[Event], None] | None
    ) -> PlanVerdict:
        """A plan of MIG instances whose processes the probe proved gone: each instance judged from a
        fresh full scan (plan/mig.py), said in a `verify` event (logged, shown) and in the verdict:
        `clean`, or `not-clean` with what is left. The probe's own verdict is about processes."""
        samples, _ = await self.fleet.full_scans([plan.host], FRESH_TIMEOUT)
        sample = samples.get(plan.host)
        problems: list[str] = []
        words: list[str] = []
        for place in plan.instances:
            if sample is None:
                left, how = ["no scan came after the plan"], "not judged"
            else:
                left, how = instance_left(sample, place)
            problems += [f"MIG instance {place.label}: {w}" for w in left]
            words.append(f"MIG instance {place.label}: " + ("; ".join(left) if left else f"clean, {how}"))
        ok = not problems
        event = Event(
            plan=plan.id,
            time=time.time(),
            stage="verify",
            result="clean" if ok else "held",
            message="; ".join(words),
            data={"mig": [p.label for p in plan.instances], "ok": ok},
        )
        with contextlib.suppress(OSError):  # the plan has run: a log that fails now changes nothing
            self.audit.write_event(plan.host, event)
        if on_event is not None:
            on_event(event)
        message = f"{verdict.message}; {event.message}" if verdict.message else event.message
        return replace(verdict, result="clean" if ok else "not-clean", ok=ok, message=message)

    async def reset(
        self, host: str, gpu: int, *, dry_run: bool = False, on_event: Callable[[Event], None] | None = None
    ) -> PlanVerdict:
        """The reset ladder for one GPU (gputui/probe/run/reset.py): blockers listed, refused while any
        remains, else persistence off, the driver's reset, memory verified back, persistence restored.
        Logged ahead like a plan (a log that cannot take it: a not-sent verdict, as `run`'s; one that
        fails on the way cancels the ladder, as `run`'s cancels a plan). Never automatic: the caller
        had the operator confirm it."""
        reset_id = uuid.uuid4().hex[:12]
        view = self.fleet.view(host)
        if not dry_run:
            try:
                self.audit.ensure_room(1)
                self.audit.write(
                    "plan",
                    reset_id,
                    host=host,
                    stage="reset",
                    result="intent",
                    message=f"reset GPU {gpu}",
                    gpu=gpu,
                    provenance={
                        "gpus": {str(gpu): view.preflight[gpu].describe() if gpu in view.preflight else None}
                    },
                )
            except OSError as exc:
                return self._not_logged(reset_id, exc)
        guard = AuditGuard(self.audit, self.fleet, host, reset_id, "reset", logged=not dry_run)
        try:
            record = {"id": reset_id, "gpu": gpu, "dry_run": dry_run, "operator": self.operator}
            events = self.fleet.execute(
                host, record, deadline=RESET_DEADLINE, silence=RESET_DEADLINE, kind="reset"
            )
            await guard.follow(events, on_event)
            done = guard.done
        except TransportError as exc:
            done = done_event(reset_id, NOT_SENT, f"reset not sent: {exc.message}", error=exc.reason)
        except asyncio.CancelledError:
            if guard.done is None and not dry_run:
                self.abandon(host, reset_id, f"interrupted during the reset of GPU {gpu}")
            raise
        if done is None:
            done = done_event(reset_id, OUTCOME_UNKNOWN, "the probe sent no verdict")
        return guard.verdict(PlanVerdict.from_event(done))

    def abandon(self, host: str, action: str, why: str) -> None:
        """gputui ends before `action`'s verdict (Ctrl+C in `gputui clean`, a reset cancelled): its
        outcome-unknown `done` line in the audit log (ActionLog.last_words), once per action,
        whichever thread says it first (a hard exit runs on another thread). A log that cannot take
        it is left as it is: the action then has no `done` at all, which the next start reports the
        same way. Run's caller writes it for a plan (it knows why the plan was cut short: what
        the plan sent, the key pressed); a reset writes its own."""
        with self._abandon_lock:
            if action in self._abandoned:
                return
            self._abandoned.add(action)
        with contextlib.suppress(OSError):
            self.audit.last_words(host, action, why)

    def provenance(self, plan: Plan) -> dict[str, Any]:
        """What a benchmark log should say about the GPUs a plan touches: driver and CUDA versions,
        and each GPU's latest preflight reading (persistence, clocks, throttling, ECC, ...)."""
        view = self.fleet.view(plan.host)
        facts = view.facts
        gpus = sorted({g.index for g in plan.gpus + plan.touched})
        return {
            "driver_version": facts.driver_version if facts else None,
            "cuda_driver_version": facts.cuda_driver_version if facts else None,
            "gpus": {str(i): view.preflight[i].describe() if i in view.preflight else None for i in gpus},
        }

    async def run_all(
        self,
        plans: Sequence[Plan],
        on_event: Callable[[Plan, Event], None] | None = None,
        limit: int | None = None,
    ) -> list[PlanVerdict]:
        """Each plan on its own host at once (a slow host holds back no other); their verdicts in
        `plans` order. `limit`: at most that many hosts acting at once (`gputui clean --parallel`),
        the others waiting their turn."""
        gate = asyncio.Semaphore(limit) if limit else contextlib.nullcontext()

        async def one(plan: Plan) -> PlanVerdict:
            async with gate:
                return await self.run(plan, None if on_event is None else lambda e: on_event(plan, e))

        return list(await asyncio.gather(*(one(p) for p in plans)))

    def _not_logged(self, action: str, exc: OSError) -> PlanVerdict:
        """The verdict of an action whose write-ahead record the audit log could not take: not sent,
        and the message says why, in the words both front ends show."""
        words = exc.strerror or str(exc)
        if not words.startswith("audit log"):
            words = f"audit log {self.audit.path}: {words}"
        done = done_event(action, NOT_SENT, f"{words}; nothing was sent", error=AUDIT_LOG_ERROR)
        return PlanVerdict.from_event(done)

    # -- what an earlier run left --------------------------------------------------------------

    def unfinished(self) -> list[Unfinished]:
        """Actions an earlier gputui started and never saw finish: their process is gone (another
        run's plan, still going, is its own to finish), and they are not this one's running plans.
        Raises UnsafeLog when the log's path is not safe to read (a usage error), another OSError
        when the log cannot be read. Reads the log's last `TAIL_BYTES` only."""
        return [u for u in unfinished(self.audit.path) if u.action not in self.running]

    def acknowledge(self, actions: Sequence[Unfinished]) -> None:
        self.audit.acknowledge(actions)

    async def report_unfinished(self, *, refuse_unsafe: bool = True) -> UnfinishedReport:
        """At a start: what an earlier gputui left unfinished (`unfinished`, read in a thread: up to
        `TAIL_BYTES`), acknowledged here so that the next start does not report it again; the caller
        shows it at once. A log that cannot be read, or take the acknowledgement, is a problem in
        words. Raises UnsafeLog when the log's path is not safe to use (the CLI's usage error),
        unless `refuse_unsafe` is False (the dashboard says so and goes on; no plan can be sent
        while its write-ahead record cannot be written)."""
        path = self.audit.path
        try:
            lost = await asyncio.to_thread(self.unfinished)
        except OSError as exc:
            if refuse_unsafe and isinstance(exc, UnsafeLog):
                raise
            return UnfinishedReport(read_problem=f"cannot read the audit log {path}: {exc.strerror or exc}")
        if not lost:
            return UnfinishedReport()
        try:
            self.acknowledge(lost)
        except OSError as exc:
            return UnfinishedReport(
                tuple(lost), write_problem=f"cannot write the audit log {path}: {exc.strerror or exc}"
            )
        return UnfinishedReport(tuple(lost))


# What a probe does not do once the app cancels an action, in the verdict's words.
NO_FURTHER = {
    "plan": "the probe sent no signal after that",
    "reset": "the probe went no further down the ladder",
}


class AuditGuard:
    """The audit log's side of a running plan or reset: what is not on disk must not happen. Each
    event is written as it comes; the first write that fails stops the writing and cancels the
    action at once (the probe takes no further step: no signal, no reset), and the verdict says
    so. `logged` false (a dry run): nothing is written, nothing can fail."""

    def __init__(
        self, audit: ActionLog, fleet: Fleet, host: str, action: str, what: str, logged: bool = True
    ):
        self.audit = audit
        self.fleet = fleet
        self.host = host
        self.action = action
        self.what = what  # "plan" or "reset", for the verdict's words
        self.logged = logged
        self.failed: AuditError | None = None
        self.done: Event | None = None  # the probe's verdict, once it has come

    async def follow(self, events: AsyncIterator[Event], on_event: Callable[[Event], None] | None) -> None:
        """Each event of the action as it comes: its verdict kept (`done`), written, then passed on.
        `done` is kept before the write, so that an action cancelled from here on is known to have
        its verdict."""
        async for event in events:
            if event.stage == "done":
                self.done = event
            await self.record(event)
            if on_event is not None:
                on_event(event)

    def write(self, event: Event) -> None:
        """`event` to the log, unless it has failed already (or nothing is logged)."""
        if self.logged and self.failed is None:
            try:
                self.audit.write_event(self.host, event)
            except AuditError as exc:
                self.failed = exc

    async def record(self, event: Event) -> None:
        """`event` to the log; the first failure cancels the action on its host, once."""
        if self.failed is not None:
            return
        self.write(event)
        if self.failed is not None:
            await self.fleet.cancel(
                self.host, self.action, f"the app's audit log failed: {self.failed.strerror}"
            )

    def verdict(self, verdict: PlanVerdict) -> PlanVerdict:
        """`verdict`, not ok and saying why when the log failed on the way."""
        if self.failed is None:
            return verdict
        note = (
            f"{self.failed.strerror}; the {self.what} was cancelled: {NO_FURTHER[self.what]}, and what "
            "it did before is not all in the log"
        )
        return replace(verdict, ok=False, problems=(*verdict.problems, note))


def _lost_job(host: str, job: Job, sample: Sample) -> Excluded:
    """A job chosen in the dashboard that the fresh scan no longer shows as it was: not a target."""
    if any(j.root == job.root for j in sample.jobs) or any(p.pid == job.root for p in sample.parents):
        why = "its root's PID now names another process (reused)"
    else:
        why = "its root exited, or it has no GPU process left, since it was selected"
    return excluded_root(host, job, f"{job_words(job)}: {why}")


def status_of(verdict: PlanVerdict) -> tuple[str, str | None]:
    """A verdict as one status word and what to say about it: clean, stopped, not-clean,
    not-stopped, refused, no-gpu, outcome-unknown or not-sent (the exit codes follow these)."""
    if verdict.ok:
        return verdict.result, None
    if verdict.unknown:
        return verdict.result, verdict.message
    if verdict.result == "refused":
        return ("no-gpu" if verdict.error == "no-gpu" else "refused"), verdict.message
    if verdict.problems:
        return "not-trusted", "the probe's verdict cannot be taken at its word: " + "; ".join(
            verdict.problems
        )
    denied = [p for p in verdict.processes if p.result == "permission-denied"]
    if denied:
        allow = denied[0].allow or "run the probe as root"
        return "refused", f"permission denied for {', '.join(str(p.pid) for p in denied)}: {allow}"
    if verdict.result in ("not-clean", "not-stopped", "not-signalled"):
        return verdict.result, None
    return "not-clean", verdict.message or verdict.result

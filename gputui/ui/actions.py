"""Glue between the dashboard and the kill engine: plans from requests, progress, verdict words.

Nothing here touches a process. Plans are built from samples (gputui.plan) and executed by the
host's probe through `gputui.clean.execute_plan`, which writes the audit log ahead of every signal;
the app only renders the events that come back. Everything here is plain Python, so it is tested
without a terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gputui.fleet import Fleet, HostView
from gputui.model import Event, Sample, gpu_verdict_words
from gputui.plan import (
    DEFAULT_TERM_TIMEOUT,
    DEFAULT_VERIFY_TIMEOUT,
    Excluded,
    Plan,
    PlanError,
    PlanOptions,
    PlanWarning,
    excluded_entry,
    plan_for_gpus,
    plan_for_host,
    plan_for_selection,
)
from gputui.transport.base import TransportError

from . import fmt
from .intents import PlanRequest

FRESH_TIMEOUT = 2.0  # seconds to wait for a full holder scan before planning on the last sample
KILL_WAIT = 2.0  # the probe's wait after SIGKILL (reaper.KILL_WAIT_S)
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


# -- fresh samples -----------------------------------------------------------------------------


def is_full_scan(view: HostView) -> bool:
    scan = (view.raw_sample or {}).get("scan")
    return bool(scan.get("full")) if isinstance(scan, dict) else False


class FullScans:
    """Waits for a sample taken after a full holder scan: a plan trusts no incremental view
    (a holder that opened a device file since the last scan would be missed)."""

    def __init__(self) -> None:
        self._waiting: dict[str, list[asyncio.Future[Sample]]] = {}

    def on_sample(self, view: HostView) -> None:
        """Call for every sample (the app's fleet listener does)."""
        futures = self._waiting.get(view.name)
        if futures and view.sample is not None and is_full_scan(view):
            for future in futures:
                if not future.done():
                    future.set_result(view.sample)
            futures.clear()

    async def fetch(
        self, fleet: Fleet, hosts: Iterable[str], timeout: float
    ) -> tuple[dict[str, Sample], set[str]]:
        """A full-scan sample of each host, or its latest one where none came within `timeout`;
        and the hosts that got the latest one instead (none when `timeout` is 0: not asked)."""
        names = list(dict.fromkeys(hosts))
        out: dict[str, Sample] = {}
        late: set[str] = set()
        if timeout > 0 and names:
            loop = asyncio.get_running_loop()
            asked: dict[str, asyncio.Future[Sample]] = {}
            for name in names:
                future: asyncio.Future[Sample] = loop.create_future()
                self._waiting.setdefault(name, []).append(future)
                asked[name] = future
                with contextlib.suppress(TransportError):
                    await fleet.sessions[name].send({"type": "sample", "v": 1, "full": True})
            try:
                await asyncio.wait(list(asked.values()), timeout=timeout)
            finally:
                for name, future in asked.items():
                    if future.done() and not future.cancelled():
                        out[name] = future.result()
                    else:
                        future.cancel()
                        late.add(name)
                    waiting = self._waiting.get(name, [])
                    if future in waiting:
                        waiting.remove(future)
        for name in names:
            if name not in out and (sample := fleet.view(name).sample) is not None:
                out[name] = sample
        return out, late


# -- plans -------------------------------------------------------------------------------------


@dataclass
class Planned:
    plans: list[Plan] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # hosts that could not be planned, in words


def build_plans(
    fleet: Fleet,
    requests: Sequence[PlanRequest],
    samples: dict[str, Sample],
    *,
    operator: str,
    stale: Iterable[str] = (),
    term_timeout: float = DEFAULT_TERM_TIMEOUT,
    verify_timeout: float = DEFAULT_VERIFY_TIMEOUT,
) -> Planned:
    """One plan per request (one per host), from `samples` (a full scan where one came in time).

    `stale`: hosts whose full scan did not arrive: their plan says it used the last sample."""
    out = Planned()
    late = set(stale)
    for request in requests:
        host = request.host
        view = fleet.view(host)
        sample = samples.get(host) or view.sample
        if sample is None:
            out.problems.append(f"{host}: no sample yet, nothing to plan on")
            continue
        options = PlanOptions(
            operator=operator,
            probe_uid=view.facts.uid if view.facts else None,
            term_timeout=term_timeout,
            verify_timeout=verify_timeout,
        )
        try:
            plan = _plan(request, sample, options)
        except PlanError as exc:
            out.problems.append(str(exc))
            continue
        if host in late:
            note = PlanWarning(
                "the full holder scan did not come in time: planned on the last sample (the probe "
                "rescans fully before it verifies)"
            )
            plan = replace(plan, warnings=(*plan.warnings, note))
        out.plans.append(plan)
    return out


def _plan(request: PlanRequest, sample: Sample, options: PlanOptions) -> Plan:
    host = request.host
    if request.scope == "host":
        # `fuser -k /dev/nvidia*` without the protected: the unattributed holders are swept too
        # (listed apart in the dialog, where `s` leaves them out).
        return plan_for_host(sample, host=host, sweep=True, options=options)
    if request.scope == "gpu":
        return plan_for_gpus(sample, request.gpus, host=host, sweep=False, options=options)
    present = {p.key: p for p in sample.processes}
    pids_now = {p.pid: p for p in sample.processes}
    pids: list[int] = []
    lost: list[Excluded] = []
    for proc in request.processes:
        if proc.key in present:
            pids.append(proc.pid)
            continue
        # Selected by (pid, start time): a PID that now names another process is not a target.
        other = pids_now.get(proc.pid)
        why = (
            "its PID now names another process (reused)"
            if other is not None
            else "exited since it was selected"
        )
        lost.append(excluded_entry(host, proc, why))
    plan = plan_for_selection(sample, host=host, pids=pids, sweep=False, options=options)
    return replace(plan, excluded=plan.excluded + tuple(lost)) if lost else plan


# -- progress ----------------------------------------------------------------------------------


@dataclass
class Progress:
    """What a running plan is doing, from its events, in words for the log pane's status line."""

    host: str
    plan: Plan
    started: float = field(default_factory=time.monotonic)
    phase: str = "sending the plan"
    since: float = field(default_factory=time.monotonic)
    limit: float | None = None
    signal: str | None = None
    waiting: set[int] = field(default_factory=set)
    done: Event | None = None
    heard: bool = False  # an event came back: the probe has the plan

    def _enter(self, phase: str, now: float, limit: float | None = None) -> None:
        if phase != self.phase:
            self.phase, self.since, self.limit = phase, now, limit

    def on_event(self, event: Event, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        stage, result = event.stage, event.result
        if stage == "accepted":
            self._enter("checking the targets", now)
        elif stage in ("signal", "escalate") and result == "sent" and event.pid is not None:
            if event.signal != self.signal:
                self.waiting.clear()
                self.signal = event.signal
            self.waiting.add(event.pid)
            limit = KILL_WAIT if stage == "escalate" else self.plan.term_timeout
            self._enter(f"waiting for exits after {event.signal}", now, limit)
        elif stage == "wait" and result == "exited" and event.pid is not None:
            self.waiting.discard(event.pid)
        elif stage == "wait" and result == "timeout":
            self._enter("SIGKILL to the survivors", now)
        elif stage == "rescan":
            self._enter("rescanning the holders", now)
        elif stage == "verify" and result == "polling":
            gpus = ",".join(map(str, self.plan.gpu_indexes)) or "-"
            self._enter(f"verifying GPU {gpus} (NVML polled)", now, self.plan.verify_timeout)
        elif stage == "verdict":
            self._enter("verdicts", now)
        elif stage == "done":
            self.done = event

    def line(self, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        phase = self.phase
        if phase.startswith("waiting for exits"):
            n = len(self.waiting)
            phase = f"waiting for {n} process{'es' if n != 1 else ''} to exit after {self.signal}"
        spent = max(0.0, now - self.since)
        clock = f"{spent:.1f} s of {self.limit:g} s" if self.limit else f"{spent:.1f} s"
        return f"{fmt.safe(self.host, 40)}: {phase} ({clock})"


def spinner(now: float | None = None) -> str:
    now = time.monotonic() if now is None else now
    return SPINNER[int(now * 10) % len(SPINNER)]


# -- verdicts ----------------------------------------------------------------------------------


def gpu_words(index: str | int, verdict: dict[str, Any]) -> str:
    result = verdict.get("result")
    held, ghosts, suspects = gpu_verdict_words(verdict)
    if result == "clean":
        return f"GPU{index} clean"
    if result == "ghost-memory":
        return f"GPU{index} ghost memory (NVML lists {ghosts}; suspects {suspects})"
    if result == "held":
        return f"GPU{index} held by {held}"
    return f"GPU{index} {result or 'outcome unknown'}"


def verdict_summary(done: Event) -> tuple[bool, str]:
    """(clean, one line): `clean in 209 ms · GPU0 clean; GPU1 clean; 1 exited`."""
    data = done.data
    if done.result == "outcome-unknown":
        return False, f"outcome unknown: {fmt.safe(done.message, 200)}"
    if done.result in ("refused", "error"):
        return False, f"{done.result}: {fmt.safe(done.message, 200)}"
    clean = data.get("clean") is True
    parts: list[str] = []
    gpus = data.get("gpus")
    if isinstance(gpus, dict):
        for index, verdict in sorted(gpus.items(), key=lambda kv: int(kv[0]) if str(kv[0]).isdigit() else 0):
            if isinstance(verdict, dict):
                parts.append(gpu_words(index, verdict))
    processes = data.get("processes")
    if isinstance(processes, list) and processes:
        counts = Counter(str(p.get("result")) for p in processes if isinstance(p, dict))
        parts.append(", ".join(f"{n} {result}" for result, n in counts.most_common()))
    took = data.get("elapsed_ms")
    head = "clean" if clean else "NOT clean"
    if isinstance(took, (int, float)):
        head += f" in {took:.0f} ms"
    return clean, head + (f" · {'; '.join(parts)}" if parts else "")

"""A running plan as the app sees it: its events, stage by stage, and the verdict its `done` event
carries (docs/PROTOCOL.md "Events" and "Verdict"): per GPU, per process, the parents that may start
its processes again, and the plan's outcome as a whole. Separate from the samples because a verdict
is believed on its own terms: a field of the wrong type or a process the plan did not target makes
it not ok, and the app makes a `done` event itself when the probe's cannot come.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..probe.common import CLEAN, DRY_RUN, RESET, SIGNALLED, STOPPED
from ..probe.jobs import MAX_MEMBERS
from .decode import (
    Indexes,
    Pids,
    as_list,
    as_measure,
    as_pid,
    as_pids,
    as_str,
    as_strs,
    gpu_set,
    index_key,
    plain,
    read_fields,
    records,
    wire_fields,
)
from .gpus import MemoryAccount
from .process import brief_process

LADDER_MAX = 12  # steps of a reset ladder shown (the probe has four)
MAX_RESTARTS = 64  # parents a verdict may warn about (the probe sends at most 16)

# A plan's `done` results: clean / not-clean (it cleans GPUs), stopped / not-stopped (it stops
# processes), signalled / not-signalled (a `signal` plan: one signal, once), reset / not-reset /
# dry-run (a GPU reset), and the app's own: refused, error, outcome-unknown, not-sent. The probe's
# are its words (gputui.probe.common.DONE_RESULTS); these types name them for mypy, and
# tests/kill/test_vocabulary.py keeps the two the same.
SUCCESS = (CLEAN, STOPPED, SIGNALLED, RESET, DRY_RUN)
OUTCOME_UNKNOWN: Final = "outcome-unknown"  # the probe's verdict never came: nobody knows what happened
NOT_SENT: Final = "not-sent"  # nothing reached the probe (the link, or the audit log, refused it)
DoneResult = Literal[
    "clean", "not-clean", "stopped", "not-stopped", "signalled", "not-signalled", "reset", "not-reset",
    "refused", "dry-run", "error", "outcome-unknown", "not-sent",
]  # fmt: skip
# A plan record's scope as the wire has it (gputui.probe.common.SCOPES); a signal record's is "signal".
WireScope = Literal["processes", "gpus", "host"]


def _result(value: Any) -> str:
    return as_str(value) or "unknown"


@dataclass(frozen=True, slots=True)
class Event:
    """One stage of a running plan (or reset), as the probe reports it."""

    plan: str
    time: float
    stage: str
    result: str | None = None
    pid: int | None = None
    start_time: int | None = None
    gpu: int | None = None
    signal: str | None = None
    message: str = ""
    data: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Event:
        return cls(**read_fields(d, _EVENT))


_EVENT = wire_fields(
    Event,
    plan=lambda value: as_str(value) or "?",
    time=lambda value: as_measure(value) or 0.0,
    stage=lambda value: as_str(value) or "?",
    pid=as_pid,
    message=lambda value: as_str(value) or "",
)


def done_event(plan: str, result: DoneResult, message: str, error: str | None = None) -> Event:
    """The `done` event the app makes itself when the probe's own cannot come: the plan was refused
    (an `error` record), the link broke, or the plan ran past its deadline. Never a success."""
    data: dict[str, Any] = {"ok": False}
    if error is not None:
        data["error"] = error
    return Event(plan=plan, time=time.time(), stage="done", result=result, message=message, data=data)


@dataclass(frozen=True, slots=True)
class GpuVerdict:
    """One GPU after a plan. For a GPU the plan cleans: clean, held (by live processes) or
    ghost-memory; for a GPU its processes used: released, or still-listed (their memory is not back).
    """

    index: int
    result: str  # clean, held, ghost-memory, orphaned | released, still-listed
    memory_before: int | None = None
    memory_after: int | None = None
    memory_baseline: int | None = None
    held_by: Pids = ()  # live processes keeping a GPU the plan cleans from being clean
    protected: Pids = ()  # of those, the protected ones (monitors)
    ghosts: Pids = ()  # dead PIDs NVML still lists
    suspects: Pids = ()  # who may really hold a ghost's memory
    still_listed: Pids = ()  # the plan's own PIDs NVML still lists
    others: Pids = ()  # what else uses the GPU: not in the plan, left alone
    idle_ms: float | None = None
    error: str | None = None
    accounting: MemoryAccount | None = None  # where the memory went, as the verdict saw it

    @property
    def ok(self) -> bool:
        return self.result in ("clean", "released")

    @classmethod
    def from_wire(cls, index: int, d: dict[str, Any]) -> GpuVerdict:
        return cls(index=index, **read_fields(d, _GPU_VERDICT))

    def describe(self) -> dict[str, Any]:
        """Plain JSON types, without the index (the key it is filed under) and the accounting."""
        return plain(self, skip=("index", "accounting"))


_GPU_VERDICT = wire_fields(GpuVerdict, skip=("index",), result=_result, accounting=MemoryAccount.from_wire)


@dataclass(frozen=True, slots=True)
class ProcessVerdict:
    """One process the plan took on (confirmed, or added by a rescan) and what became of it."""

    pid: int
    result: str  # exited, vanished, zombie, pid-reused, no-gpu, survived, unkillable, protected, ...
    start_time: int | None = None
    why: str | None = None
    signals: tuple[str, ...] = ()
    exited_ms: float | None = None
    exit_signal: str | None = None
    state: str | None = None
    ppid: int | None = None
    allow: str | None = None  # what would allow a refused signal
    name: str | None = None
    command: tuple[str, ...] = ()
    user: str | None = None
    origin: str | None = None  # plan, rescan or sweep
    reason: str | None = None  # why the plan (or the rescan) took it on

    # Not "no-gpu": that process was not signalled and runs on (it held no GPU when checked).
    GONE = ("exited", "vanished", "zombie", "pid-reused")

    @property
    def gone(self) -> bool:
        """The process the plan meant no longer runs: it exited (by the plan's signals or before),
        or its PID names another process now. Never one left running, such as `no-gpu`."""
        return self.result in self.GONE

    @property
    def brief(self) -> str:
        return brief_process(self.command, self.name)

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> ProcessVerdict | None:
        pid = as_pid(d.get("pid"))
        return None if pid is None else cls(pid=pid, **read_fields(d, _PROCESS_VERDICT))

    def describe(self) -> dict[str, Any]:
        """Plain JSON types, the process's identity first."""
        return plain(self, first=("pid", "start_time"))


_PROCESS_VERDICT = wire_fields(ProcessVerdict, skip=("pid",), result=_result)


@dataclass(frozen=True, slots=True)
class Restart:
    """A parent that outlived the processes a plan stopped and may start them again: a supervisor, a
    launcher, a `bash run.sh` loop (docs/ARCHITECTURE.md "Warn about restarts"). The probe names it
    in the verdict when it is alive at the end, was not in the plan, and is part of the same work
    (not init, a session, a unit's or container's edge). `new`: GPU processes it started during
    the plan, seen before the verdict."""

    pid: int
    start_time: int | None = None
    name: str | None = None
    command: tuple[str, ...] = ()
    user: str | None = None
    children: Pids = ()  # the plan's stopped processes it was the parent of
    new: Pids = ()  # GPU processes it started since (not in the plan)
    new_gpus: Indexes = ()  # the GPUs those use

    @property
    def brief(self) -> str:
        return brief_process(self.command, self.name)

    @classmethod
    def from_wire(cls, d: Any) -> Restart | None:
        pid = as_pid(d.get("pid")) if isinstance(d, dict) else None
        return None if pid is None else cls(pid=pid, **read_fields(d, _RESTART))

    def describe(self) -> dict[str, Any]:
        return plain(self)


def _members(value: Any) -> Pids:
    return as_pids(value, MAX_MEMBERS)


_RESTART = wire_fields(Restart, skip=("pid",), children=_members, new=_members, new_gpus=gpu_set)


@dataclass(frozen=True, slots=True)
class PlanVerdict:
    """A plan's outcome, parsed once from its `done` event (the probe's, or the app's own)."""

    plan: str
    result: str
    ok: bool
    message: str = ""
    scope: str | None = None
    elapsed_ms: float | None = None
    gpus: tuple[GpuVerdict, ...] = ()
    processes: tuple[ProcessVerdict, ...] = ()
    memory_before: dict[int, int | None] = field(default_factory=dict, hash=False, compare=False)
    memory_after: dict[int, int | None] = field(default_factory=dict, hash=False, compare=False)
    error: str | None = None
    method: str | None = None
    link_lost: bool = False
    # Where the verdict could not be taken at its word: a field of the wrong type, a process that
    # was not in the plan. Shown to the operator; any of them makes the verdict not ok.
    problems: tuple[str, ...] = ()
    blockers: tuple[str, ...] = ()  # a reset's: what stops it, in words
    ladder: tuple[str, ...] = ()  # a reset's: the steps it would take (a dry run says them)
    # Parents of stopped processes that still run and may start them again (a supervisor): named,
    # never signalled (words.restart_words says it, and how to stop it).
    restarts: tuple[Restart, ...] = ()

    @property
    def unknown(self) -> bool:
        return self.result in (OUTCOME_UNKNOWN, NOT_SENT)

    @property
    def refused(self) -> tuple[ProcessVerdict, ...]:
        return tuple(p for p in self.processes if p.result in ("permission-denied", "protected"))

    @classmethod
    def from_event(cls, event: Event, allowed: set[int] | None = None) -> PlanVerdict:
        """`allowed`: the PIDs the plan may have touched (its targets, sweep and what its rescans
        could add are all reported by PID); a verdict naming another PID is not believed."""
        data = event.data
        problems: list[str] = []
        gpus: list[GpuVerdict] = []
        raw_gpus = data.get("gpus", {})
        if not isinstance(raw_gpus, dict):
            problems.append("the GPU verdicts are not an object")
            raw_gpus = {}
        for key, value in raw_gpus.items():
            index = index_key(key)
            if index is None or not isinstance(value, dict):
                problems.append(f"a GPU verdict that cannot be read ({type(value).__name__})")
                continue
            gpus.append(GpuVerdict.from_wire(index, value))
        processes: list[ProcessVerdict] = []
        raw_procs = data.get("processes", [])
        if not isinstance(raw_procs, list):
            problems.append("the process verdicts are not a list")
            raw_procs = []
        for item in raw_procs:
            verdict = ProcessVerdict.from_wire(item) if isinstance(item, dict) else None
            if verdict is None:
                problems.append("a process verdict without a valid PID")
                continue
            if allowed is not None and verdict.pid not in allowed and verdict.origin == "plan":
                problems.append(f"the verdict names PID {verdict.pid}, which was not in the plan")
                continue
            processes.append(verdict)
        ok = data.get("ok") is True and event.result in SUCCESS and not problems
        if data.get("ok") not in (True, False) and event.result in SUCCESS:
            problems.append("the verdict does not say whether the plan succeeded")
            ok = False
        return cls(
            plan=event.plan,
            result=event.result or "unknown",
            ok=ok,
            message=event.message,
            gpus=tuple(sorted(gpus, key=lambda g: g.index)),
            processes=tuple(processes),
            problems=tuple(problems),
            **read_fields(data, _PLAN_VERDICT),
        )

    def describe(self) -> dict[str, Any]:
        """Plain JSON types (for `--json` and tests)."""
        return {
            **plain(self, skip=("plan", "blockers", "ladder")),
            "gpus": {str(g.index): g.describe() for g in self.gpus},
            "processes": [p.describe() for p in self.processes],
            "memory_before": {str(k): v for k, v in self.memory_before.items()},
            "memory_after": {str(k): v for k, v in self.memory_after.items()},
            "restarts": [r.describe() for r in self.restarts],
        }


# The fields of a `done` event's data that are read as they are; the GPUs and processes are checked
# one by one above, and a wrong one is a problem.
_PLAN_VERDICT = wire_fields(
    PlanVerdict,
    skip=("plan", "result", "ok", "message", "gpus", "processes", "problems"),
    blockers=lambda value: tuple(
        as_str(b.get("words")) or "?" for b in as_list(value) if isinstance(b, dict)
    ),
    ladder=lambda value: as_strs(value)[:LADDER_MAX],
    restarts=lambda value: records(value, Restart.from_wire, MAX_RESTARTS),
)

"""Kill plans built from what the operator sees (a Sample): the confirmation dialog's and the CLI's.

A plan names processes by (pid, start time), says why each is targeted, which ones it leaves alone and
why, what to watch out for, and the stages and timeouts the probe will run (docs/PROTOCOL.md "Plans").
The rules follow docs/GPU_FACTS.md:
- per-GPU targets come from NVML's lists (users) and from hidden holders attributed to those GPUs;
  holding /dev/nvidiaN alone does not put a process on GPU N;
- a ghost (a dead PID NVML still lists) is never a target: its suspected hidden holders are;
- a zombie holds nothing: it is shown with the parent that must reap it, never signalled;
- protected processes (monitors, PID 1, the probe and its ancestors, kernel threads) are excluded;
  only a monitor can be included, explicitly (`Plan.including`), as the probe also enforces;
- unattributed hidden holders are sweep candidates, listed apart and signalled only when asked.
Pure functions over a Sample: nothing here touches processes or the network.
"""

from __future__ import annotations

import getpass
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from .model import Proc, Sample
from .probe.reaper import brief_command
from .units import fmt_bytes

DEFAULT_TERM_TIMEOUT = 5.0
DEFAULT_VERIFY_TIMEOUT = 10.0
VERIFY_POLL_MS = 20  # the probe's NVML polling interval while verifying (reaper.POLL_S)

PROTECTED_WORDS = {
    "monitor": "a GPU monitor: protected (include it explicitly to stop it)",
    "pid-1": "PID 1 (init): never signalled",
    "probe": "the gputui probe itself: never signalled",
    "probe-ancestor": "an ancestor of the probe (its shell or SSH session): never signalled",
    "kernel-thread": "a kernel thread: never signalled",
}


class PlanError(ValueError):
    """The request cannot be planned (an unknown GPU index, say); the message says why."""


@dataclass(frozen=True, slots=True)
class Target:
    """A process the plan will signal."""

    host: str
    pid: int
    start_time: int
    kind: str  # user | hidden (| monitor when included explicitly)
    why: str  # e.g. "uses GPU 3 (40.0 GiB)", "hidden holder of GPU 3 (same process group as 4121)"
    name: str | None = None
    command: tuple[str, ...] = ()
    user: str | None = None
    uid: int | None = None
    state: str | None = None
    gpus: tuple[int, ...] = ()
    gpu_memory: tuple[tuple[int, int | None], ...] = ()  # (GPU index, bytes or None) from NVML
    protected: str | None = None  # set only for a protected process the operator included

    @property
    def command_line(self) -> str:
        return " ".join(self.command) if self.command else (f"[{self.name}]" if self.name else "?")

    @property
    def brief(self) -> str:
        """The command for a table cell: `python .../train.py --lr 3e-4`."""
        return brief_command(self.command) or (f"[{self.name}]" if self.name else "?")

    @property
    def memory(self) -> int:
        return sum(b or 0 for _, b in self.gpu_memory)

    def to_wire(self) -> dict[str, Any]:
        return {"pid": self.pid, "start_time": self.start_time, "reason": self.why, "gpus": list(self.gpus)}

    def describe(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "pid": self.pid,
            "start_time": self.start_time,
            "kind": self.kind,
            "why": self.why,
            "name": self.name,
            "command": list(self.command),
            "user": self.user,
            "uid": self.uid,
            "state": self.state,
            "gpus": list(self.gpus),
            "gpu_memory": {str(i): b for i, b in self.gpu_memory},
            "protected": self.protected,
        }


@dataclass(frozen=True, slots=True)
class Excluded:
    """A process the plan leaves alone, and why."""

    host: str
    pid: int
    kind: str  # user | ghost | hidden | monitor | zombie | unknown
    why: str
    start_time: int | None = None
    name: str | None = None
    command: tuple[str, ...] = ()
    user: str | None = None
    gpus: tuple[int, ...] = ()
    protected: str | None = None

    @property
    def can_include(self) -> bool:
        """Only a monitor may be included by the operator; the probe refuses every other protection."""
        return self.protected == "monitor" and self.start_time is not None

    @property
    def command_line(self) -> str:
        return " ".join(self.command) if self.command else (f"[{self.name}]" if self.name else "?")

    @property
    def brief(self) -> str:
        return brief_command(self.command) or (f"[{self.name}]" if self.name else "(no such process)")

    def describe(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "pid": self.pid,
            "kind": self.kind,
            "why": self.why,
            "start_time": self.start_time,
            "name": self.name,
            "command": list(self.command),
            "user": self.user,
            "gpus": list(self.gpus),
            "protected": self.protected,
        }


@dataclass(frozen=True, slots=True)
class PlanWarning:
    message: str
    pid: int | None = None


@dataclass(frozen=True, slots=True)
class GpuBefore:
    """A targeted GPU as the plan saw it."""

    index: int
    uuid: str | None
    memory_used: int | None
    memory_total: int | None


@dataclass(frozen=True, slots=True)
class Plan:
    id: str
    host: str
    operator: str
    scope: str  # "host", "gpus", "pids" or "selection" (both): what the operator asked for
    gpus: tuple[GpuBefore, ...]
    targets: tuple[Target, ...]
    sweep: tuple[Target, ...]  # unattributed hidden holders; signalled only when sweep_included
    sweep_included: bool
    excluded: tuple[Excluded, ...]
    warnings: tuple[PlanWarning, ...]
    include_protected: tuple[int, ...] = ()
    sigint_first: bool = False
    term_timeout: float = DEFAULT_TERM_TIMEOUT
    verify_timeout: float = DEFAULT_VERIFY_TIMEOUT
    sample_seq: int = 0

    @property
    def gpu_indexes(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus)

    @property
    def signalled(self) -> tuple[Target, ...]:
        """Every process the probe is asked to signal (the sweep only when included)."""
        return self.targets + (self.sweep if self.sweep_included else ())

    @property
    def is_empty(self) -> bool:
        """Nothing to signal: the probe will only verify."""
        return not self.signalled

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages in words, for the dialog and the CLI."""
        t, v = self.term_timeout, self.verify_timeout
        steps = [f"SIGINT, wait up to {t:g} s for exits"] if self.sigint_first else []
        steps += [
            f"SIGTERM, wait up to {t:g} s for exits",
            "SIGKILL the survivors",
            "rescan holders; stop those now attributed to the GPUs"
            + (", and the swept ones" if self.sweep_included and self.sweep else ""),
            f"verify: NVML every {VERIFY_POLL_MS} ms until each GPU is idle, up to {v:g} s",
        ]
        return tuple(steps)

    def with_sweep(self, on: bool = True) -> Plan:
        warnings = tuple(w for w in self.warnings if not w.message.startswith(_SWEEP_HINT))
        if not on and self.sweep:
            warnings += (_sweep_warning(len(self.sweep)),)
        return replace(self, sweep_included=on, warnings=warnings)

    def with_options(
        self,
        *,
        sigint_first: bool | None = None,
        term_timeout: float | None = None,
        verify_timeout: float | None = None,
    ) -> Plan:
        return replace(
            self,
            sigint_first=self.sigint_first if sigint_first is None else sigint_first,
            term_timeout=self.term_timeout if term_timeout is None else _positive(term_timeout, "term"),
            verify_timeout=self.verify_timeout
            if verify_timeout is None
            else _positive(verify_timeout, "verify"),
        )

    def including(self, pids: Iterable[int]) -> Plan:
        """Move excluded monitors with these PIDs into the targets (the operator chose them)."""
        wanted = set(pids)
        moved = [e for e in self.excluded if e.pid in wanted and e.can_include]
        if not moved:
            return self
        targets = self.targets + tuple(_included(e) for e in moved)
        excluded = tuple(e for e in self.excluded if e not in moved)
        include = tuple(sorted(set(self.include_protected) | {e.pid for e in moved}))
        return replace(self, targets=targets, excluded=excluded, include_protected=include)

    def to_wire(self) -> dict[str, Any]:
        """The `plan` record for the probe (docs/PROTOCOL.md "Plans")."""
        return {
            "type": "plan",
            "v": 1,
            "id": self.id,
            "operator": self.operator,
            "targets": [t.to_wire() for t in self.targets],
            "sweep": [t.to_wire() for t in self.sweep] if self.sweep_included else [],
            "gpus": list(self.gpu_indexes),
            "include_protected": list(self.include_protected),
            "sigint_first": self.sigint_first,
            "term_timeout": self.term_timeout,
            "verify_timeout": self.verify_timeout,
        }

    def describe(self) -> dict[str, Any]:
        """Everything in plain JSON types (for `--json`, the audit log and tests)."""
        return {
            "id": self.id,
            "host": self.host,
            "operator": self.operator,
            "scope": self.scope,
            "gpus": [
                {
                    "index": g.index,
                    "uuid": g.uuid,
                    "memory_used": g.memory_used,
                    "memory_total": g.memory_total,
                }
                for g in self.gpus
            ],
            "targets": [t.describe() for t in self.targets],
            "sweep": [t.describe() for t in self.sweep],
            "sweep_included": self.sweep_included,
            "excluded": [e.describe() for e in self.excluded],
            "warnings": [{"message": w.message, "pid": w.pid} for w in self.warnings],
            "stages": list(self.stages),
            "sigint_first": self.sigint_first,
            "term_timeout": self.term_timeout,
            "verify_timeout": self.verify_timeout,
            "include_protected": list(self.include_protected),
        }


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """What the operator chose besides the scope."""

    operator: str | None = None  # default: the local user name
    sigint_first: bool = False
    term_timeout: float = DEFAULT_TERM_TIMEOUT
    verify_timeout: float = DEFAULT_VERIFY_TIMEOUT
    probe_uid: int | None = None  # the uid the host's probe runs as (HostFacts.uid): warns about EPERM
    plan_id: str | None = None


# -- the three ways to ask ---------------------------------------------------------------------


def plan_for_gpus(
    sample: Sample,
    gpu_indexes: Iterable[int],
    *,
    host: str,
    sweep: bool = False,
    options: PlanOptions | None = None,
) -> Plan:
    """Free these GPUs: their users and the hidden holders attributed to them; a ghost's suspects."""
    return plan_for_selection(sample, host=host, gpu_indexes=gpu_indexes, sweep=sweep, options=options)


def plan_for_host(
    sample: Sample, *, host: str, sweep: bool = True, options: PlanOptions | None = None
) -> Plan:
    """Free every GPU of the host: `fuser -k /dev/nvidia*` minus the protected, with proof.

    Every process that uses or holds a GPU is stopped, so the unattributed holders are swept too
    unless `sweep=False`."""
    indexes = {g.index for g in sample.gpus}
    # The protected holders too: `fuser -k` would have killed them; the plan says it will not.
    chosen = [p for p in sample.processes if p.gpus or p.protected or p.kind == "monitor"]
    return _build(sample, host, "host", indexes, chosen, sweep, options or PlanOptions())


def plan_for_pids(
    sample: Sample,
    pids: Iterable[int],
    *,
    host: str,
    sweep: bool = False,
    options: PlanOptions | None = None,
) -> Plan:
    """Stop these processes (and the hidden holders tied to them); verify the GPUs they use.

    A PID that is not in the sample is excluded: only GPU processes are planned here."""
    return plan_for_selection(sample, host=host, pids=pids, sweep=sweep, options=options)


def plan_for_selection(
    sample: Sample,
    *,
    host: str,
    gpu_indexes: Iterable[int] = (),
    pids: Iterable[int] = (),
    sweep: bool = False,
    options: PlanOptions | None = None,
) -> Plan:
    """GPUs and processes chosen together (the dashboard's selection, `--gpu` with `--pid`).

    Processes chosen by PID bring the hidden holders tied to them (stopping a parent alone would only
    turn it into a ghost) and add the GPUs they use to the verification."""
    asked = set(gpu_indexes)
    indexes = _check_gpus(sample, asked, host)
    wanted = list(dict.fromkeys(pids))
    by_pid = {p.pid: p for p in sample.processes}
    chosen = [p for p in sample.processes if set(p.gpus) & indexes]
    chosen += [by_pid[pid] for pid in wanted if pid in by_pid]
    chosen += [p for p in sample.processes if p.kind == "hidden" and set(p.links) & set(wanted)]
    indexes |= {g for pid in wanted if pid in by_pid for g in by_pid[pid].gpus}
    scope = "gpus" if not wanted else ("pids" if not asked else "selection")
    plan = _build(sample, host, scope, indexes, chosen, sweep, options or PlanOptions(), explicit=set(wanted))
    unknown = tuple(
        Excluded(host=host, pid=pid, kind="unknown", why="not a GPU process in the latest sample")
        for pid in wanted
        if pid not in by_pid
    )
    return replace(plan, excluded=plan.excluded + unknown) if unknown else plan


def sweep_candidates(sample: Sample) -> list[Proc]:
    """Unattributed hidden holders: hold /dev/nvidia*, NVML lists them nowhere, no link to a GPU."""
    return [p for p in sample.processes if p.kind == "hidden" and not p.gpus and not p.protected]


# -- building ----------------------------------------------------------------------------------


def _check_gpus(sample: Sample, gpu_indexes: Iterable[int], host: str) -> set[int]:
    known = {g.index for g in sample.gpus}
    indexes = set(gpu_indexes)
    missing = sorted(indexes - known)
    if missing:
        have = ", ".join(str(i) for i in sorted(known)) or "none"
        raise PlanError(f"{host} has no GPU {', '.join(map(str, missing))} (its GPUs: {have})")
    return indexes


def _build(
    sample: Sample,
    host: str,
    scope: str,
    indexes: set[int],
    chosen: list[Proc],
    sweep: bool,
    opts: PlanOptions,
    explicit: set[int] | None = None,
) -> Plan:
    by_pid = {p.pid: p for p in sample.processes}
    targets: dict[int, Target] = {}
    excluded: dict[int, Excluded] = {}
    for proc in chosen:
        if proc.pid in targets or proc.pid in excluded:
            continue
        reason = _exclusion(proc, by_pid)
        if reason is not None:
            excluded[proc.pid] = excluded_entry(host, proc, reason)
        if proc.kind == "ghost":
            # Its memory is held by the suspects: they are the targets.
            for pid in proc.links:
                suspect = by_pid.get(pid)
                if suspect is not None and pid not in targets and _exclusion(suspect, by_pid) is None:
                    targets[pid] = _target(host, suspect, f"holds the memory of ghost {proc.pid}")
        elif reason is None:
            targets[proc.pid] = _target(host, proc, _why(proc, explicit))
    for zombie in _zombies_near(sample, indexes, targets, scope):
        excluded.setdefault(zombie.pid, excluded_entry(host, zombie, _zombie_words(zombie)))
    sweep_targets = tuple(
        _target(host, p, "unattributed hidden holder: holds /dev/nvidia*, no GPU listed, no link found")
        for p in sweep_candidates(sample)
        if p.pid not in targets and p.start_time is not None
    )
    operator = opts.operator or getpass.getuser()
    ordered = tuple(sorted(targets.values(), key=lambda t: (min(t.gpus, default=1 << 20), -t.memory, t.pid)))
    plan = Plan(
        id=opts.plan_id or uuid.uuid4().hex[:12],
        host=host,
        operator=operator,
        scope=scope,
        gpus=tuple(
            GpuBefore(g.index, g.uuid, g.memory_used, g.memory_total)
            for g in sample.gpus
            if g.index in indexes
        ),
        targets=ordered,
        sweep=sweep_targets,
        sweep_included=sweep and bool(sweep_targets),
        excluded=tuple(excluded.values()),
        warnings=(),
        sigint_first=opts.sigint_first,
        term_timeout=_positive(opts.term_timeout, "term"),
        verify_timeout=_positive(opts.verify_timeout, "verify"),
        sample_seq=sample.seq,
    )
    return replace(plan, warnings=tuple(_warnings(plan, sample, indexes, opts)))


def _exclusion(proc: Proc, by_pid: dict[int, Proc]) -> str | None:
    """Why a process must not be a target, or None."""
    if proc.protected:
        words = PROTECTED_WORDS.get(proc.protected, f"protected ({proc.protected})")
        return f"{words}" if proc.protected != "monitor" else f"{proc.name or 'monitor'}: {words}"
    if proc.kind == "monitor":
        return f"{proc.name or 'monitor'}: {PROTECTED_WORDS['monitor']}"
    if proc.kind == "zombie":
        return _zombie_words(proc)
    if proc.kind == "ghost":
        return _ghost_words(proc, by_pid)
    if proc.start_time is None:
        return "its start time could not be read: it cannot be identified safely"
    if proc.state == "Z":
        return _zombie_words(proc)
    return None


def _zombie_words(proc: Proc) -> str:
    parent = proc.ppid if proc.ppid is not None else (proc.links[0] if proc.links else "?")
    return f"zombie: holds nothing, parent {parent} must reap it"


def _ghost_words(proc: Proc, by_pid: dict[int, Proc]) -> str:
    if proc.reason == "other-namespace" and not proc.links:
        return "not in this PID namespace (a container?): stop it where it runs"
    if proc.reason == "zombie":
        parent = proc.links[0] if proc.links else "?"
        return f"already exited (zombie, parent {parent} must reap it); NVML still lists it"
    holders = [pid for pid in proc.links if pid in by_pid]
    if holders:
        return f"already dead; its memory is held by {', '.join(map(str, holders))}"
    return "already dead; no holder found (ghost memory: try the sweep, or run the probe as root)"


def _why(proc: Proc, explicit: set[int] | None) -> str:
    if explicit is not None and proc.pid in explicit:
        head = "chosen by PID"
        return f"{head}; uses GPU {_gpus(proc.gpus)}" if proc.kind == "user" and proc.gpus else head
    if proc.kind == "hidden":
        link = proc.links[0] if proc.links else None
        how = {"pgid": "same process group as", "sid": "same session as", "ancestor": "descendant of"}
        if proc.gpus and link is not None:
            return f"hidden holder of GPU {_gpus(proc.gpus)} ({how.get(proc.reason or '', 'tied to')} {link})"
        if link is not None:
            return f"hidden holder tied to {link}"
        return "hidden holder"
    memory = ", ".join(f"GPU {i}: {fmt_bytes(b)}" for i, b in sorted(proc.gpu_memory.items()))
    return f"uses GPU {_gpus(proc.gpus)}" + (f" ({memory})" if memory else "")


def _target(host: str, proc: Proc, why: str) -> Target:
    assert proc.start_time is not None
    return Target(
        host=host,
        pid=proc.pid,
        start_time=proc.start_time,
        kind=proc.kind,
        why=why,
        name=proc.name,
        command=proc.command,
        user=proc.user,
        uid=proc.uid,
        state=proc.state,
        gpus=proc.gpus,
        gpu_memory=tuple(sorted(proc.gpu_memory.items())),
    )


def excluded_entry(host: str, proc: Proc, why: str) -> Excluded:
    return Excluded(
        host=host,
        pid=proc.pid,
        kind=proc.kind,
        why=why,
        start_time=proc.start_time,
        name=proc.name,
        command=proc.command,
        user=proc.user,
        gpus=proc.gpus,
        protected=proc.protected or ("monitor" if proc.kind == "monitor" else None),
    )


def _included(e: Excluded) -> Target:
    assert e.start_time is not None
    return Target(
        host=e.host,
        pid=e.pid,
        start_time=e.start_time,
        kind=e.kind,
        why="protected monitor, included by the operator",
        name=e.name,
        command=e.command,
        user=e.user,
        gpus=e.gpus,
        protected=e.protected,
    )


def _zombies_near(sample: Sample, indexes: set[int], targets: dict[int, Target], scope: str) -> list[Proc]:
    """Zombies worth showing with this plan: all for a host-wide plan, else those whose parent,
    group or session is a process on the targeted GPUs (where the memory of a bench run went)."""
    zombies = [p for p in sample.processes if p.kind == "zombie"]
    if scope == "host":
        return zombies
    near = set(targets) | {p.pid for p in sample.processes if set(p.gpus) & indexes}
    return [z for z in zombies if {z.ppid, z.pgid, z.sid} & near]


_SWEEP_HINT = "unattributed holders not included"


def _sweep_warning(count: int) -> PlanWarning:
    return PlanWarning(
        f"{_SWEEP_HINT}: {count} process(es) hold /dev/nvidia* with no link to a GPU (the sweep adds them)"
    )


def _warnings(plan: Plan, sample: Sample, indexes: set[int], opts: PlanOptions) -> list[PlanWarning]:
    out: list[PlanWarning] = []
    for t in plan.signalled:
        if t.user is not None and t.user != plan.operator:
            out.append(PlanWarning(f"{t.pid} belongs to {t.user}, not to you ({plan.operator})", t.pid))
        if t.state == "D":
            out.append(
                PlanWarning(f"{t.pid} is in state D (uninterruptible): even SIGKILL may not end it", t.pid)
            )
        others = sorted(set(t.gpus) - indexes)
        if others and plan.scope != "pids":
            out.append(
                PlanWarning(f"{t.pid} also uses GPU {_gpus(others)}: stopping it frees that too", t.pid)
            )
        if opts.probe_uid not in (None, 0) and t.uid is not None and t.uid != opts.probe_uid:
            out.append(
                PlanWarning(
                    f"the probe on {plan.host} runs as uid {opts.probe_uid}: signals to {t.pid} "
                    f"({t.user or t.uid}) will be refused (sudo = true in the host config allows them)",
                    t.pid,
                )
            )
    if plan.sweep and not plan.sweep_included:
        out.append(_sweep_warning(len(plan.sweep)))
    if sample.scan_unreadable:
        out.append(
            PlanWarning(
                f"{sample.scan_unreadable} processes' file descriptors could not be read: hidden holders "
                "may be missing (run the probe as root)"
            )
        )
    if plan.is_empty:
        out.append(
            PlanWarning(f"nothing to stop on GPU {_gpus(sorted(indexes))}: the probe will only verify")
        )
    return out


def _positive(value: float, what: str) -> float:
    if not value > 0:
        raise PlanError(f"the {what} timeout must be a positive number of seconds, not {value!r}")
    return float(value)


def _gpus(indexes: Iterable[int]) -> str:
    return ",".join(str(i) for i in indexes) or "-"

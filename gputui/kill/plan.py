"""Kill plans built from what the operator sees (a Sample): the confirmation dialog's and the CLI's.

A plan names processes by (pid, start time), says why each is targeted, which ones it leaves alone and
why, what to watch out for, the stages and timeouts the probe will run, and what it will prove
(docs/PROTOCOL.md "Plans"). Its scope decides both what the probe may add after the first kills and
what the verdict is about (docs/ARCHITECTURE.md "Staged kill-and-verify"):
- a GPU (or host) plan frees GPUs: their users, the hidden holders attributed to them and a ghost's
  suspects are targets, and the verdict is "the GPU is clean";
- a plan of processes stops exactly the chosen ones (and the hidden holders tied to them: stopping a
  parent alone would only turn it into a ghost); the verdict is "each is gone and the memory it held
  came back". What else uses those GPUs is named in the verdict, untouched.
The rules follow docs/GPU_FACTS.md: holding /dev/nvidiaN alone does not put a process on GPU N; a ghost
(a dead PID NVML still lists) is never a target, its suspected holders are; a zombie holds nothing;
protected processes (monitors, PID 1, the probe and its ancestors, kernel threads) are excluded, and
only a monitor can be included, explicitly (`Plan.including`), as the probe also enforces;
unattributed hidden holders are sweep candidates, listed apart and signalled only when asked.
Pure functions over a Sample: nothing here touches processes or the network.
"""

from __future__ import annotations

import getpass
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ..killoptions import KillOptions, PlanError
from ..model import Job, Proc, Sample, brief_command
from ..probe.common import (
    KILL_WAIT_S,
    POLL_S,
    SIGNAL_CHOICES,
    SIGNAL_PLANS,
    job_grace,
    plan_deadline,
    plan_silence_limit,
    signal_deadline,
)
from ..probe.jobs import INIT_COMMS, SESSION_COMMS, SHELLS, Node, interactive_shell
from ..units import fmt_bytes, fmt_gpus
from ..words import gpus_words

VERIFY_POLL_MS = round(POLL_S * 1000)  # the probe's NVML polling interval while verifying
KILL_WAIT = KILL_WAIT_S

PROTECTED_WORDS = {
    "monitor": "a GPU monitor: protected",
    "pid-1": "PID 1 (init): never signalled",
    "probe": "the gputui probe itself: never signalled",
    "probe-ancestor": "an ancestor of the probe (its shell or SSH session): never signalled",
    "kernel-thread": "a kernel thread: never signalled",
    "session": "a person's session (a login shell, sshd, tmux, screen, a terminal): never signalled",
    "init": "an init (it adopts and runs whole trees): never signalled",
    "boundary": "the edge of a job's container, Slurm job or unit, not part of the job: never signalled",
}
UNATTRIBUTED_WORDS = "unattributed hidden holder: holds /dev/nvidia*, no GPU listed, no link found"
SIGNAL_WORDS = {
    "term": "SIGTERM, then SIGKILL",
    "int": "SIGINT, then SIGTERM, then SIGKILL",
    "kill": "SIGKILL at once",
    "hup": "SIGHUP, then SIGTERM, then SIGKILL",
    "usr1": "SIGUSR1, then SIGTERM, then SIGKILL",
}


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """What the operator chose besides the scope."""

    operator: str | None = None  # default: the local user name
    kill: KillOptions = KillOptions()
    probe_uid: int | None = None  # the uid the host's probe runs as (HostFacts.uid): warns about EPERM
    plan_id: str | None = None


# -- what a plan holds -------------------------------------------------------------------------


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
    mps: str | None = None  # its part in CUDA MPS (server, control, client) or None
    mps_clients: tuple[int, ...] = ()  # an MPS server's or control daemon's clients: they end with it
    # In a job plan (JOB_ROLES): "root" (signalled first: a launcher forwards it to its ranks; it
    # may hold no GPU), "between" (a process of the job between its root and members, no GPU
    # needed) or "member" (a GPU process of the job); None outside a job. `job`: the job's id.
    role: str | None = None
    job: str | None = None

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
        out = {"pid": self.pid, "start_time": self.start_time, "reason": self.why, "gpus": list(self.gpus)}
        if self.role is not None:
            out["role"] = self.role
        return out

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
            "mps": self.mps,
            "mps_clients": list(self.mps_clients),
            "role": self.role,
            "job": self.job,
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
    chosen: bool = False  # the operator asked for it by name (PID, or selected in the dashboard)
    mps: str | None = None  # its part in CUDA MPS (server, control, client) or None
    mps_clients: tuple[int, ...] = ()  # an MPS server's or control daemon's clients

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
            "chosen": self.chosen,
            "mps": self.mps,
            "mps_clients": list(self.mps_clients),
        }


# What each warning is about: the dialog styles the severe ones, the CLI prints them all.
WARNING_KINDS = (
    "other-user",  # a target belongs to someone else
    "uninterruptible",  # a target is in state D
    "other-gpus",  # a target also uses GPUs outside the plan
    "permission",  # the probe's user cannot signal a target
    "sweep-off",  # unattributed holders exist and are not included
    "unreadable",  # fds the probe could not read: holders may be missing
    "nothing",  # nothing to signal
    "stale-scan",  # planned on an incremental sample
    "protected-included",  # a monitor is included
    "mps-server",  # an MPS server or control daemon is a target: its clients end with it
)
SEVERE = frozenset({"other-user", "uninterruptible", "permission", "protected-included", "mps-server"})


@dataclass(frozen=True, slots=True)
class PlanWarning:
    """Something the operator should know before confirming, of a typed kind (WARNING_KINDS)."""

    kind: str  # one of WARNING_KINDS
    message: str
    pid: int | None = None

    @property
    def severe(self) -> bool:
        return self.kind in SEVERE


@dataclass(frozen=True, slots=True)
class GpuBefore:
    """A GPU of the plan as it saw it."""

    index: int
    uuid: str | None
    memory_used: int | None
    memory_total: int | None


# selection: GPUs and processes chosen together; jobs: jobs (and processes) chosen, no GPU to clean;
# signal: one signal, once, to one process (the detail screen's `k`: plan_for_signal)
SCOPES = ("host", "gpus", "processes", "selection", "jobs", "signal")
# What each signal a `signal` plan may send does, for the chooser and the dialog.
SIGNAL_MEANINGS = {  # each fits the chooser's line at 80 columns
    "SIGTERM": "ask it to end (kill's default); it may clean up first",
    "SIGINT": "as Ctrl-C: many programs end cleanly",
    "SIGHUP": "hang-up: many servers reload their config or reopen logs",
    "SIGUSR1": "user-defined: depends on the program (stats, reopen logs)",
    "SIGUSR2": "user-defined: depends on the program",
    "SIGQUIT": "end with a core dump (Python: a traceback with faulthandler)",
    "SIGSTOP": "pause it (cannot be caught); its GPU memory stays held",
    "SIGCONT": "resume a stopped process",
    "SIGKILL": "end it at once (cannot be caught: no cleanup)",
}
assert tuple(SIGNAL_MEANINGS) == SIGNAL_CHOICES
JOB_ROLES = ("root", "between", "member")


@dataclass(frozen=True, slots=True)
class Plan:
    """What the probe of one host is asked to do, and what the operator sees before confirming it."""

    id: str
    host: str
    operator: str
    scope: str  # one of SCOPES: what the operator asked for
    gpus: tuple[GpuBefore, ...]  # the GPUs the plan proves clean (none for a plan of processes)
    targets: tuple[Target, ...]
    sweep: tuple[Target, ...]  # unattributed hidden holders; signalled only when sweep_included
    sweep_included: bool
    excluded: tuple[Excluded, ...]
    warnings: tuple[PlanWarning, ...]
    touched: tuple[GpuBefore, ...] = ()  # other GPUs the targets use: their memory is reported
    ghosts: tuple[int, ...] = ()  # dead PIDs the operator chose: their memory must come back
    include_protected: tuple[int, ...] = ()
    kill: KillOptions = KillOptions()
    sample_seq: int = 0
    # The jobs the plan stops (root first, then the members left): their roots, the processes
    # between and the members are targets (Target.role). Empty for a plan without jobs.
    jobs: tuple[Job, ...] = ()
    # A `signal` plan (scope "signal"): this one signal, sent once to its one target; no ladder,
    # no verification (plan_for_signal). None for every other plan.
    signal: str | None = None

    # -- what it is --------------------------------------------------------------------------

    def describe_jobs(self) -> str | None:
        """The plan's title when it stops jobs: `Stop job 4242 (torchrun --nproc-per-node 2
        train.py)`, `Stop 2 jobs: 4242 (torchrun ...), 4343 (python serve.py)`; None without jobs.
        The dialog's title and the CLI's plan head use it."""
        return jobs_title(self.jobs)

    @property
    def title(self) -> str:
        """What the plan does, in a few words, for any scope (`Stop job 4242 (torchrun ...)`,
        `Free GPU 3`, `Free GPUs 0, 2`, `Free every GPU (0-7)`, `Stop the chosen process`).
        The dialog, the action log and the CLI's plan head all use it."""
        gpus = gpus_words(self.gpu_indexes)
        if self.signal is not None:
            who = self.targets[0] if self.targets else (self.excluded[0] if self.excluded else None)
            return (
                f"Send {self.signal} to {who.pid} ({who.brief})" if who is not None else f"Send {self.signal}"
            )
        jobs = self.describe_jobs()
        if jobs is not None:
            return jobs + (f"; free {gpus}" if self.cleans_gpus else "")
        if self.scope == "host":
            return f"Free every GPU ({fmt_gpus(self.gpu_indexes)})"
        if self.scope == "gpus":
            return f"Free {gpus}"
        chosen = "the chosen process" if len(self.targets) == 1 else "the chosen processes"
        if self.scope == "selection":
            return f"Free {gpus} and stop {chosen}"
        return f"Stop {chosen}"

    @property
    def kind_title(self) -> str:
        """What the plan does in one or two words, for a dialog that shows several plans (one per
        host): `Free GPUs`, `Stop processes`, `Stop jobs`."""
        if self.signal is not None:
            return f"Send {self.signal}"
        if self.jobs:
            return "Stop jobs"
        if self.cleans_gpus:
            return "Free GPUs and stop processes" if self.scope == "selection" else "Free GPUs"
        return "Stop processes"

    def job_targets(self, job: Job) -> tuple[Target, ...]:
        """The targets of one of the plan's jobs, in the order they are signalled (root, the
        processes between, the members): what the dialog lists under the job, with what each holds."""
        order = {"root": 0, "between": 1, "member": 2}
        mine = [t for t in self.targets if t.job == job.id and t.role is not None]
        return tuple(sorted(mine, key=lambda t: (order.get(t.role or "", 3), t.pid)))

    @property
    def gpu_indexes(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus)

    @property
    def cleans_gpus(self) -> bool:
        """Whether the verdict is about GPUs (clean or not) rather than about processes."""
        return bool(self.gpus)

    @property
    def signalled(self) -> tuple[Target, ...]:
        """Every process the probe is asked to signal (the sweep only when included)."""
        return self.targets + (self.sweep if self.sweep_included else ())

    @property
    def is_empty(self) -> bool:
        """Nothing to signal: the probe will only verify."""
        return not self.signalled

    @property
    def signals(self) -> tuple[str, ...]:
        """The soft signals before SIGKILL (a `signal` plan: its one signal)."""
        if self.signal is not None:
            return (self.signal,)
        return SIGNAL_PLANS[self.kill.signals]

    @property
    def term_timeout(self) -> float:
        return self.kill.term_timeout

    @property
    def verify_timeout(self) -> float:
        return self.kill.verify_timeout

    @property
    def deadline(self) -> float:
        """Seconds after which the app stops waiting for the probe's verdict (outcome unknown)."""
        if self.signal is not None:
            return signal_deadline()
        return plan_deadline(len(self.signals), self.term_timeout, self.verify_timeout)

    @property
    def silence_limit(self) -> float:
        """Seconds a running plan may be silent before the app calls its outcome unknown."""
        if self.signal is not None:
            return signal_deadline()
        return plan_silence_limit(self.term_timeout, self.verify_timeout)

    @property
    def proves(self) -> str:
        """What the verdict will say, in words the dialog shows before anything is signalled."""
        if self.signal is not None:
            return (
                f"{self.signal} delivered to that very process (its PID and start time checked), and "
                "what it did (stopped, running, exited); nothing else is sent, nothing verified"
            )
        if self.cleans_gpus:
            one = len(self.gpu_indexes) == 1
            what = f"{gpus_words(self.gpu_indexes)} clean (nothing holds {'it' if one else 'them'}, memory back at idle)"
            if self.scope == "selection":
                what += "; the chosen processes gone"
            return what
        if self.jobs:
            return (
                "each job gone (its root, the processes between and every member) and the GPU memory "
                "its members held released (others on its GPUs left alone)"
            )
        return "each chosen process gone and the GPU memory it held released (others on its GPU left alone)"

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages in words, for the dialog and the CLI (worded here only)."""
        if self.signal is not None:
            return (
                "check: the same process (PID and start time, through its pidfd), not protected",
                f"{self.signal}, once",
                "read its state (no SIGKILL after it, no verification)",
            )
        t = self.term_timeout
        if self.jobs and self.signals:
            roots = ", ".join(str(j.root) for j in self.jobs)
            steps = [
                f"{sig} -> the job root{'s' if len(self.jobs) > 1 else ''} ({roots}) -> "
                f"after {job_grace(t):g} s, {sig} to the members left -> wait up to {t:g} s"
                for sig in self.signals
            ]
        else:
            steps = [f"{sig} -> wait up to {t:g} s" for sig in self.signals]
        steps.append("SIGKILL the survivors" if self.signals else "SIGKILL at once")
        if self.cleans_gpus:
            rescan = f"rescan: stop the hidden holders now on {gpus_words(self.gpu_indexes)}"
        else:
            rescan = "rescan: stop only holders tied to the targets"
        if self.sweep_included and self.sweep:
            rescan += f" and the {len(self.sweep)} swept"
        steps.append(rescan)
        steps.append(
            f"verify {gpus_words(self.gpu_indexes) + ' clean' if self.cleans_gpus else 'the targets gone'}"
            f" (NVML every {VERIFY_POLL_MS} ms, up to {self.verify_timeout:g} s)"
        )
        return tuple(steps)

    # -- changing it before it is confirmed --------------------------------------------------

    def with_sweep(self, on: bool = True) -> Plan:
        warnings = tuple(w for w in self.warnings if w.kind != "sweep-off")
        if not on and self.sweep:
            warnings += (_sweep_warning(len(self.sweep)),)
        return replace(self, sweep_included=on and bool(self.sweep), warnings=warnings)

    def with_options(self, kill: KillOptions) -> Plan:
        return replace(self, kill=kill)

    def including(self, pids: Iterable[int]) -> Plan:
        """Move excluded monitors with these PIDs into the targets (the operator chose them)."""
        wanted = set(pids)
        moved = [e for e in self.excluded if e.pid in wanted and e.can_include]
        if not moved:
            return self
        targets = self.targets + tuple(_included(e) for e in moved)
        excluded = tuple(e for e in self.excluded if e not in moved)
        include = tuple(sorted(set(self.include_protected) | {e.pid for e in moved}))
        warnings = self.warnings + tuple(
            PlanWarning(
                "protected-included",
                f"{e.pid} ({e.name or 'monitor'}) is a GPU monitor: stopping it ends what it does for "
                "everyone (metrics, health checks, persistence)",
                e.pid,
            )
            for e in moved
        )
        warnings += tuple(w for e in moved if (w := mps_warning(e.pid, e.mps, e.mps_clients)) is not None)
        touched = self.touched
        if not self.cleans_gpus:
            seen = {g.index for g in touched}
            touched += tuple(GpuBefore(i, None, None, None) for e in moved for i in e.gpus if i not in seen)
        return replace(
            self,
            targets=targets,
            excluded=excluded,
            include_protected=include,
            warnings=tuple(w for w in warnings if w.kind != "nothing"),
            touched=touched,
        )

    @property
    def includable(self) -> tuple[Excluded, ...]:
        """Monitors the operator chose by name that the plan left out: they may be included, with a
        second, explicit confirmation. Never into a signal plan: the probe sends those to no monitor."""
        if self.signal is not None:
            return ()
        return tuple(e for e in self.excluded if e.chosen and e.can_include)

    # -- on the wire and on disk -------------------------------------------------------------

    def to_wire(self) -> dict[str, Any]:
        """The `plan` record for the probe (docs/PROTOCOL.md "Plans"); a `signal` plan's is a
        `signal` record (docs/PROTOCOL.md "Signal"), which a probe without it refuses."""
        if self.signal is not None:
            return {
                "type": "signal",
                "v": 1,
                "id": self.id,
                "operator": self.operator,
                "signal": self.signal,
                # No role: the probe checks this target as a job root's (no GPU needed, never
                # an init or a session) whatever it is.
                "targets": [{k: v for k, v in t.to_wire().items() if k != "role"} for t in self.targets],
            }
        return {
            "type": "plan",
            "v": 1,
            "id": self.id,
            "operator": self.operator,
            "scope": "processes" if not self.cleans_gpus else ("host" if self.scope == "host" else "gpus"),
            # Job roots are signalled first (role "root"); older probes ignore the roles.
            "targets": [t.to_wire() for t in self.targets],
            "sweep": [t.to_wire() for t in self.sweep] if self.sweep_included else [],
            "gpus": list(self.gpu_indexes),
            "ghosts": list(self.ghosts),
            "include_protected": list(self.include_protected),
            "signals": list(self.signals),
            "term_timeout": self.term_timeout,
            "verify_timeout": self.verify_timeout,
        }

    def describe(self) -> dict[str, Any]:
        """Everything in plain JSON types (for `--json`, the audit log and tests)."""

        def gpus(items: tuple[GpuBefore, ...]) -> list[dict[str, Any]]:
            return [
                {
                    "index": g.index,
                    "uuid": g.uuid,
                    "memory_used": g.memory_used,
                    "memory_total": g.memory_total,
                }
                for g in items
            ]

        return {
            "id": self.id,
            "host": self.host,
            "operator": self.operator,
            "scope": self.scope,
            "proves": self.proves,
            "gpus": gpus(self.gpus),
            "touched": gpus(self.touched),
            "ghosts": list(self.ghosts),
            "targets": [t.describe() for t in self.targets],
            "sweep": [t.describe() for t in self.sweep],
            "sweep_included": self.sweep_included,
            "excluded": [e.describe() for e in self.excluded],
            "warnings": [{"kind": w.kind, "message": w.message, "pid": w.pid} for w in self.warnings],
            "stages": list(self.stages),
            "signals": list(self.signals),
            "term_timeout": self.term_timeout,
            "verify_timeout": self.verify_timeout,
            "include_protected": list(self.include_protected),
            "title": self.title,
            "signal": self.signal,
            "jobs": [
                dict(j.describe(), targets=[t.pid for t in self.job_targets(j)], where=j.where)
                for j in self.jobs
            ],
        }

    def pids_allowed(self) -> set[int]:
        """The PIDs a verdict may name as the plan's own (confirmed targets and the sweep)."""
        return {t.pid for t in self.targets} | {t.pid for t in self.sweep}


# -- the ways to ask ---------------------------------------------------------------------------


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
    sample: Sample, *, host: str, sweep: bool = False, options: PlanOptions | None = None
) -> Plan:
    """Free every GPU of the host: `fuser -k /dev/nvidia*` minus the protected, with proof.

    Every process that uses or holds a GPU through a link is stopped; the unattributed holders are
    listed as the sweep, added only when asked (they may be someone's NVML exporter)."""
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
    """Stop these processes (and the hidden holders tied to them); prove them gone.

    A PID that is not in the sample is excluded: only GPU processes are planned here."""
    return plan_for_selection(sample, host=host, pids=pids, sweep=sweep, options=options)


def plan_for_selection(
    sample: Sample,
    *,
    host: str,
    gpu_indexes: Iterable[int] = (),
    pids: Iterable[int] = (),
    jobs: Iterable[Job] = (),
    sweep: bool = False,
    options: PlanOptions | None = None,
) -> Plan:
    """GPUs, processes and jobs chosen together (the dashboard's selection, `--gpu` with `--pid`).

    Processes chosen by PID bring the hidden holders tied to them (stopping a parent alone would only
    turn it into a ghost); the GPUs they use are reported, not cleaned: that was not asked. A PID
    that is a job's root (a launcher, a supervisor: it may hold no GPU itself) or a process between
    a root and its members chooses that job, or the part of it below that process (`job_for_pid`);
    `jobs` are chosen whole. A job is stopped root first, then the members left (`Target.role`)."""
    asked = set(gpu_indexes)
    indexes = _check_gpus(sample, asked, host)
    wanted = list(dict.fromkeys(pids))
    by_pid = {p.pid: p for p in sample.processes}
    chosen_jobs = list(dict.fromkeys(jobs))
    plain = []
    for pid in wanted:
        job = job_for_pid(sample, pid)
        if job is None:
            plain.append(pid)
        elif all(j.root != job.root for j in chosen_jobs):
            chosen_jobs.append(job)
    parts = [_job_part(sample, host, job) for job in chosen_jobs]
    chosen = [p for p in sample.processes if set(p.gpus) & indexes]
    chosen += [by_pid[pid] for pid in plain if pid in by_pid]
    chosen += [p for part in parts for p in part.members]
    tied = set(plain) | {t.pid for part in parts for t in part.heads}
    chosen += [p for p in sample.processes if p.kind == "hidden" and set(p.links) & tied]
    if chosen_jobs and not asked:
        scope = "jobs"
    else:
        scope = "gpus" if not wanted and not chosen_jobs else ("processes" if not asked else "selection")
    opts = options or PlanOptions()
    plan = _build(sample, host, scope, indexes, chosen, sweep, opts, explicit=set(plain))
    unknown = tuple(_not_a_gpu_process(sample, host, pid) for pid in plain if pid not in by_pid)
    if unknown:
        plan = replace(plan, excluded=plan.excluded + unknown)
    return _with_jobs(plan, sample, parts, indexes, opts) if parts else plan


def plan_for_jobs(
    sample: Sample,
    jobs: Iterable[Job],
    *,
    host: str,
    sweep: bool = False,
    options: PlanOptions | None = None,
) -> Plan:
    """Stop these jobs: each root first (a launcher forwards the signal to its ranks), then the
    members left, on the usual ladder; prove every member gone with its memory released, and the
    root gone too. `jobs` as the sample (or the dashboard) carries them; their identity (root PID
    and start time) is the caller's to check against the sample (Operations does)."""
    return plan_for_selection(sample, host=host, jobs=jobs, sweep=sweep, options=options)


def plan_for_signal(
    sample: Sample,
    pid: int,
    start_time: int | None,
    signal: str,
    *,
    host: str,
    options: PlanOptions | None = None,
) -> Plan:
    """Send `signal` once to the process (pid, start time) the operator has in the detail screen:
    a GPU process (user or hidden holder), or a job's root or a process between it and its members
    (a launcher). Refused (excluded, nothing to send) as a kill would be: a monitor, a protected
    process, a zombie or ghost, an init or a person's session, a process that is neither; and one
    that is gone or whose PID names another process now. No ladder, no verification: the probe
    checks the process's identity and protection again, sends it, and says what it did."""
    if signal not in SIGNAL_CHOICES:
        raise PlanError(f"cannot send {signal!r}: one of {', '.join(SIGNAL_CHOICES)}")
    opts = options or PlanOptions()
    by_key = {p.key: p for p in sample.processes}
    proc = by_key.get((pid, start_time))
    target: Target | None = None
    left: Excluded | None = None
    if proc is not None:
        by_pid = {p.pid: p for p in sample.processes}
        reason = _exclusion(proc, by_pid)
        if reason is None:
            target = _target(host, proc, f"chosen; {_holds_words(proc)}")
        else:
            left = excluded_entry(host, proc, reason, chosen=True)
    else:
        left, target = _signal_parent(sample, host, pid, start_time)
    plan = Plan(
        id=opts.plan_id or uuid.uuid4().hex[:12],
        host=host,
        operator=opts.operator or getpass.getuser(),
        scope="signal",
        gpus=(),
        targets=(target,) if target is not None else (),
        sweep=(),
        sweep_included=False,
        excluded=(left,) if left is not None else (),
        warnings=(),
        touched=(),
        kill=opts.kill,
        sample_seq=sample.seq,
        signal=signal,
    )
    warnings = [w for w in _warnings(plan, sample, set(), opts) if w.kind != "nothing"]
    if target is None:
        warnings.append(PlanWarning("nothing", f"nothing to send {signal} to: see why below"))
    return replace(plan, warnings=tuple(warnings))


def _signal_parent(
    sample: Sample, host: str, pid: int, start_time: int | None
) -> tuple[Excluded | None, Target | None]:
    """A signal plan's process that is no GPU process: a job's root or a process between it and
    its members may be signalled (as a job plan's: no init, no person's session); anything else,
    or a process gone since the scan, is left alone."""
    info = next((p for p in sample.parents if p.key == (pid, start_time)), None)
    if info is None or start_time is None:
        now = any(p.pid == pid for p in sample.processes) or any(p.pid == pid for p in sample.parents)
        why = "its PID names another process now (reused)" if now else "not in the latest scan: exited?"
        return Excluded(host=host, pid=pid, kind="unknown", why=why, start_time=start_time, chosen=True), None
    jobs = [j for j in sample.jobs if (pid, start_time) in j.processes or j.key == (pid, start_time)]
    if not jobs:
        return _not_a_gpu_process(sample, host, pid), None
    job = jobs[0]
    node = Node(pid=pid, start=start_time, ppid=info.ppid or 0, comm=info.name or "", argv=info.command)
    refusal = _head_refusal(pid, info.name or "", node)
    role = "root" if job.root == pid else "between"
    if refusal is not None:
        why = f"{role} of {job_words(job)}: {PROTECTED_WORDS[refusal]}"
        left = Excluded(
            host=host,
            pid=pid,
            kind="root",
            why=why,
            start_time=start_time,
            name=info.name,
            command=info.command,
            user=info.user,
            protected=refusal,
            chosen=True,
        )
        return left, None
    what = "root" if role == "root" else "a process between the root and the members"
    return None, Target(
        host=host,
        pid=pid,
        start_time=start_time,
        kind="root",
        why=f"chosen; {what} of {job_words(job)}",
        name=info.name,
        command=info.command,
        user=info.user,
        uid=info.uid,
        state=info.state,
        role=role,
        job=job.id,
    )


def _head_refusal(pid: int, name: str, node: Node) -> str | None:
    """Why a process above a job's GPU processes must never be signalled (a PROTECTED_WORDS key)."""
    if pid == 1:
        return "pid-1"
    if pid == 2:
        return "kernel-thread"
    if name in SESSION_COMMS or interactive_shell(node):
        return "session"
    if name in INIT_COMMS:
        return "init"
    return None


# -- jobs ----------------------------------------------------------------------------------------


def job_words(job: Job) -> str:
    """`job 4242 (torchrun --nproc-per-node 2 train.py)`: how a plan and a verdict name a job."""
    command = job.command_line
    if len(command) > 60:
        command = command[:57] + "..."
    return f"job {job.id} ({command})"


def excluded_root(
    host: str, job: Job, why: str, *, kind: str = "root", protected: str | None = None
) -> Excluded:
    """A chosen job's root that a plan leaves alone (refused, or lost since it was chosen), as the
    job record names it: root PID and start time, command, user, GPUs."""
    return Excluded(
        host=host,
        pid=job.root,
        kind=kind,
        why=why,
        start_time=job.root_start,
        name=job.name,
        command=job.command,
        user=job.user,
        gpus=job.gpus,
        protected=protected,
        chosen=True,
    )


def jobs_title(jobs: Iterable[Job]) -> str | None:
    """`Stop job 4242 (torchrun ...)`, `Stop 2 jobs: 4242 (torchrun ...), 4343 (python serve.py)`;
    None for no job. The one place these words are made (the dialog's title, the CLI's plan head)."""
    items = list(jobs)
    if not items:
        return None
    if len(items) == 1:
        return "Stop " + job_words(items[0])
    shown = ", ".join(job_words(j)[len("job ") :] for j in items[:4])
    more = f" and {len(items) - 4} more" if len(items) > 4 else ""
    return f"Stop {len(items)} jobs: {shown}{more}"


def job_for_pid(sample: Sample, pid: int) -> Job | None:
    """The job `clean --pid PID` stops, or None when PID names a plain process (or nothing known).

    PID is a job's root: that job (unless it is the job's only member: a plain GPU process). PID is
    a process between a job's root and its members (an agent below a launcher): the part of the
    job below it, as a job rooted there. Anything above a root (a shell, sshd, init) is no job."""
    for job in sample.jobs:
        if job.root == pid:
            if job.members == (pid,):
                return None
            return job
    ppids = _ppids(sample)
    gpu_pids = {p.pid for p in sample.processes}
    for job in sample.jobs:
        starts = dict(job.processes)
        if pid not in starts or pid in gpu_pids:
            continue
        members = tuple(m for m in job.members if _path_up(m, pid, ppids) is not None)
        if not members:
            continue
        info = next((p for p in sample.parents if p.pid == pid), None)
        procs = {p.pid: p for p in sample.processes if p.pid in members}
        return replace(
            job,
            id=str(pid),
            root=pid,
            root_start=starts[pid],
            name=info.name if info else None,
            command=info.command if info else (),
            user=info.user if info else None,
            uid=info.uid if info else None,
            state=info.state if info else None,
            ppid=info.ppid if info else None,
            members=members,
            processes=tuple((p, s) for p, s in job.processes if p == pid or _path_up(p, pid, ppids)),
            gpus=tuple(sorted({g for p in procs.values() for g in p.gpus})),
            memory=sum(b or 0 for p in procs.values() for b in p.gpu_memory.values()),
        )
    return None


def above_jobs(sample: Sample, pid: int) -> tuple[Job, ...]:
    """The jobs whose root `pid` is an ancestor of (the shell, sshd, tmux or init they were started
    from; a container's or unit's edge): asking for `pid` is asking for none of them."""
    ppids = _ppids(sample)
    if any(j.root == pid for j in sample.jobs):
        return ()
    return tuple(j for j in sample.jobs if _path_up(j.root, pid, ppids) is not None)


def _not_a_gpu_process(sample: Sample, host: str, pid: int) -> Excluded:
    """A PID chosen that is no GPU process and no job's: unknown, or above jobs (refused)."""
    jobs = above_jobs(sample, pid)
    if not jobs:
        return Excluded(
            host=host, pid=pid, kind="unknown", why="not a GPU process in the latest sample", chosen=True
        )
    info = next((p for p in sample.parents if p.pid == pid), None)
    name = info.name if info is not None else None
    command = info.command if info is not None else ()
    node = Node(pid=pid, start=0, ppid=0, comm=name or "", argv=command)
    if pid == 1:
        what = "pid-1"
    elif name in SESSION_COMMS or interactive_shell(node):
        what = "session"
    elif name in INIT_COMMS or jobs[0].boundary == "init":
        what = "init"  # an init program, or what acts as one here (a subreaper: the sim's session)
    elif jobs[0].boundary == "shell":
        what = "session"
    else:
        what = "boundary"
    ids = ", ".join(j.id for j in jobs[:8]) + (" ..." if len(jobs) > 8 else "")
    return Excluded(
        host=host,
        pid=pid,
        kind="root",
        why=f"above {'job' if len(jobs) == 1 else 'jobs'} {ids}: {PROTECTED_WORDS[what]}; stop the "
        f"job instead: clean --job {jobs[0].id}",
        start_time=info.start_time if info is not None else None,
        name=name,
        command=command,
        user=info.user if info is not None else None,
        protected=what,
        chosen=True,
    )


def root_refusal(job: Job, sample: Sample) -> str | None:
    """Why a job's root must never be signalled (a PROTECTED_WORDS key), or None. The probe finds
    roots below these (docs/ARCHITECTURE.md "Jobs: how a job's root is found"); a root that is one
    anyway (a protected GPU process is a job of its own) is refused, and so is the job."""
    proc = next((p for p in sample.processes if p.pid == job.root), None)
    if proc is not None and proc.protected:
        return proc.protected
    if job.root == 1:
        return "pid-1"
    if job.root == 2:
        return "kernel-thread"
    name = job.name or ""
    if name in SESSION_COMMS:
        return "session"
    if name in INIT_COMMS:
        return "init"
    if name in SHELLS or (job.command and job.command[0].startswith("-")):
        node = Node(pid=job.root, start=job.root_start or 0, ppid=job.ppid or 0, comm=name, argv=job.command)
        if interactive_shell(node):
            return "session"
    return None


@dataclass(frozen=True, slots=True)
class _JobPart:
    """One job of a plan: its root and the processes between (`heads`, no GPU needed), the GPU
    processes below the root (`members`), and why the job cannot be stopped, if so."""

    job: Job
    heads: tuple[Target, ...]
    members: tuple[Proc, ...]
    refused: Excluded | None = None


def _ppids(sample: Sample) -> dict[int, int]:
    out = {p.pid: p.ppid for p in sample.parents if p.ppid is not None}
    out.update({p.pid: p.ppid for p in sample.processes if p.ppid is not None})
    return out


def _path_up(pid: int, root: int, ppids: dict[int, int], limit: int = 64) -> list[int] | None:
    """The PIDs strictly between `pid` and its ancestor `root`, nearest first; None when `root` is
    not an ancestor as far as the sample knows."""
    path: list[int] = []
    at = ppids.get(pid)
    while at is not None and len(path) <= limit:
        if at == root:
            return path
        path.append(at)
        at = ppids.get(at)
    return None


def _job_part(sample: Sample, host: str, job: Job) -> _JobPart:
    """What stopping `job` takes: every GPU process of the root's subtree (by the sample's parent
    links, and the job's own member list), the root, and the processes between them."""
    ppids = _ppids(sample)
    members = tuple(
        p
        for p in sample.processes
        if p.kind in ("user", "hidden", "monitor")
        and p.pid != job.root
        and (p.pid in job.members or _path_up(p.pid, job.root, ppids) is not None)
    )
    starts = dict(job.processes)
    parents = {p.pid: p for p in sample.parents}
    root_proc = next((p for p in sample.processes if p.pid == job.root), None)
    reason = root_refusal(job, sample)
    if reason is None and job.root_start is None:
        reason = "no-start"
    member_pids = {p.pid for p in members}
    between: list[int] = []
    for m in members:
        for pid in _path_up(m.pid, job.root, ppids) or ():
            if pid not in between and pid not in member_pids and pid in starts:
                between.append(pid)
    if reason is not None:
        why = PROTECTED_WORDS.get(reason, "its start time could not be read: it cannot be identified safely")
        refused = excluded_root(
            host,
            job,
            f"root of {job_words(job)}: {why}; its job is not stopped",
            kind=root_proc.kind if root_proc is not None else "root",
            protected=reason if reason != "no-start" else None,
        )
        return _JobPart(job, (), (), refused)
    root_why = f"root of job {job.id}: signalled first" + (
        " (a launcher passes it on to its members)" if members else ""
    )
    if root_proc is not None:
        why = f"{root_why}; {_why(root_proc, set())}" if root_proc.gpus else root_why
        root = replace(_target(host, root_proc, why, mps_clients(sample, root_proc)), role="root", job=job.id)
    else:
        assert job.root_start is not None
        root = Target(
            host=host,
            pid=job.root,
            start_time=job.root_start,
            kind="root",
            why=root_why,
            name=job.name,
            command=job.command,
            user=job.user,
            uid=job.uid,
            state=job.state,
            role="root",
            job=job.id,
        )
    heads = [root]
    for pid in between:
        info, start = parents.get(pid), starts[pid]
        if start is None:
            continue  # cannot be told from a reuse: not signalled (the root's signal reaches it)
        heads.append(
            Target(
                host=host,
                pid=pid,
                start_time=start,
                kind="root",
                why=f"between the root and the members of job {job.id}",
                name=info.name if info else None,
                command=info.command if info else (),
                user=info.user if info else None,
                uid=info.uid if info else None,
                state=info.state if info else None,
                role="between",
                job=job.id,
            )
        )
    return _JobPart(job, tuple(heads), members)


def _with_jobs(
    plan: Plan, sample: Sample, parts: list[_JobPart], indexes: set[int], opts: PlanOptions
) -> Plan:
    """`plan` (built with the jobs' members as chosen processes) with the jobs' roots and the
    processes between as targets first, the members marked, a refused job's root excluded."""
    targets = list(plan.targets)
    excluded = list(plan.excluded)
    heads: list[Target] = []
    for part in parts:
        if part.refused is not None:
            excluded.append(part.refused)
            continue
        head_pids = {h.pid for h in part.heads}
        member_pids = {p.pid for p in part.members}
        targets = [t for t in targets if t.pid not in head_pids]
        for i, t in enumerate(targets):
            if t.pid in member_pids and t.role is None:
                targets[i] = replace(
                    t, role="member", job=part.job.id, why=f"member of job {part.job.id}; {t.why}"
                )
        heads += part.heads
    jobs = tuple(part.job for part in parts if part.refused is None)
    # Roots first, then the processes between, then everything else in the plan's order.
    heads.sort(key=lambda t: 0 if t.role == "root" else 1)
    everything = heads + targets
    # A root that holds a GPU itself (a job of one process, a server with workers): its GPU is
    # reported too.
    used = {i for t in everything for i in t.gpus} - set(plan.gpu_indexes)
    touched = tuple(_before(g) for g in sample.gpus if g.index in used)
    new = replace(plan, targets=tuple(everything), excluded=tuple(excluded), jobs=jobs, touched=touched)
    return replace(new, warnings=tuple(_warnings(new, sample, indexes, opts)))


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
    explicit = explicit or set()
    targets: dict[int, Target] = {}
    excluded: dict[int, Excluded] = {}
    ghosts: list[int] = []
    for proc in chosen:
        if proc.pid in targets or proc.pid in excluded:
            continue
        reason = _exclusion(proc, by_pid)
        if reason is not None:
            clients = mps_clients(sample, proc)
            if clients and proc.protected == "monitor":
                reason = _mps_words(proc, clients)
            excluded[proc.pid] = excluded_entry(
                host, proc, reason, chosen=proc.pid in explicit, clients=clients
            )
        if proc.kind == "ghost":
            if proc.pid in explicit:
                ghosts.append(proc.pid)
            # Its memory is held by the suspects: they are the targets.
            for pid in proc.links:
                suspect = by_pid.get(pid)
                if suspect is not None and pid not in targets and _exclusion(suspect, by_pid) is None:
                    targets[pid] = _target(host, suspect, f"holds the memory of ghost {proc.pid}")
        elif reason is None:
            targets[proc.pid] = _target(host, proc, _why(proc, explicit), mps_clients(sample, proc))
    for zombie in _zombies_near(sample, indexes, targets, scope):
        excluded.setdefault(zombie.pid, excluded_entry(host, zombie, _zombie_words(zombie)))
    sweep_targets = tuple(
        _target(host, p, UNATTRIBUTED_WORDS)
        for p in sweep_candidates(sample)
        if p.pid not in targets and p.start_time is not None
    )
    operator = opts.operator or getpass.getuser()
    ordered = tuple(sorted(targets.values(), key=lambda t: (min(t.gpus, default=1 << 20), -t.memory, t.pid)))
    used = {i for t in ordered for i in t.gpus} | {i for pid in ghosts for i in by_pid[pid].gpus}
    plan = Plan(
        id=opts.plan_id or uuid.uuid4().hex[:12],
        host=host,
        operator=operator,
        scope=scope,
        gpus=tuple(_before(g) for g in sample.gpus if g.index in indexes),
        targets=ordered,
        sweep=sweep_targets,
        sweep_included=sweep and bool(sweep_targets),
        excluded=tuple(excluded.values()),
        warnings=(),
        touched=tuple(_before(g) for g in sample.gpus if g.index in used - indexes),
        ghosts=tuple(ghosts),
        kill=opts.kill,
        sample_seq=sample.seq,
    )
    return replace(plan, warnings=tuple(_warnings(plan, sample, indexes, opts)))


def _before(gpu: Any) -> GpuBefore:
    return GpuBefore(gpu.index, gpu.uuid, gpu.memory_used, gpu.memory_total)


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


def _why(proc: Proc, explicit: set[int]) -> str:
    """Why a process is in the plan: what it holds and how it is tied to it; `chosen` first when
    the operator named it (by PID, or selected in the dashboard): what it is still says why."""
    what = _holds_words(proc)
    return f"chosen; {what}" if proc.pid in explicit else what


def _holds_words(proc: Proc) -> str:
    """`uses GPU 0: 40.0 GiB`, `hidden holder of GPU 2 (same process group as 4121)`."""
    if proc.kind == "hidden":
        link = proc.links[0] if proc.links else None
        how = {"pgid": "same process group as", "sid": "same session as", "ancestor": "descendant of"}
        if proc.gpus and link is not None:
            return (
                f"hidden holder of {gpus_words(proc.gpus)} ({how.get(proc.reason or '', 'tied to')} {link})"
            )
        if link is not None:
            return f"hidden holder tied to {link}"
        if not proc.gpus:
            return UNATTRIBUTED_WORDS
        return f"hidden holder of {gpus_words(proc.gpus)}"
    sizes = sorted(proc.gpu_memory.items())
    if sizes and all(b is not None for _, b in sizes) and {i for i, _ in sizes} == set(proc.gpus):
        return "uses " + ", ".join(f"GPU {i}: {fmt_bytes(b)}" for i, b in sizes)
    return f"uses {gpus_words(proc.gpus)}" if proc.gpus else "uses no GPU NVML lists"


def _target(host: str, proc: Proc, why: str, clients: tuple[int, ...] = ()) -> Target:
    assert proc.start_time is not None
    return Target(
        mps=proc.mps,
        mps_clients=clients,
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


def excluded_entry(
    host: str, proc: Proc, why: str, chosen: bool = False, clients: tuple[int, ...] = ()
) -> Excluded:
    return Excluded(
        mps=proc.mps,
        mps_clients=clients,
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
        chosen=chosen,
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
        mps=e.mps,
        mps_clients=e.mps_clients,
    )


def _zombies_near(sample: Sample, indexes: set[int], targets: dict[int, Target], scope: str) -> list[Proc]:
    """Zombies worth showing with this plan: all for a host-wide plan, else those whose parent,
    group or session is a process on the targeted GPUs (where the memory of a bench run went)."""
    zombies = [p for p in sample.processes if p.kind == "zombie"]
    if scope == "host":
        return zombies
    near = set(targets) | {p.pid for p in sample.processes if set(p.gpus) & indexes}
    return [z for z in zombies if {z.ppid, z.pgid, z.sid} & near]


def mps_clients(sample: Sample, proc: Proc) -> tuple[int, ...]:
    """The MPS clients that end with this process: for a server, the clients of its user on its GPUs
    (MPS runs one server per user); for the control daemon, every client of the host. Empty for
    anything else."""
    if proc.mps not in ("server", "control"):
        return ()
    clients = [p for p in sample.processes if p.mps == "client" and p.pid != proc.pid]
    if proc.mps == "server":
        clients = [
            p
            for p in clients
            if (proc.uid is None or p.uid is None or p.uid == proc.uid)
            and (not proc.gpus or not p.gpus or set(p.gpus) & set(proc.gpus))
        ]
    return tuple(sorted(p.pid for p in clients))


def mps_warning(pid: int, mps: str | None, clients: tuple[int, ...]) -> PlanWarning | None:
    """The warning for a plan that stops an MPS server or control daemon, naming its clients."""
    if mps not in ("server", "control"):
        return None
    what = "the MPS server" if mps == "server" else "the MPS control daemon"
    if clients:
        shown = ", ".join(map(str, clients[:12])) + (
            f" and {len(clients) - 12} more" if len(clients) > 12 else ""
        )
        whose = f"all its clients: {_count(len(clients), 'process', 'processes')} ({shown})"
    else:
        whose = "all its clients (none is listed now)"
    if mps == "control":
        whose += " and the MPS servers it started"
    return PlanWarning("mps-server", f"{pid} is {what}: stopping it ends {whose}", pid)


def _mps_words(proc: Proc, clients: tuple[int, ...]) -> str:
    what = "MPS server" if proc.mps == "server" else "MPS control daemon"
    return f"{what}: protected (stopping it ends its {_count(len(clients), 'client', 'clients')})"


def _sweep_warning(count: int) -> PlanWarning:
    return PlanWarning(
        "sweep-off",
        f"unattributed holders not included: {_count(count, 'process', 'processes')} hold "
        "/dev/nvidia* with no link to a GPU (the sweep adds them)",
    )


def _warnings(plan: Plan, sample: Sample, indexes: set[int], opts: PlanOptions) -> list[PlanWarning]:
    out: list[PlanWarning] = []
    for t in plan.signalled:
        if t.user is not None and t.user != plan.operator:
            out.append(
                PlanWarning("other-user", f"{t.pid} belongs to {t.user}, not to you ({plan.operator})", t.pid)
            )
        if t.state == "D":
            out.append(
                PlanWarning(
                    "uninterruptible",
                    f"{t.pid} is in state D (uninterruptible): even SIGKILL may not end it",
                    t.pid,
                )
            )
        others = sorted(set(t.gpus) - indexes)
        if others and plan.cleans_gpus:
            out.append(
                PlanWarning(
                    "other-gpus",
                    f"{t.pid} also uses {gpus_words(others)}: stopping it frees "
                    + ("that too" if len(others) == 1 else "those too"),
                    t.pid,
                )
            )
        if (w := mps_warning(t.pid, t.mps, t.mps_clients)) is not None:
            out.append(w)
        if opts.probe_uid not in (None, 0) and t.uid is not None and t.uid != opts.probe_uid:
            out.append(
                PlanWarning(
                    "permission",
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
                "unreadable",
                f"{_count(sample.scan_unreadable, 'process', 'processes')}' file descriptors could not be "
                "read: hidden holders may be missing (run the probe as root)",
            )
        )
    if plan.is_empty:
        where = gpus_words(sorted(indexes)) if indexes else "the chosen processes"
        out.append(PlanWarning("nothing", f"nothing to stop for {where}: the probe will only verify"))
    return out


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"

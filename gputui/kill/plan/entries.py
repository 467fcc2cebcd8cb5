"""What a plan is made of besides its stages: the processes it names (`Target`, signalled, and
`Excluded`, left alone, and why), its warnings and the GPUs as it saw them.

Apart from the planner because the dialog, the CLI and the audit log read these records without
building a plan. A target and an excluded process say the same dozen things of a process (who it is,
what it runs, which GPUs, its part in MPS): `Entry` declares them once, and `Entry.named` copies
them from the sample's record (a process, a parent or a job) for every kind of entry. What each
writes (`describe`, `to_wire`) is its own, key by key: the audit log and the probe read those.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar, Literal, TypeVar, get_args

from ...model import Job, Parent, Proc, WireScope, brief_process

# -- the processes a plan names ---------------------------------------------------------------

E = TypeVar("E", bound="Entry")


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """What a plan says of a process it names, target or left alone."""

    host: str
    pid: int
    start_time: int | None = None
    # A target's: user | hidden | root (| monitor when included explicitly); an excluded process's:
    # user | ghost | hidden | monitor | zombie | root | unknown.
    kind: str
    why: str  # e.g. "uses GPU 3 (40.0 GiB)", "zombie: holds nothing, parent 4121 must reap it"
    name: str | None = None
    command: tuple[str, ...] = ()
    user: str | None = None
    gpus: tuple[int, ...] = ()
    protected: str | None = None  # a target's: only a monitor the operator included
    mps: str | None = None  # its part in CUDA MPS (server, control, client) or None
    mps_clients: tuple[int, ...] = ()  # an MPS server's or control daemon's clients: they end with it

    UNNAMED: ClassVar[str] = "?"  # `brief` for a process without a command or a name
    # The keys of `describe`, in the order the audit log and `clean --json` have always had them.
    DESCRIBED: ClassVar[tuple[str, ...]] = ()

    @property
    def command_line(self) -> str:
        return " ".join(self.command) if self.command else (f"[{self.name}]" if self.name else "?")

    @property
    def brief(self) -> str:
        """The command for a table cell: `python .../train.py --lr 3e-4`."""
        return brief_process(self.command, self.name, self.UNNAMED)

    @classmethod
    def named(
        cls: type[E],
        host: str,
        pid: int,
        start_time: int | None,
        kind: str,
        why: str,
        record: Proc | Parent | Job | None,
        **more: Any,
    ) -> E:
        """An entry of this kind for process `pid`, its name, command and user as `record` says
        them (nothing known for None); `more`: the rest of its fields."""
        who: dict[str, Any] = {}
        if record is not None:
            who = {"name": record.name, "command": record.command, "user": record.user}
        return cls(host=host, pid=pid, start_time=start_time, kind=kind, why=why, **who, **more)

    @classmethod
    def of(cls: type[E], host: str, proc: Proc, why: str, clients: tuple[int, ...] = (), **more: Any) -> E:
        """An entry of this kind for a sample's process: what every entry says of a process, copied
        from it here, once; `more`: what this kind adds (a target's uid, an exclusion's `chosen`)."""
        rest = {"gpus": proc.gpus, "mps": proc.mps, "mps_clients": clients, **more}
        return cls.named(host, proc.pid, proc.start_time, proc.kind, why, proc, **rest)

    def describe(self) -> dict[str, Any]:
        """Plain JSON types, for `--json`, the audit log and tests: DESCRIBED's keys, in its order."""
        out: dict[str, Any] = {}
        for key in self.DESCRIBED:
            value = getattr(self, key)
            if key == "gpu_memory":
                out[key] = {str(i): b for i, b in value}
            else:
                out[key] = list(value) if isinstance(value, tuple) else value
        return out

    def entry_fields(self) -> dict[str, Any]:
        """The fields every entry has, to make an entry of one kind from one of the other."""
        return {f.name: getattr(self, f.name) for f in fields(Entry)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Target(Entry):
    """A process the plan will signal."""

    start_time: int
    uid: int | None = None
    state: str | None = None
    gpu_memory: tuple[tuple[int, int | None], ...] = ()  # (GPU index, bytes or None) from NVML
    # In a job plan (probe.run.orders.JOB_ROLES): "root" (signalled first: a launcher forwards it to its ranks; it
    # may hold no GPU), "between" (a process of the job between its root and members, no GPU
    # needed) or "member" (a GPU process of the job); None outside a job. `job`: the job's id.
    role: str | None = None
    job: str | None = None

    DESCRIBED: ClassVar[tuple[str, ...]] = (
        "host", "pid", "start_time", "kind", "why", "name", "command", "user", "uid", "state", "gpus",
        "gpu_memory", "protected", "mps", "mps_clients", "role", "job",
    )  # fmt: skip

    @property
    def memory(self) -> int:
        return sum(b or 0 for _, b in self.gpu_memory)

    def to_wire(self) -> dict[str, Any]:
        out = {"pid": self.pid, "start_time": self.start_time, "reason": self.why, "gpus": list(self.gpus)}
        if self.role is not None:
            out["role"] = self.role
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Excluded(Entry):
    """A process the plan leaves alone, and why."""

    chosen: bool = False  # the operator asked for it by name (PID, or selected in the dashboard)

    UNNAMED: ClassVar[str] = "(no such process)"
    DESCRIBED: ClassVar[tuple[str, ...]] = (
        "host", "pid", "kind", "why", "start_time", "name", "command", "user", "gpus", "protected",
        "chosen", "mps", "mps_clients",
    )  # fmt: skip

    @property
    def brief(self) -> str:
        """As Entry's; an entry with no record is "(no such process)" only where that is known: a
        ghost, a PID NVML lists that is dead. A PID chosen that the sample has no record of (one
        above the jobs, an init or a shell, or no GPU process at all) may well run: "?"."""
        unnamed = self.UNNAMED if self.kind == "ghost" else Entry.UNNAMED
        return brief_process(self.command, self.name, unnamed)

    @property
    def can_include(self) -> bool:
        """Only a monitor may be included by the operator; the probe refuses every other protection."""
        return self.protected == "monitor" and self.start_time is not None


def target_entry(host: str, proc: Proc, why: str, clients: tuple[int, ...] = ()) -> Target:
    """A sample's process as a target (one with a start time: it can be told from a reuse)."""
    assert proc.start_time is not None
    memory = tuple(sorted(proc.gpu_memory.items()))
    return Target.of(host, proc, why, clients, uid=proc.uid, state=proc.state, gpu_memory=memory)


def excluded_entry(
    host: str, proc: Proc, why: str, chosen: bool = False, clients: tuple[int, ...] = ()
) -> Excluded:
    """A sample's process (or one chosen in the dashboard) that a plan leaves alone, and why."""
    protected = proc.protected or ("monitor" if proc.kind == "monitor" else None)
    return Excluded.of(host, proc, why, clients, protected=protected, chosen=chosen)


def head_target(
    host: str, pid: int, start_time: int, record: Parent | Job | None, why: str, role: str, job: str
) -> Target:
    """A job's root or a process between it and its members (no GPU of its own needed), as its
    record names it: the sample's parent, or the job's own for its root; None: nothing known."""
    uid, state = (record.uid, record.state) if record is not None else (None, None)
    return Target.named(host, pid, start_time, "root", why, record, uid=uid, state=state, role=role, job=job)


def head_excluded(
    host: str,
    pid: int,
    start_time: int | None,
    record: Parent | Job | None,
    why: str,
    *,
    kind: str = "root",
    protected: str | None = None,
    gpus: tuple[int, ...] = (),
) -> Excluded:
    """A process above a job's GPU processes, chosen by the operator, that a plan leaves alone."""
    return Excluded.named(
        host, pid, start_time, kind, why, record, gpus=gpus, protected=protected, chosen=True
    )


def included(e: Excluded) -> Target:
    """An excluded monitor the operator included: the same process, now a target."""
    assert e.start_time is not None
    return Target(**dict(e.entry_fields(), why="protected monitor, included by the operator"))


# -- what else a plan holds -------------------------------------------------------------------

# What each warning is about: the dialog styles the severe ones, the CLI prints them all.
WARNING_KINDS = (
    "other-user",  # a target belongs to someone else
    "uninterruptible",  # a target is in state D
    "other-gpus",  # a target also uses GPUs outside the plan
    "permission",  # the probe's user cannot signal a target
    "sweep-off",  # unattributed holders exist and are not included
    "unreadable",  # fds the probe could not read: holders may be missing
    "nothing",  # nothing to signal
    "zombie",  # a chosen process is a zombie: no signal reaches it, its parent must reap it
    "stale-scan",  # planned on an incremental sample
    "protected-included",  # a monitor is included
    "mps-server",  # an MPS server or control daemon is a target: its clients end with it
    "restart",  # a target's parent, of the same job, is not in the plan: it may start the target again
)
SEVERE = frozenset({"other-user", "uninterruptible", "permission", "protected-included", "mps-server"})


# How a warning's job is stopped from the command line (`clean`'s plan, its JSON, the audit log);
# the dashboard says its key (PlanWarning.said).
STOP_JOB_FLAG = "clean --job {job}"


@dataclass(frozen=True, slots=True)
class PlanWarning:
    """Something the operator should know before confirming, of a typed kind (WARNING_KINDS)."""

    kind: str  # one of WARNING_KINDS
    message: str  # in no front's words: a key or a flag is `said`'s to add
    pid: int | None = None
    job: str | None = None  # the job whose stopping, whole, answers it (a restart warning's)

    @property
    def severe(self) -> bool:
        return self.kind in SEVERE

    def said(self, stop_job: str) -> str:
        """The message as one front says it: where it names a job to stop, how, in that front's
        words: `stop_job` with `{job}` in it (the dashboard's key, the CLI's flag)."""
        return self.message if self.job is None else f"{self.message} ({stop_job.format(job=self.job)})"


@dataclass(frozen=True, slots=True)
class GpuBefore:
    """A GPU of the plan as it saw it."""

    index: int
    uuid: str | None
    memory_used: int | None
    memory_total: int | None

    @classmethod
    def of(cls, gpu: Any) -> GpuBefore:
        """A sample's GPU (model.Gpu) as the plan saw it."""
        return cls(gpu.index, gpu.uuid, gpu.memory_used, gpu.memory_total)

    def describe(self) -> dict[str, Any]:
        """Its fields in plain JSON types (the plan's `gpus` and `touched` in the audit log)."""
        return asdict(self)


# What the operator asked for: the wire's scopes (the probe's), and the app's own. selection: GPUs
# and processes chosen together; jobs: jobs (and processes) chosen, no GPU to clean; signal: one
# signal, once, to one process (the detail screen's `k`: plan_for_signal); mig: MIG instances alone
# (`--gpu MIG-...`: the processes in them, never their GPU's other instances).
PlanScope = Literal[WireScope, "selection", "jobs", "signal", "mig"]
SCOPES: tuple[PlanScope, ...] = get_args(PlanScope)

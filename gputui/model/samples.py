"""One sample of a host (docs/PROTOCOL.md "sample"): its GPUs, the processes that use or hold them,
their parents and jobs, and how current the sample is. This is what the fleet keeps per host and
what plans are built from; the records it is made of live beside it (gputui.model.gpus, .jobs,
.host), each read field by field (gputui.model.decode).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..probe.classify import KINDS, MPS_ROLES
from ..probe.common import IDLE_SLACK
from ..probe.jobs import MAX_JOBS
from ..probe.wire import MAX_PROCESSES
from .decode import (
    MAX_GPUS,
    Indexes,
    Pids,
    as_dict,
    as_list,
    as_measure,
    as_percent,
    as_pid,
    as_total,
    index_key,
    listed_once,
    read_fields,
    records,
    wire_fields,
)
from .gpus import Gpu, MigPlace, mig_places
from .host import HostMetrics
from .jobs import Job, as_job_id, sample_jobs
from .process import ProcessFacts

MAX_PARENTS = 256  # parents taken from one sample (the probe sends at most 64)
MAX_REFUSED_WHY = 8  # refused GPU records described (the rest are counted)
MAX_SHARES = 4096  # GPUs a process's utilization is taken for


@dataclass(frozen=True, slots=True)
class GpuShare:
    """A process's utilization of one GPU, in percent (nvmlDeviceGetProcessUtilization, averaged
    since the probe's previous reading): SM, memory controller, encoder, decoder."""

    sm: int | None = None
    mem: int | None = None
    enc: int | None = None
    dec: int | None = None

    @classmethod
    def from_wire(cls, d: Any) -> GpuShare | None:
        if not isinstance(d, dict):
            return None
        return cls(**{k: as_percent(d.get(k)) for k in ("sm", "mem", "enc", "dec")})


def _shares(value: Any) -> dict[int, GpuShare] | None:
    """{"0": share} per GPU, or None where the probe did not read it (off, unsupported, not due)."""
    if not isinstance(value, dict):
        return None
    out: dict[int, GpuShare] = {}
    for key, item in list(value.items())[:MAX_SHARES]:
        index, share = index_key(key), GpuShare.from_wire(item)
        if index is not None and share is not None:
            out[index] = share
    return out


@dataclass(frozen=True, slots=True)
class ProcUtilState:
    """How current a sample's per-process utilization is: on (read every `every` s, last `age` s
    ago), off (the app asked for none), or unsupported (the driver or GPU does not give it)."""

    state: str = "unsupported"
    every: float | None = None
    age: float | None = None

    @classmethod
    def from_wire(cls, d: Any) -> ProcUtilState:
        return cls(**read_fields(d, _PROC_UTIL)) if isinstance(d, dict) else cls()


_PROC_UTIL = wire_fields(
    ProcUtilState, state=lambda value: value if value in ("on", "off", "unsupported") else "unsupported"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Proc(ProcessFacts):
    """One process that uses or holds a GPU, as classified by the probe (docs/ARCHITECTURE.md); its
    name, command, owner, state and parent are ProcessFacts'."""

    pid: int
    start_time: int | None
    kind: str
    pgid: int | None = None
    sid: int | None = None
    cpu_percent: float | None = None
    rss: int | None = None
    elapsed: float | None = None
    holds: tuple[str, ...] = ()
    gpu_memory: dict[int, int | None] = field(default_factory=dict, hash=False, compare=False)
    gpus: Indexes = ()
    reason: str | None = None
    links: Pids = ()
    protected: str | None = None
    nspid: int | None = None
    container: str | None = None
    gpu_util: dict[int, GpuShare] | None = field(default=None, hash=False, compare=False)
    mig: tuple[MigPlace, ...] = ()  # the MIG instances it runs in (GPUs in MIG mode only)
    mps: str | None = None  # its part in CUDA MPS: one of MPS_ROLES, or None
    job: str | None = None  # the id of the job it belongs to (Sample.jobs), None for none

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Proc | None:
        """None for a record without a usable PID (it cannot be shown or targeted)."""
        pid = as_pid(d.get("pid"))
        return None if pid is None else cls(pid=pid, **read_fields(d, _PROC))

    def mig_on(self, gpu: int) -> tuple[MigPlace, ...]:
        """The MIG instances it runs in on GPU `gpu` (none outside MIG mode)."""
        return tuple(p for p in self.mig if p.gpu == gpu)

    @property
    def key(self) -> tuple[int, int | None]:
        """A process's identity: a PID alone can be reused."""
        return (self.pid, self.start_time)

    @property
    def is_holder(self) -> bool:
        """What keeps a GPU or a MIG instance from ready (gputui wait) and an instance from clean: a
        user, ghost or hidden process that is not protected (a monitor, a zombie: never)."""
        return self.kind in ("user", "ghost", "hidden") and not self.protected

    def sm_util(self, gpu: int | None = None) -> int | None:
        """SM utilization on `gpu`, or the highest over its GPUs (None: not read)."""
        if self.gpu_util is None:
            return None
        if gpu is not None:
            share = self.gpu_util.get(gpu)
            return share.sm if share is not None else None
        values = [s.sm for s in self.gpu_util.values() if s.sm is not None]
        return max(values) if values else None

    @property
    def gpu_bytes(self) -> int:
        return sum(b or 0 for b in self.gpu_memory.values())


_PROC = wire_fields(
    Proc,
    skip=("pid",),
    kind=lambda value: value if value in KINDS else "hidden",
    nspid=as_pid,
    gpu_util=_shares,
    mig=mig_places,
    mps=lambda value: value if value in MPS_ROLES else None,
    job=as_job_id,
)
# Each field a process record carries, with what reads it (gputui/fleet/deltas.py, likewise).
PROC_WIRE = _PROC


@dataclass(frozen=True, slots=True, kw_only=True)
class Parent(ProcessFacts):
    """A parent of the sample's processes that is not one of them (a launcher, a shell, the sim's
    session): the sample's `parents`, so the tree view can show a family as one. Its PID and start
    time, and what ProcessFacts say of every process."""

    pid: int
    start_time: int | None = None

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Parent | None:
        pid = as_pid(d.get("pid"))
        return None if pid is None else cls(pid=pid, **read_fields(d, _PARENT))

    @property
    def key(self) -> tuple[int, int | None]:
        return (self.pid, self.start_time)


_PARENT = wire_fields(Parent, skip=("pid",))


def _gpus(value: Any) -> tuple[tuple[Gpu, ...], int, list[str]]:
    """A sample's GPU records; how many were refused, and why, in words. A record without a usable
    index cannot be shown or targeted. Two records with one index cannot both be that GPU, and which
    one is cannot be told: both are refused (a plan or a wait built on either would be a guess), and
    the GPU is missing from the sample until the probe lists it once."""
    parsed: list[Gpu] = []
    refused: list[str] = []
    for number, record in enumerate(as_list(value)[:MAX_GPUS], start=1):
        gpu = Gpu.from_wire(record) if isinstance(record, dict) else None
        if gpu is None:
            refused.append(f"GPU record #{number}: no usable index")
        else:
            parsed.append(gpu)
    kept, repeated = listed_once(parsed, _gpu_index)
    if not repeated:
        return kept, len(refused), refused
    refused += [f"GPU {index}: listed {n} times" for index, n in sorted(repeated.items())]
    return kept, len(as_list(value)[:MAX_GPUS]) - len(kept), refused


def _gpu_index(gpu: Gpu) -> int:
    return gpu.index


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample of a host: its GPUs and the processes that use or hold them."""

    seq: int
    time: float
    gpus: tuple[Gpu, ...]
    processes: tuple[Proc, ...]
    scan_age: float | None = None
    scan_unreadable: int = 0
    # Taken after a full holder scan: what a kill plan must be built from. A sample that does not
    # say so is an incremental one (the safe reading).
    full_scan: bool = False
    omitted: int = 0  # process records left out (by the probe's bound, or this one)
    host: HostMetrics | None = None  # the host's CPU, load, RAM, swap, uptime (None: an older probe)
    proc_util: ProcUtilState = field(default_factory=ProcUtilState, hash=False, compare=False)
    # The processes' parents that are not among them (a launcher, a shell): what joins a family.
    parents: tuple[Parent, ...] = field(default=(), compare=False)
    # GPU records refused (no usable index, an index listed twice): how many, and why (the first few).
    gpus_refused: int = 0
    gpus_refused_why: tuple[str, ...] = ()
    # The jobs the GPU processes belong to (docs/PROTOCOL.md "Jobs"), and how many the probe left out.
    jobs: tuple[Job, ...] = field(default=(), compare=False)
    jobs_omitted: int = 0

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Sample:
        scan = as_dict(d.get("scan"))
        gpus, refused_count, refused = _gpus(d.get("gpus"))
        raw = as_list(d.get("processes"))
        return cls(
            seq=as_total(d.get("seq")),
            time=as_measure(d.get("time")) or 0.0,
            gpus=gpus,
            gpus_refused=refused_count,
            gpus_refused_why=tuple(refused[:MAX_REFUSED_WHY]),
            processes=records(raw, Proc.from_wire, MAX_PROCESSES),
            scan_age=as_measure(scan.get("age")),
            scan_unreadable=as_total(scan.get("unreadable")),
            full_scan=scan.get("full") is True,
            omitted=max(0, len(raw) - MAX_PROCESSES) + as_total(d.get("processes_omitted")),
            host=HostMetrics.from_wire(d.get("host")),
            parents=records(d.get("parents"), Parent.from_wire, MAX_PARENTS),
            proc_util=ProcUtilState.from_wire(d.get("proc_util")),
            jobs=sample_jobs(d.get("jobs")),
            jobs_omitted=max(0, len(as_list(d.get("jobs"))) - MAX_JOBS) + as_total(d.get("jobs_omitted")),
        )

    def gpu(self, index: int) -> Gpu | None:
        """GPU `index` of this sample, or None."""
        for gpu in self.gpus:
            if gpu.index == index:
                return gpu
        return None

    def job(self, job_id: str) -> Job | None:
        """The job with that id in this sample, or None."""
        return next((j for j in self.jobs if j.id == job_id), None)

    def job_of(self, proc: Proc) -> Job | None:
        """The job `proc` belongs to, when the sample carries it."""
        return self.job(proc.job) if proc.job is not None else None

    def on_gpu(self, index: int) -> list[Proc]:
        """Processes using or attributed to GPU `index`."""
        return [p for p in self.processes if index in p.gpus]

    def in_instance(self, instance: MigPlace) -> list[Proc]:
        """Processes that run in MIG instance `instance` (MigPlace.within), as NVML places them."""
        return [p for p in self.processes if any(m.within(instance) for m in p.mig)]

    def gpu_is_free(self, gpu: Gpu) -> bool:
        """No user, ghost or hidden holder attributed, and memory at its idle baseline."""
        if gpu.error or gpu.memory_used is None:
            return False
        if any(p.kind in ("user", "ghost", "hidden") for p in self.on_gpu(gpu.index)):
            return False
        base = gpu.memory_baseline if gpu.memory_baseline is not None else 0
        return gpu.memory_used <= base + IDLE_SLACK

"""Typed records of what crosses the wire (docs/PROTOCOL.md), as the app sees them.

The probe speaks plain dicts (it must run on Python 3.8 with nothing installed); the app turns each
record into these frozen dataclasses once, at the edge, so the fleet, the kill flow and the UI never
index dicts. A probe is not trusted: every field is checked on its own (type and domain: a NaN, an
infinity, a negative size or a string where a number belongs becomes None), so one bad field costs
that field, never the record or the host. Every string is made printable here (control and
invisible reordering characters escaped: gputui.textsafe), so no output path can pass a host's
escape sequence to the operator's terminal; the raw records are kept apart only for JSON output,
which escapes them itself.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, fields
from typing import Any

from .probe.common import IDLE_SLACK, brief_command
from .probe.jobs import BOUNDARIES, MAX_JOB_PROCESSES, MAX_JOBS, MAX_MEMBERS
from .probe.wire import HOST_LIMITS, MAX_PROCESSES
from .textsafe import printable

__all__ = [
    "IDLE_SLACK",
    "KINDS",
    "Ancestor",
    "DeviceFd",
    "Event",
    "Gpu",
    "GpuVerdict",
    "HostFacts",
    "HostMetrics",
    "Job",
    "MemoryAccount",
    "MigInstance",
    "MigPlace",
    "Parent",
    "PlanVerdict",
    "Preflight",
    "Proc",
    "ProcDetail",
    "ProcessVerdict",
    "Restart",
    "Sample",
    "brief_command",
    "done_event",
]

KINDS = ("user", "ghost", "hidden", "monitor", "zombie")
MPS_ROLES = ("server", "control", "client")  # a process's part in CUDA MPS (Proc.mps)
MAX_INSTANCE = 0xFFFFFFFE  # MIG instance ids are 32-bit; 0xFFFFFFFF is the driver's "none"
MAX_MIG = 64  # MIG instances taken per GPU (an H200 has at most 7) and placements per process
MAX_BYTES = 1 << 60  # sizes above this (an exbibyte) are nonsense from a broken or hostile probe
MAX_PID = 1 << 22  # Linux's PID_MAX_LIMIT
LADDER_MAX = 12  # steps of a reset ladder shown (the probe has four)
MAX_PARENTS = 256  # parents taken from one sample (the probe sends at most 64)
MAX_GPUS = 4096  # GPU records taken from one sample
MAX_REFUSED_WHY = 8  # refused GPU records described (the rest are counted)
MAX_JOB_ID = 64  # characters of a job id (the probe sends the root's PID)
MAX_RESTARTS = 64  # parents a verdict may warn about (the probe sends at most 16)


# -- one field at a time -----------------------------------------------------------------------


def _int(value: Any, low: int | None = None, high: int | None = None) -> int | None:
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    if (low is not None and value < low) or (high is not None and value > high):
        return None
    return value


def _count(value: Any) -> int | None:
    """A whole number >= 0 (a size, an index, a start time)."""
    return _int(value, 0, MAX_BYTES)


def _pid(value: Any) -> int | None:
    return _int(value, 1, MAX_PID)


def _percent(value: Any) -> int | None:
    return _int(value, 0, 100)


def _float(value: Any, low: float | None = None) -> float | None:
    """A finite number (NaN and the infinities are refused), at least `low` when given."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return None
    if not math.isfinite(number) or (low is not None and number < low):
        return None
    return number


def _str(value: Any) -> str | None:
    return printable(value) if isinstance(value, str) else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# The helpers for lists and maps return at once for what most records carry: nothing (a sample's
# 1,000 process records are parsed on the app's event loop, field by field).


def _pids(value: Any) -> tuple[int, ...]:
    if not value or not isinstance(value, list):
        return ()
    return tuple(p for p in map(_pid, value) if p is not None)


def _indexes(value: Any) -> tuple[int, ...]:
    if not value or not isinstance(value, list):
        return ()
    return tuple(i for i in map(_count, value) if i is not None)


def _strs(value: Any) -> tuple[str, ...]:
    if not value or not isinstance(value, list):
        return ()
    return tuple(printable(v) for v in value if isinstance(v, str))


def _by_index(value: Any) -> dict[int, int | None]:
    """{"0": bytes} as the probe sends per-GPU figures: {0: bytes or None}; bad keys are dropped."""
    out: dict[int, int | None] = {}
    if not value or not isinstance(value, dict):
        return out
    for key, item in value.items():
        if isinstance(key, str) and key.isdecimal() and key.isascii() and len(key) < 6:
            out[int(key)] = _count(item)
    return out


# -- what a probe says about its host, GPUs and processes ------------------------------------------


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
        return cls(**{k: _int(d.get(k), 0, 100) for k in ("sm", "mem", "enc", "dec")})


def _shares(value: Any) -> dict[int, GpuShare] | None:
    """{"0": share} per GPU, or None where the probe did not read it (off, unsupported, not due)."""
    if not isinstance(value, dict):
        return None
    out: dict[int, GpuShare] = {}
    for key, item in list(value.items())[:4096]:
        share = GpuShare.from_wire(item)
        if share is not None and isinstance(key, str) and key.isdecimal() and key.isascii() and len(key) < 6:
            out[int(key)] = share
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
        if not isinstance(d, dict):
            return cls()
        state = d.get("state")
        return cls(
            state=state if state in ("on", "off", "unsupported") else "unsupported",
            every=_float(d.get("every"), 0.0),
            age=_float(d.get("age"), 0.0),
        )


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What a probe's hello says about its host (and why it cannot read GPUs, if it cannot)."""

    hostname: str
    kernel: str | None = None
    driver_version: str | None = None
    nvml_version: str | None = None
    cuda_driver_version: int | None = None
    python: str | None = None
    uid: int | None = None
    in_container: bool = False
    # Whether the probe sees the host's PID namespace (None: an older probe did not say). False:
    # memory nobody here holds is another container's or the host's (`outside`), never orphaned.
    host_pid_namespace: bool | None = None
    probe_version: str | None = None
    probe_pid: int | None = None
    reader: str = "nvml"
    read_only: bool = False
    error_code: str | None = None
    error_message: str | None = None

    @classmethod
    def from_hello(cls, hello: dict[str, Any]) -> HostFacts:
        host = _dict(hello.get("host"))
        err = _dict(hello.get("error"))
        return cls(
            hostname=_str(host.get("hostname")) or "?",
            kernel=_str(host.get("kernel")),
            driver_version=_str(host.get("driver_version")),
            nvml_version=_str(host.get("nvml_version")),
            cuda_driver_version=_count(host.get("cuda_driver_version")),
            python=_str(host.get("python")),
            uid=_count(host.get("uid")),
            in_container=host.get("in_container") is True,
            host_pid_namespace=_bool(host.get("host_pid_namespace")),
            probe_version=_str(hello.get("probe_version")),
            probe_pid=_pid(hello.get("pid")),
            reader=_str(hello.get("reader")) or "nvml",
            # Anything but an explicit false keeps a probe read-only: refusing is the safe reading.
            read_only=hello.get("read_only") is not False,
            error_code=_str(err.get("code")),
            error_message=_str(err.get("message")),
        )


@dataclass(frozen=True, slots=True)
class MemoryAccount:
    """Where a GPU's used memory went (gputui/probe/accounting.py): bytes per part."""

    baseline: int = 0
    processes: int = 0
    ghost: int = 0
    container: int = 0
    unreported: int = 0
    hidden: int = 0
    orphaned: int = 0  # nothing holds it, seen from the host's PID namespace: only a reset frees it
    outside: int = 0  # the same seen from inside a container: another container's or the host's
    unknown: int = 0
    ghosts: tuple[int, ...] = ()
    suspects: tuple[int, ...] = ()
    containers: tuple[str, ...] = ()

    UNACCOUNTED = ("ghost", "container", "unreported", "hidden", "orphaned", "outside", "unknown")

    @property
    def unaccounted(self) -> int:
        return sum(getattr(self, part) for part in self.UNACCOUNTED)

    def parts(self) -> list[tuple[str, int]]:
        """(part, bytes) of every non-empty part, in the order a bar shows them."""
        names = ("baseline", "processes", *self.UNACCOUNTED)
        return [(name, getattr(self, name)) for name in names if getattr(self, name)]

    @classmethod
    def from_wire(cls, d: Any) -> MemoryAccount | None:
        if not isinstance(d, dict):
            return None
        sizes = {k: _count(d.get(k)) or 0 for k in ("baseline", "processes", *cls.UNACCOUNTED)}
        return cls(
            **sizes,
            ghosts=_pids(d.get("ghosts")),
            suspects=_pids(d.get("suspects")),
            containers=_strs(d.get("containers")),
        )


@dataclass(frozen=True, slots=True)
class Preflight:
    """A GPU's state beyond the sample, read at a lower rate (docs/PROTOCOL.md "preflight"): what a
    benchmark log should say the GPUs were in. None where the GPU or driver does not support it."""

    persistence: bool | None = None
    compute_mode: str | None = None
    mig: bool | None = None  # MIG mode enabled now
    mig_pending: bool | None = None
    sm_clock: int | None = None  # MHz
    sm_clock_max: int | None = None
    mem_clock: int | None = None
    mem_clock_max: int | None = None
    sm_app_clock: int | None = None
    sm_app_clock_default: int | None = None
    mem_app_clock: int | None = None
    mem_app_clock_default: int | None = None
    power_limit: float | None = None  # W
    power_default: float | None = None
    throttle: tuple[str, ...] | None = None  # active clock-event reasons, idle excluded
    fan: int | None = None  # percent
    ecc_corrected: int | None = None  # volatile counts
    ecc_uncorrected: int | None = None
    retired_pending: bool | None = None
    remap_pending: bool | None = None
    remap_failed: bool | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    display_active: bool | None = None
    nvlink_peers: tuple[str, ...] | None = None  # PCI bus ids of the GPUs linked to this one

    FIELDS_NUMBERS = (
        "sm_clock", "sm_clock_max", "mem_clock", "mem_clock_max", "sm_app_clock", "sm_app_clock_default",
        "mem_app_clock", "mem_app_clock_default", "fan", "ecc_corrected", "ecc_uncorrected", "pcie_gen",
        "pcie_gen_max", "pcie_width", "pcie_width_max",
    )  # fmt: skip
    FIELDS_FLAGS = ("persistence", "mig", "mig_pending", "retired_pending", "remap_pending", "remap_failed",
                    "display_active")  # fmt: skip

    @classmethod
    def from_wire(cls, d: Any) -> Preflight | None:
        if not isinstance(d, dict):
            return None
        values: dict[str, Any] = {k: _count(d.get(k)) for k in cls.FIELDS_NUMBERS}
        values.update({k: _bool(d.get(k)) for k in cls.FIELDS_FLAGS})
        throttle = d.get("throttle")
        peers = d.get("nvlink_peers")
        return cls(
            **values,
            compute_mode=_str(d.get("compute_mode")),
            power_limit=_float(d.get("power_limit"), 0.0),
            power_default=_float(d.get("power_default"), 0.0),
            throttle=_strs(throttle) if isinstance(throttle, list) else None,
            nvlink_peers=_strs(peers) if isinstance(peers, list) else None,
        )

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            out[item.name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True, slots=True)
class MigInstance:
    """One MIG instance of a GPU in MIG mode: GPU instance `gi`, compute instance `ci` (None where
    the driver did not say), its UUID, profile name and memory (the GPU instance's)."""

    gi: int
    ci: int | None = None
    uuid: str | None = None
    name: str | None = None
    memory_total: int | None = None
    memory_used: int | None = None

    @property
    def label(self) -> str:
        """`1.0`: GPU instance 1, compute instance 0 (`1.?` when the compute instance is unknown)."""
        return f"{self.gi}.{self.ci if self.ci is not None else '?'}"

    @classmethod
    def from_wire(cls, d: Any) -> MigInstance | None:
        if not isinstance(d, dict):
            return None
        gi = _int(d.get("gi"), 0, MAX_INSTANCE)
        if gi is None:
            return None
        return cls(
            gi=gi,
            ci=_int(d.get("ci"), 0, MAX_INSTANCE),
            uuid=_str(d.get("uuid")),
            name=_str(d.get("name")),
            memory_total=_count(d.get("memory_total")),
            memory_used=_count(d.get("memory_used")),
        )


@dataclass(frozen=True, slots=True)
class MigPlace:
    """Where a process runs on a GPU in MIG mode: GPU `gpu`, GPU instance `gi`, compute instance `ci`."""

    gpu: int
    gi: int
    ci: int | None = None

    @property
    def label(self) -> str:
        """`0:1.0`: GPU 0, GPU instance 1, compute instance 0."""
        return f"{self.gpu}:{self.gi}.{self.ci if self.ci is not None else '?'}"

    @classmethod
    def from_wire(cls, d: Any) -> MigPlace | None:
        if not isinstance(d, dict):
            return None
        gpu, gi = _int(d.get("gpu"), 0, 4095), _int(d.get("gi"), 0, MAX_INSTANCE)
        if gpu is None or gi is None:
            return None
        return cls(gpu=gpu, gi=gi, ci=_int(d.get("ci"), 0, MAX_INSTANCE))


def _mig_instances(value: Any) -> tuple[MigInstance, ...] | None:
    """A GPU's MIG instances; None where the probe says MIG is off or unknown (not a list)."""
    if not isinstance(value, list):
        return None
    items = (MigInstance.from_wire(v) for v in value[:MAX_MIG])
    return tuple(i for i in items if i is not None)


def _mig_places(value: Any) -> tuple[MigPlace, ...]:
    if not value or not isinstance(value, list):
        return ()
    items = (MigPlace.from_wire(v) for v in value[:MAX_MIG])
    return tuple(dict.fromkeys(p for p in items if p is not None))


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU in a sample: memory, utilization, temperature, power; its accounting and, now and then, its preflight reading."""

    index: int
    uuid: str | None = None
    name: str | None = None
    minor: int | None = None
    pci_bus_id: str | None = None  # `00000000:18:00.0`: the label dcgm-exporter and nvidia-smi use
    memory_total: int | None = None
    memory_used: int | None = None
    memory_reserved: int | None = None
    memory_baseline: int | None = None
    util_gpu: int | None = None
    util_mem: int | None = None
    temperature: int | None = None
    power_draw: float | None = None
    power_limit: float | None = None
    persistence: bool | None = None
    error: str | None = None
    accounting: MemoryAccount | None = field(default=None, compare=False)
    preflight: Preflight | None = field(default=None, compare=False)  # in the sample only now and then
    # In MIG mode, its instances (maybe none); None where MIG is off or the probe cannot tell.
    mig_instances: tuple[MigInstance, ...] | None = None

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Gpu | None:
        """None for a record without a usable index (it cannot be shown or targeted)."""
        index = _int(d.get("index"), 0, 4095)
        if index is None:
            return None
        return cls(
            index=index,
            uuid=_str(d.get("uuid")),
            name=_str(d.get("name")),
            minor=_count(d.get("minor")),
            pci_bus_id=_str(d.get("pci_bus_id")),
            memory_total=_count(d.get("memory_total")),
            memory_used=_count(d.get("memory_used")),
            memory_reserved=_count(d.get("memory_reserved")),
            memory_baseline=_count(d.get("memory_baseline")),
            util_gpu=_percent(d.get("util_gpu")),
            util_mem=_percent(d.get("util_mem")),
            temperature=_int(d.get("temperature"), -100, 300),
            power_draw=_float(d.get("power_draw"), 0.0),
            power_limit=_float(d.get("power_limit"), 0.0),
            persistence=_bool(d.get("persistence")),
            error=_str(d.get("error")),
            accounting=MemoryAccount.from_wire(d.get("accounting")),
            preflight=Preflight.from_wire(d.get("preflight")),
            mig_instances=_mig_instances(d.get("mig_instances")),
        )

    @property
    def memory_fraction(self) -> float | None:
        if not self.memory_total or self.memory_used is None:
            return None
        return min(1.0, self.memory_used / self.memory_total)


def _who_fields(d: dict[str, Any]) -> dict[str, Any]:
    """What every process record says of its process (a sample's process, a parent, a job's root,
    a `detail` answer): its name, command, user, state and parent, parsed once."""
    return {
        "name": _str(d.get("name")),
        "command": _strs(d.get("command")),
        "user": _str(d.get("user")),
        "uid": _count(d.get("uid")),
        "state": _str(d.get("state")),
        "ppid": _count(d.get("ppid")),
    }


def _process_fields(d: dict[str, Any]) -> dict[str, Any]:
    """What a sample's process record and a `detail` answer say alike of a process, parsed once."""
    return {
        "start_time": _count(d.get("start_time")),
        **_who_fields(d),
        "pgid": _count(d.get("pgid")),
        "sid": _count(d.get("sid")),
        "rss": _count(d.get("rss")),
        "elapsed": _float(d.get("elapsed"), 0.0),
        "container": _str(d.get("container")),
    }


@dataclass(frozen=True, slots=True)
class Proc:
    """One process that uses or holds a GPU, as classified by the probe (docs/ARCHITECTURE.md)."""

    pid: int
    start_time: int | None
    kind: str
    name: str | None = None
    command: tuple[str, ...] = ()
    user: str | None = None
    uid: int | None = None
    state: str | None = None
    ppid: int | None = None
    pgid: int | None = None
    sid: int | None = None
    cpu_percent: float | None = None
    rss: int | None = None
    elapsed: float | None = None
    holds: tuple[str, ...] = ()
    gpu_memory: dict[int, int | None] = field(default_factory=dict, hash=False, compare=False)
    gpus: tuple[int, ...] = ()
    reason: str | None = None
    links: tuple[int, ...] = ()
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
        pid = _pid(d.get("pid"))
        if pid is None:
            return None
        kind = d.get("kind")
        return cls(
            pid=pid,
            **_process_fields(d),
            kind=kind if kind in KINDS else "hidden",
            cpu_percent=_float(d.get("cpu_percent"), 0.0),
            holds=_strs(d.get("holds")),
            gpu_memory=_by_index(d.get("gpu_memory")),
            gpus=_indexes(d.get("gpus")),
            reason=_str(d.get("reason")),
            links=_pids(d.get("links")),
            protected=_str(d.get("protected")),
            nspid=_pid(d.get("nspid")),
            gpu_util=_shares(d.get("gpu_util")),
            mig=_mig_places(d.get("mig")),
            mps=d.get("mps") if d.get("mps") in MPS_ROLES else None,
            job=_job_id(d.get("job")),
        )

    def mig_on(self, gpu: int) -> tuple[MigPlace, ...]:
        """The MIG instances it runs in on GPU `gpu` (none outside MIG mode)."""
        return tuple(p for p in self.mig if p.gpu == gpu)

    @property
    def key(self) -> tuple[int, int | None]:
        """A process's identity: a PID alone can be reused."""
        return (self.pid, self.start_time)

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

    @property
    def command_line(self) -> str:
        """The command as people say it: `python train.py`, long paths cut to `.../name`."""
        return brief_command(list(self.command)) if self.command else (f"[{self.name}]" if self.name else "-")


def _job_id(value: Any) -> str | None:
    """A job id as the probe sends it (the root's PID, as a string): 1 to MAX_JOB_ID printable
    characters without spaces; anything else is no id."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_JOB_ID:
        return None
    if not value.isprintable() or any(c.isspace() for c in value):
        return None
    return value


def _job_processes(value: Any) -> tuple[tuple[int, int | None], ...]:
    """A job's `processes`: [pid, start_time] pairs, at most MAX_JOB_PROCESSES; bad pairs dropped."""
    out: list[tuple[int, int | None]] = []
    for item in _list(value)[:MAX_JOB_PROCESSES]:
        if isinstance(item, list) and len(item) == 2:
            pid = _pid(item[0])
            if pid is not None:
                out.append((pid, _count(item[1])))
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True, slots=True)
class Job:
    """The work a set of GPU processes belongs to (docs/PROTOCOL.md "Jobs"): its root (a launcher,
    a supervisor, a service's main process, the process itself), its members (the GPU processes
    below the root), their GPUs and memory, and where known its Slurm job, container and unit.

    `id` is what people type (`clean --job ID`): the root's PID as a string. `processes`: (pid,
    start time) of the root, the members and the processes between them, parents first."""

    id: str
    root: int
    root_start: int | None = None
    name: str | None = None
    command: tuple[str, ...] = ()
    user: str | None = None
    uid: int | None = None
    state: str | None = None
    ppid: int | None = None
    boundary: str | None = None  # container, slurm, unit, init, shell, limit
    members: tuple[int, ...] = ()
    processes: tuple[tuple[int, int | None], ...] = ()
    gpus: tuple[int, ...] = ()
    memory: int | None = None
    slurm_job: str | None = None
    container: str | None = None
    unit: str | None = None

    @classmethod
    def from_wire(cls, d: Any) -> Job | None:
        """None for a record without a usable id and root (it cannot be named or stopped)."""
        if not isinstance(d, dict):
            return None
        job_id, root = _job_id(d.get("id")), _pid(d.get("root"))
        if job_id is None or root is None:
            return None
        boundary = d.get("boundary")
        return cls(
            id=job_id,
            root=root,
            root_start=_count(d.get("root_start")),
            **_who_fields(d),
            boundary=boundary if boundary in BOUNDARIES else None,
            members=tuple(dict.fromkeys(_pids(_list(d.get("members"))[:MAX_MEMBERS]))),
            processes=_job_processes(d.get("processes")),
            gpus=tuple(sorted(set(_indexes(_list(d.get("gpus"))[:MAX_GPUS])))),
            memory=_count(d.get("memory")),
            slurm_job=_str(d.get("slurm_job")),
            container=_str(d.get("container")),
            unit=_str(d.get("unit")),
        )

    @property
    def key(self) -> tuple[int, int | None]:
        """The root's identity: a PID alone can be reused."""
        return (self.root, self.root_start)

    @property
    def command_line(self) -> str:
        """The root's command as people say it (`torchrun --nproc-per-node 2 train.py`)."""
        return brief_command(list(self.command)) if self.command else (f"[{self.name}]" if self.name else "-")

    @property
    def where(self) -> str:
        """`slurm 4711`, `container lxc/129`, `unit vllm.service`, joined by `, `; empty for none."""
        parts = [f"slurm {self.slurm_job}" if self.slurm_job else ""]
        parts += [f"container {self.container}" if self.container else ""]
        parts += [f"unit {self.unit}" if self.unit else ""]
        return ", ".join(p for p in parts if p)

    def describe(self) -> dict[str, Any]:
        """Plain JSON types (`snapshot --json`, tests)."""
        return {
            "id": self.id,
            "root": self.root,
            "root_start": self.root_start,
            "name": self.name,
            "command": list(self.command),
            "user": self.user,
            "uid": self.uid,
            "state": self.state,
            "ppid": self.ppid,
            "boundary": self.boundary,
            "members": list(self.members),
            "processes": [list(p) for p in self.processes],
            "gpus": list(self.gpus),
            "memory": self.memory,
            "slurm_job": self.slurm_job,
            "container": self.container,
            "unit": self.unit,
        }


def _jobs(value: Any) -> tuple[Job, ...]:
    """A sample's jobs, at most MAX_JOBS; a record without a usable id or root is dropped, and so is
    a second one with an id already taken (which of the two is meant cannot be told)."""
    parsed = [Job.from_wire(item) for item in _list(value)[:MAX_JOBS]]
    times: dict[str, int] = {}
    for job in parsed:
        if job is not None:
            times[job.id] = times.get(job.id, 0) + 1
    return tuple(j for j in parsed if j is not None and times[j.id] == 1)


@dataclass(frozen=True, slots=True)
class Parent:
    """A parent of the sample's processes that is not one of them (a launcher, a shell, the sim's
    session): the sample's `parents`, so the tree view can show a family as one."""

    pid: int
    start_time: int | None = None
    ppid: int | None = None
    name: str | None = None
    command: tuple[str, ...] = ()
    user: str | None = None
    uid: int | None = None
    state: str | None = None

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Parent | None:
        pid = _pid(d.get("pid"))
        if pid is None:
            return None
        return cls(
            pid=pid,
            start_time=_count(d.get("start_time")),
            **_who_fields(d),
        )

    @property
    def key(self) -> tuple[int, int | None]:
        return (self.pid, self.start_time)


@dataclass(frozen=True, slots=True)
class HostMetrics:
    """The host's own load in a sample (docs/PROTOCOL.md `sample.host`); None where not known.

    Each field is taken only within gputui.probe.wire.HOST_LIMITS (the probe's bounds too), and a
    used figure only when it is at most its total."""

    cpu_percent: float | None = None  # busy share of all CPUs, 0-100
    cpus: int | None = None
    load1: float | None = None  # load averages over 1, 5 and 15 minutes
    load5: float | None = None
    load15: float | None = None
    memory_total: int | None = None  # bytes
    memory_used: int | None = None
    swap_total: int | None = None
    swap_used: int | None = None
    uptime: float | None = None  # seconds

    @classmethod
    def from_wire(cls, d: Any) -> HostMetrics | None:
        if not isinstance(d, dict):
            return None
        values: dict[str, Any] = {}
        for name, (low, high, kind) in HOST_LIMITS.items():
            value = d.get(name)
            number = _int(value, low, high) if kind is int else _float(value, low)
            values[name] = number if number is None or number <= high else None
        for used, total in (("memory_used", "memory_total"), ("swap_used", "swap_total")):
            if values[used] is not None and (values[total] is None or values[used] > values[total]):
                values[used] = None
        return cls(**values)


def _gpus(value: Any) -> tuple[tuple[Gpu, ...], int, list[str]]:
    """A sample's GPU records; how many were refused, and why, in words. A record without a usable
    index cannot be shown or targeted. Two records with one index cannot both be that GPU, and which
    one is cannot be told: both are refused (a plan or a wait built on either would be a guess), and
    the GPU is missing from the sample until the probe lists it once."""
    parsed: list[Gpu] = []
    refused: list[str] = []
    for number, record in enumerate(_list(value)[:MAX_GPUS], start=1):
        gpu = Gpu.from_wire(record) if isinstance(record, dict) else None
        if gpu is None:
            refused.append(f"GPU record #{number}: no usable index")
        else:
            parsed.append(gpu)
    times: dict[int, int] = {}
    for gpu in parsed:
        times[gpu.index] = times.get(gpu.index, 0) + 1
    if len(times) == len(parsed):
        return tuple(parsed), len(refused), refused
    refused += [f"GPU {index}: listed {n} times" for index, n in sorted(times.items()) if n > 1]
    kept = tuple(g for g in parsed if times[g.index] == 1)
    return kept, len(_list(value)[:MAX_GPUS]) - len(kept), refused


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
    cost_ms: dict[str, float] = field(default_factory=dict, hash=False, compare=False)
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
        scan = _dict(d.get("scan"))
        cost = _dict(d.get("cost_ms"))
        gpus, refused_count, refused = _gpus(d.get("gpus"))
        raw = _list(d.get("processes"))
        procs = (Proc.from_wire(p) for p in raw[:MAX_PROCESSES] if isinstance(p, dict))
        costs = {k: _float(v, 0.0) for k, v in cost.items()}
        return cls(
            seq=_count(d.get("seq")) or 0,
            time=_float(d.get("time"), 0.0) or 0.0,
            gpus=gpus,
            gpus_refused=refused_count,
            gpus_refused_why=tuple(refused[:MAX_REFUSED_WHY]),
            processes=tuple(p for p in procs if p is not None),
            scan_age=_float(scan.get("age"), 0.0),
            scan_unreadable=_count(scan.get("unreadable")) or 0,
            full_scan=scan.get("full") is True,
            omitted=max(0, len(raw) - MAX_PROCESSES) + (_count(d.get("processes_omitted")) or 0),
            host=HostMetrics.from_wire(d.get("host")),
            cost_ms={k: v for k, v in costs.items() if v is not None},
            parents=tuple(
                p
                for p in (
                    Parent.from_wire(x) for x in _list(d.get("parents"))[:MAX_PARENTS] if isinstance(x, dict)
                )
                if p is not None
            ),
            proc_util=ProcUtilState.from_wire(d.get("proc_util")),
            jobs=_jobs(d.get("jobs")),
            jobs_omitted=max(0, len(_list(d.get("jobs"))) - MAX_JOBS) + (_count(d.get("jobs_omitted")) or 0),
        )

    def job(self, job_id: str) -> Job | None:
        """The job with that id in this sample, or None."""
        return next((j for j in self.jobs if j.id == job_id), None)

    def job_of(self, proc: Proc) -> Job | None:
        """The job `proc` belongs to, when the sample carries it."""
        return self.job(proc.job) if proc.job is not None else None

    def on_gpu(self, index: int) -> list[Proc]:
        """Processes using or attributed to GPU `index`."""
        return [p for p in self.processes if index in p.gpus]

    def gpu_is_free(self, gpu: Gpu) -> bool:
        """No user, ghost or hidden holder attributed, and memory at its idle baseline."""
        if gpu.error or gpu.memory_used is None:
            return False
        if any(p.kind in ("user", "ghost", "hidden") for p in self.on_gpu(gpu.index)):
            return False
        base = gpu.memory_baseline if gpu.memory_baseline is not None else 0
        return gpu.memory_used <= base + IDLE_SLACK


# -- one process in full: the answer to a `detail` request ----------------------------------------


@dataclass(frozen=True, slots=True)
class Ancestor:
    """One step of a process's parent chain (nearest first): PID, start time, name."""

    pid: int
    start_time: int | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class DeviceFd:
    """A device file a process holds, by its file descriptor number."""

    fd: int
    path: str


@dataclass(frozen=True, slots=True)
class EnvVar:
    """One variable of a process's environment, made printable. `value` None: the name looks like a
    secret's and the probe kept the value back (it is sent only when asked: `s` in the view)."""

    name: str
    value: str | None
    secret: bool = False


DETAIL_RESULTS = ("ok", "exited", "pid-reused", "refused")
MAX_ENVIRON = 1024  # variables taken from one answer (the probe sends at most 512)


@dataclass(frozen=True, slots=True)
class ProcDetail:
    """One process in full, read from /proc by its host's probe when asked (docs/PROTOCOL.md
    "detail"). `result`: ok, or why there is nothing to describe: exited, pid-reused (the PID is
    another process's now), refused (the request was malformed). Fields the probe could not read
    are None, with the reason in `unreadable` (e.g. {"cwd": "permission denied"})."""

    pid: int
    start_time: int | None
    result: str
    message: str | None = None
    name: str | None = None
    command: tuple[str, ...] = ()
    cwd: str | None = None
    exe: str | None = None
    user: str | None = None
    uid: int | None = None
    state: str | None = None
    ppid: int | None = None
    pgid: int | None = None
    sid: int | None = None
    threads: int | None = None
    started: float | None = None  # wall time (the host's clock)
    elapsed: float | None = None
    cpu_time: float | None = None  # seconds of CPU, user and system
    rss: int | None = None
    nspid: tuple[int, ...] = ()
    cgroup: tuple[str, ...] = ()
    container: str | None = None
    fds: tuple[DeviceFd, ...] = ()
    fds_more: int = 0
    fd_count: int | None = None
    parents: tuple[Ancestor, ...] = ()
    parents_end: str | None = None  # init, probe, gone, none, limit
    unreadable: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    # The environment, when asked for (None: not read; why in `unreadable["environ"]` if refused);
    # `environ_more`: variables left out; `environ_cut`: the probe read only the first 64 KiB.
    environ: tuple[EnvVar, ...] | None = None
    environ_more: int = 0
    environ_cut: bool = False

    @property
    def ok(self) -> bool:
        return self.result == "ok"

    @property
    def gone(self) -> bool:
        """It has exited, or its PID belongs to another process now."""
        return self.result in ("exited", "pid-reused")

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> ProcDetail | None:
        """None for a record without a usable PID."""
        pid = _pid(d.get("pid"))
        if pid is None:
            return None
        result = d.get("result")
        fds = []
        for item in _list(d.get("fds"))[:1024]:
            fd = _count(_dict(item).get("fd"))
            path = _str(_dict(item).get("path"))
            if fd is not None and path is not None:
                fds.append(DeviceFd(fd, path))
        parents = []
        for item in _list(d.get("parents"))[:256]:
            parent = _pid(_dict(item).get("pid"))
            if parent is not None:
                parents.append(Ancestor(parent, _count(item.get("start_time")), _str(item.get("name"))))
        unreadable = {
            printable(k): printable(v)
            for k, v in list(_dict(d.get("unreadable")).items())[:32]
            if isinstance(k, str) and isinstance(v, str)
        }
        return cls(
            pid=pid,
            **_process_fields(d),
            result=result if result in DETAIL_RESULTS else "refused",
            message=_str(d.get("message")),
            cwd=_str(d.get("cwd")),
            exe=_str(d.get("exe")),
            threads=_int(d.get("threads"), 0, MAX_PID),
            started=_float(d.get("started"), 0.0),
            cpu_time=_float(d.get("cpu_time"), 0.0),
            nspid=_pids(d.get("nspid"))[:32],
            cgroup=_strs(d.get("cgroup"))[:64],
            fds=tuple(fds),
            fds_more=_count(d.get("fds_more")) or 0,
            fd_count=_count(d.get("fd_count")),
            parents=tuple(parents),
            parents_end=_str(d.get("parents_end")),
            unreadable=unreadable,
            environ=_environ(d.get("environ")),
            environ_more=_count(d.get("environ_more")) or 0,
            environ_cut=d.get("environ_cut") is True,
        )


def _environ(value: Any) -> tuple[EnvVar, ...] | None:
    """A detail answer's `environ`, field by field: entries without a name are dropped."""
    if not isinstance(value, list):
        return None
    out = []
    for item in value[:MAX_ENVIRON]:
        entry = _dict(item)
        name = _str(entry.get("name"))
        if name is None:
            continue
        out.append(EnvVar(name, _str(entry.get("value")), entry.get("secret") is True))
    return tuple(out)


# -- a running plan: events, and the verdict its `done` event carries ------------------------------


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
        return cls(
            plan=_str(d.get("plan")) or "?",
            time=_float(d.get("time"), 0.0) or 0.0,
            stage=_str(d.get("stage")) or "?",
            result=_str(d.get("result")),
            pid=_pid(d.get("pid")),
            start_time=_count(d.get("start_time")),
            gpu=_count(d.get("gpu")),
            signal=_str(d.get("signal")),
            message=_str(d.get("message")) or "",
            data=_dict(d.get("data")),
        )


def done_event(plan: str, result: str, message: str, error: str | None = None) -> Event:
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
    held_by: tuple[int, ...] = ()  # live processes keeping a GPU the plan cleans from being clean
    protected: tuple[int, ...] = ()  # of those, the protected ones (monitors)
    ghosts: tuple[int, ...] = ()  # dead PIDs NVML still lists
    suspects: tuple[int, ...] = ()  # who may really hold a ghost's memory
    still_listed: tuple[int, ...] = ()  # the plan's own PIDs NVML still lists
    others: tuple[int, ...] = ()  # what else uses the GPU: not in the plan, left alone
    idle_ms: float | None = None
    error: str | None = None
    accounting: MemoryAccount | None = None  # where the memory went, as the verdict saw it

    @property
    def ok(self) -> bool:
        return self.result in ("clean", "released")

    @classmethod
    def from_wire(cls, index: int, d: dict[str, Any]) -> GpuVerdict:
        return cls(
            index=index,
            result=_str(d.get("result")) or "unknown",
            memory_before=_count(d.get("memory_before")),
            memory_after=_count(d.get("memory_after")),
            memory_baseline=_count(d.get("memory_baseline")),
            held_by=_pids(d.get("held_by")),
            protected=_pids(d.get("protected")),
            ghosts=_pids(d.get("ghosts")),
            suspects=_pids(d.get("suspects")),
            still_listed=_pids(d.get("still_listed")),
            others=_pids(d.get("others")),
            idle_ms=_float(d.get("idle_ms"), 0.0),
            error=_str(d.get("error")),
            accounting=MemoryAccount.from_wire(d.get("accounting")),
        )


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
        return brief_command(self.command) or (f"[{self.name}]" if self.name else "?")

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> ProcessVerdict | None:
        pid = _pid(d.get("pid"))
        if pid is None:
            return None
        return cls(
            pid=pid,
            result=_str(d.get("result")) or "unknown",
            start_time=_count(d.get("start_time")),
            why=_str(d.get("why")),
            signals=_strs(d.get("signals")),
            exited_ms=_float(d.get("exited_ms"), 0.0),
            exit_signal=_str(d.get("exit_signal")),
            state=_str(d.get("state")),
            ppid=_count(d.get("ppid")),
            allow=_str(d.get("allow")),
            name=_str(d.get("name")),
            command=_strs(d.get("command")),
            user=_str(d.get("user")),
            origin=_str(d.get("origin")),
            reason=_str(d.get("reason")),
        )


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
    children: tuple[int, ...] = ()  # the plan's stopped processes it was the parent of
    new: tuple[int, ...] = ()  # GPU processes it started since (not in the plan)
    new_gpus: tuple[int, ...] = ()  # the GPUs those use

    @property
    def brief(self) -> str:
        return brief_command(self.command) or (f"[{self.name}]" if self.name else "?")

    @classmethod
    def from_wire(cls, d: Any) -> Restart | None:
        if not isinstance(d, dict):
            return None
        pid = _pid(d.get("pid"))
        if pid is None:
            return None
        return cls(
            pid=pid,
            start_time=_count(d.get("start_time")),
            name=_str(d.get("name")),
            command=_strs(d.get("command")),
            user=_str(d.get("user")),
            children=_pids(_list(d.get("children"))[:MAX_MEMBERS]),
            new=_pids(_list(d.get("new"))[:MAX_MEMBERS]),
            new_gpus=tuple(sorted(set(_indexes(_list(d.get("new_gpus"))[:MAX_GPUS])))),
        )

    def describe(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "start_time": self.start_time,
            "name": self.name,
            "command": list(self.command),
            "user": self.user,
            "children": list(self.children),
            "new": list(self.new),
            "new_gpus": list(self.new_gpus),
        }


# A plan's `done` results: clean / not-clean (it cleans GPUs), stopped / not-stopped (it stops
# processes), signalled / not-signalled (a `signal` plan: one signal, once), reset / not-reset /
# dry-run (a GPU reset), and the app's own: refused, error, outcome-unknown, not-sent.
SUCCESS = ("clean", "stopped", "signalled", "reset", "dry-run")


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
    # never signalled (words.restart_words says it; `clean --pid PARENT` stops them).
    restarts: tuple[Restart, ...] = ()

    @property
    def unknown(self) -> bool:
        return self.result in ("outcome-unknown", "not-sent")

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
            index = _by_index({key: 0})
            if not index or not isinstance(value, dict):
                problems.append(f"a GPU verdict that cannot be read ({type(value).__name__})")
                continue
            gpus.append(GpuVerdict.from_wire(next(iter(index)), value))
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
            scope=_str(data.get("scope")),
            elapsed_ms=_float(data.get("elapsed_ms"), 0.0),
            gpus=tuple(sorted(gpus, key=lambda g: g.index)),
            processes=tuple(processes),
            memory_before=_by_index(data.get("memory_before")),
            memory_after=_by_index(data.get("memory_after")),
            error=_str(data.get("error")),
            method=_str(data.get("method")),
            link_lost=data.get("link_lost") is True,
            problems=tuple(problems),
            blockers=tuple(
                _str(b.get("words")) or "?" for b in _list(data.get("blockers")) if isinstance(b, dict)
            ),
            ladder=_strs(data.get("ladder"))[:LADDER_MAX],
            restarts=tuple(
                r
                for r in (Restart.from_wire(x) for x in _list(data.get("restarts"))[:MAX_RESTARTS])
                if r is not None
            ),
        )

    def describe(self) -> dict[str, Any]:
        """Plain JSON types (for `--json` and tests)."""
        return {
            "result": self.result,
            "ok": self.ok,
            "message": self.message,
            "scope": self.scope,
            "elapsed_ms": self.elapsed_ms,
            "gpus": {
                str(g.index): {
                    "result": g.result,
                    "memory_before": g.memory_before,
                    "memory_after": g.memory_after,
                    "memory_baseline": g.memory_baseline,
                    "held_by": list(g.held_by),
                    "protected": list(g.protected),
                    "ghosts": list(g.ghosts),
                    "suspects": list(g.suspects),
                    "still_listed": list(g.still_listed),
                    "others": list(g.others),
                    "idle_ms": g.idle_ms,
                    "error": g.error,
                }
                for g in self.gpus
            },
            "processes": [
                {
                    "pid": p.pid,
                    "start_time": p.start_time,
                    "result": p.result,
                    "why": p.why,
                    "signals": list(p.signals),
                    "exited_ms": p.exited_ms,
                    "exit_signal": p.exit_signal,
                    "state": p.state,
                    "ppid": p.ppid,
                    "allow": p.allow,
                    "name": p.name,
                    "command": list(p.command),
                    "user": p.user,
                    "origin": p.origin,
                    "reason": p.reason,
                }
                for p in self.processes
            ],
            "memory_before": {str(k): v for k, v in self.memory_before.items()},
            "memory_after": {str(k): v for k, v in self.memory_after.items()},
            "error": self.error,
            "method": self.method,
            "link_lost": self.link_lost,
            "problems": list(self.problems),
            "restarts": [r.describe() for r in self.restarts],
        }

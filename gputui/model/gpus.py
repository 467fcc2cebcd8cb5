"""One GPU as a sample shows it: its memory, utilization, temperature and power; where its used
memory went (MemoryAccount); its state beyond the sample, read now and then (Preflight); and in MIG
mode its instances and where a process runs among them. Separate from the sample, which lists the
GPUs beside its processes, because the verdicts of a plan (gputui.model.events) use the memory
accounts too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice
from typing import Any, ClassVar

from ..probe.accounting import UNACCOUNTED
from ..probe.common import TOPOLOGY_LEVELS
from .decode import (
    MAX_GPUS,
    MAX_INDEX,
    Pids,
    as_int,
    as_percent,
    index_key,
    plain,
    read_fields,
    records,
    wire_fields,
)

MAX_INSTANCE = 0xFFFFFFFE  # MIG instance ids are 32-bit; 0xFFFFFFFF is the driver's "none"
MAX_MIG = 64  # MIG instances taken per GPU (an H200 has at most 7) and placements per process


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
    ghosts: Pids = ()
    suspects: Pids = ()
    containers: tuple[str, ...] = ()

    UNACCOUNTED: ClassVar[tuple[str, ...]] = UNACCOUNTED  # the parts, as the probe's accounting names them

    @property
    def unaccounted(self) -> int:
        return sum(getattr(self, part) for part in self.UNACCOUNTED)

    def parts(self) -> list[tuple[str, int]]:
        """(part, bytes) of every non-empty part, in the order a bar shows them."""
        names = ("baseline", "processes", *self.UNACCOUNTED)
        return [(name, getattr(self, name)) for name in names if getattr(self, name)]

    @classmethod
    def from_wire(cls, d: Any) -> MemoryAccount | None:
        return cls(**read_fields(d, _ACCOUNT)) if isinstance(d, dict) else None


_ACCOUNT = wire_fields(MemoryAccount)


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

    @classmethod
    def from_wire(cls, d: Any) -> Preflight | None:
        return cls(**read_fields(d, _PREFLIGHT)) if isinstance(d, dict) else None

    def describe(self) -> dict[str, Any]:
        return plain(self)


_PREFLIGHT = wire_fields(Preflight)


def mig_label(gi: int, ci: int | None) -> str:
    """`1.0`: GPU instance 1, compute instance 0 (`1.?` when the compute instance is unknown)."""
    return f"{gi}.{ci if ci is not None else '?'}"


def _instance(value: Any) -> int | None:
    return as_int(value, 0, MAX_INSTANCE)


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
        return mig_label(self.gi, self.ci)

    def on(self, gpu: int) -> MigPlace:
        """This instance as a place on GPU `gpu` (what `--gpu MIG-...` names, and a process runs in)."""
        return MigPlace(gpu, self.gi, self.ci)

    @classmethod
    def from_wire(cls, d: Any) -> MigInstance | None:
        gi = _instance(d.get("gi")) if isinstance(d, dict) else None
        return None if gi is None else cls(gi=gi, **read_fields(d, _MIG_INSTANCE))


_MIG_INSTANCE = wire_fields(MigInstance, skip=("gi",), ci=_instance)


@dataclass(frozen=True, slots=True)
class MigPlace:
    """Where a process runs on a GPU in MIG mode: GPU `gpu`, GPU instance `gi`, compute instance `ci`."""

    gpu: int
    gi: int
    ci: int | None = None

    @property
    def label(self) -> str:
        """`0:1.0`: GPU 0, GPU instance 1, compute instance 0."""
        return f"{self.gpu}:{mig_label(self.gi, self.ci)}"

    @property
    def order(self) -> tuple[int, int, int]:
        """Its place in a list: by GPU, GPU instance, then compute instance (an unknown one first)."""
        return (self.gpu, self.gi, -1 if self.ci is None else self.ci)

    def within(self, instance: MigPlace) -> bool:
        """Whether a process placed here may run in `instance`: the same GPU and GPU instance, and the
        same compute instance where both are known (an unknown one may be it, and a GPU instance's
        compute instances share its memory)."""
        same = self.gpu == instance.gpu and self.gi == instance.gi
        return same and (self.ci is None or instance.ci is None or self.ci == instance.ci)

    @classmethod
    def from_wire(cls, d: Any) -> MigPlace | None:
        if not isinstance(d, dict):
            return None
        gpu, gi = as_int(d.get("gpu"), 0, MAX_INDEX), _instance(d.get("gi"))
        if gpu is None or gi is None:
            return None
        return cls(gpu=gpu, gi=gi, ci=_instance(d.get("ci")))


def mig_instances(value: Any) -> tuple[MigInstance, ...] | None:
    """A GPU's MIG instances; None where the probe says MIG is off or unknown (not a list)."""
    return records(value, MigInstance.from_wire, MAX_MIG) if isinstance(value, list) else None


def mig_places(value: Any) -> tuple[MigPlace, ...]:
    """Where a process runs in MIG mode, each place once."""
    if not value or not isinstance(value, list):
        return ()
    return tuple(dict.fromkeys(records(value, MigPlace.from_wire, MAX_MIG)))


# (peer GPU index, how close: one of TOPOLOGY_LEVELS), each peer once, by index.
Topology = tuple[tuple[int, str], ...]


def topology(value: Any) -> Topology | None:
    """A GPU's `topology` ({"1": "nvlink", "2": "node"}): its links to the other GPUs of its host,
    by peer index; None where the probe did not send one (an older probe, a driver that cannot
    tell). A peer that is no index, or a level that is none of TOPOLOGY_LEVELS, is dropped."""
    if not isinstance(value, dict):
        return None
    links: dict[int, str] = {}
    for key, level in islice(value.items(), MAX_GPUS):
        peer = index_key(key)
        if peer is not None and peer <= MAX_INDEX and level in TOPOLOGY_LEVELS:
            links[peer] = level
    return tuple(sorted(links.items()))


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
    # How close each other GPU of the host is (static: read once by the probe); None: not known.
    topology: Topology | None = None
    # The pod the GPU is given to (`NAMESPACE/POD[/CONTAINER]`), where its source maps GPUs to pods
    # (dcgm-exporter's labels, read from Prometheus); None: not known.
    pod: str | None = None

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Gpu | None:
        """None for a record without a usable index (it cannot be shown or targeted)."""
        index = as_int(d.get("index"), 0, MAX_INDEX)
        return None if index is None else cls(index=index, **read_fields(d, _GPU))

    @property
    def memory_fraction(self) -> float | None:
        if not self.memory_total or self.memory_used is None:
            return None
        return min(1.0, self.memory_used / self.memory_total)

    def mig_instance(self, place: MigPlace) -> MigInstance | None:
        """Its MIG instance at `place` (None: it has none there: destroyed, or MIG mode off)."""
        return next((i for i in self.mig_instances or () if i.on(self.index) == place), None)


_GPU = wire_fields(
    Gpu,
    skip=("index",),
    util_gpu=as_percent,
    util_mem=as_percent,
    temperature=lambda value: as_int(value, -100, 300),
    accounting=MemoryAccount.from_wire,
    preflight=Preflight.from_wire,
    mig_instances=mig_instances,
    topology=topology,
)
# Each field a GPU record carries, with what reads it (gputui/fleet/deltas.py: a changed one alone).
GPU_WIRE = _GPU

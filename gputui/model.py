"""Typed records of what crosses the wire (docs/PROTOCOL.md), as the app sees them.

The probe speaks plain dicts (it must run on Python 3.8 with nothing installed); the app turns each
record into these frozen dataclasses once, at the edge, so the fleet and the UI never index dicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .probe.core import IDLE_SLACK
from .probe.reaper import brief_command

KINDS = ("user", "ghost", "hidden", "monitor", "zombie")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class HostFacts:
    hostname: str
    kernel: str | None = None
    driver_version: str | None = None
    nvml_version: str | None = None
    cuda_driver_version: int | None = None
    python: str | None = None
    uid: int | None = None
    in_container: bool = False
    probe_version: str | None = None
    probe_pid: int | None = None
    reader: str = "nvml"
    read_only: bool = False
    error_code: str | None = None
    error_message: str | None = None

    @classmethod
    def from_hello(cls, hello: dict[str, Any]) -> HostFacts:
        host = hello.get("host") or {}
        err = hello.get("error") or {}
        return cls(
            hostname=_str(host.get("hostname")) or "?",
            kernel=_str(host.get("kernel")),
            driver_version=_str(host.get("driver_version")),
            nvml_version=_str(host.get("nvml_version")),
            cuda_driver_version=_int(host.get("cuda_driver_version")),
            python=_str(host.get("python")),
            uid=_int(host.get("uid")),
            in_container=bool(host.get("in_container")),
            probe_version=_str(hello.get("probe_version")),
            probe_pid=_int(hello.get("pid")),
            reader=_str(hello.get("reader")) or "nvml",
            read_only=bool(hello.get("read_only")),
            error_code=_str(err.get("code")) if isinstance(err, dict) else None,
            error_message=_str(err.get("message")) if isinstance(err, dict) else None,
        )


@dataclass(frozen=True, slots=True)
class Gpu:
    index: int
    uuid: str | None = None
    name: str | None = None
    minor: int | None = None
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

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Gpu:
        return cls(
            index=_int(d.get("index")) or 0,
            uuid=_str(d.get("uuid")),
            name=_str(d.get("name")),
            minor=_int(d.get("minor")),
            memory_total=_int(d.get("memory_total")),
            memory_used=_int(d.get("memory_used")),
            memory_reserved=_int(d.get("memory_reserved")),
            memory_baseline=_int(d.get("memory_baseline")),
            util_gpu=_int(d.get("util_gpu")),
            util_mem=_int(d.get("util_mem")),
            temperature=_int(d.get("temperature")),
            power_draw=_float(d.get("power_draw")),
            power_limit=_float(d.get("power_limit")),
            persistence=d.get("persistence") if isinstance(d.get("persistence"), bool) else None,
            error=_str(d.get("error")),
        )

    @property
    def memory_fraction(self) -> float | None:
        if not self.memory_total or self.memory_used is None:
            return None
        return min(1.0, self.memory_used / self.memory_total)


@dataclass(frozen=True, slots=True)
class Proc:
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

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Proc:
        mem: dict[int, int | None] = {}
        raw = d.get("gpu_memory")
        if isinstance(raw, dict):
            for key, value in raw.items():
                if isinstance(key, str) and key.isdigit():
                    mem[int(key)] = _int(value)
        kind = d.get("kind")
        return cls(
            pid=_int(d.get("pid")) or 0,
            start_time=_int(d.get("start_time")),
            kind=kind if kind in KINDS else "hidden",
            name=_str(d.get("name")),
            command=tuple(str(a) for a in d.get("command") or () if isinstance(a, str)),
            user=_str(d.get("user")),
            uid=_int(d.get("uid")),
            state=_str(d.get("state")),
            ppid=_int(d.get("ppid")),
            pgid=_int(d.get("pgid")),
            sid=_int(d.get("sid")),
            cpu_percent=_float(d.get("cpu_percent")),
            rss=_int(d.get("rss")),
            elapsed=_float(d.get("elapsed")),
            holds=tuple(str(h) for h in d.get("holds") or () if isinstance(h, str)),
            gpu_memory=mem,
            gpus=tuple(g for g in d.get("gpus") or () if isinstance(g, int)),
            reason=_str(d.get("reason")),
            links=tuple(p for p in d.get("links") or () if isinstance(p, int)),
            protected=_str(d.get("protected")),
            nspid=_int(d.get("nspid")),
            container=_str(d.get("container")),
        )

    @property
    def key(self) -> tuple[int, int | None]:
        """A process's identity: a PID alone can be reused."""
        return (self.pid, self.start_time)

    @property
    def gpu_bytes(self) -> int:
        return sum(b or 0 for b in self.gpu_memory.values())

    @property
    def command_line(self) -> str:
        """The command as people say it: `python train.py`, long paths cut to `.../name`."""
        return brief_command(list(self.command)) if self.command else (f"[{self.name}]" if self.name else "-")


@dataclass(frozen=True, slots=True)
class Sample:
    seq: int
    time: float
    gpus: tuple[Gpu, ...]
    processes: tuple[Proc, ...]
    scan_age: float | None = None
    scan_unreadable: int = 0
    cost_ms: dict[str, float] = field(default_factory=dict, hash=False, compare=False)

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Sample:
        scan = d.get("scan") if isinstance(d.get("scan"), dict) else {}
        cost = d.get("cost_ms") if isinstance(d.get("cost_ms"), dict) else {}
        return cls(
            seq=_int(d.get("seq")) or 0,
            time=_float(d.get("time")) or 0.0,
            gpus=tuple(Gpu.from_wire(g) for g in d.get("gpus") or () if isinstance(g, dict)),
            processes=tuple(Proc.from_wire(p) for p in d.get("processes") or () if isinstance(p, dict)),
            scan_age=_float(scan.get("age")),
            scan_unreadable=_int(scan.get("unreadable")) or 0,
            cost_ms={k: float(v) for k, v in cost.items() if isinstance(v, (int, float))},
        )

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


@dataclass(frozen=True, slots=True)
class Event:
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
            time=_float(d.get("time")) or 0.0,
            stage=_str(d.get("stage")) or "?",
            result=_str(d.get("result")),
            pid=_int(d.get("pid")),
            start_time=_int(d.get("start_time")),
            gpu=_int(d.get("gpu")),
            signal=_str(d.get("signal")),
            message=_str(d.get("message")) or "",
            data=d.get("data") if isinstance(d.get("data"), dict) else {},
        )


def gpu_verdict_words(verdict: dict[str, Any]) -> tuple[str, str, str]:
    """A GPU verdict's (held by, NVML-listed ghosts, suspected holders), as words for a person: what
    the action log and `gputui clean` both say about a GPU that did not come back."""

    def listed(key: str) -> str:
        return ", ".join(map(str, verdict.get(key) or []))

    held = listed("held_by") or str(verdict.get("error") or "memory in use")
    return held, listed("ghosts") or "nothing", listed("suspects") or "none found"

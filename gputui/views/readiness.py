"""Is a GPU ready for the next run? The conditions `gputui wait` checks, headless and pure.

Freeing the memory is half of the gap between two benchmark runs; the other half is knowing the GPU
is ready: nothing left holding it, memory back at idle, none unaccounted for, utilization quiet, and,
when asked, cool enough, not throttling, in persistence mode. Each condition that fails says what
and by how much, for the live line and the timeout report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from ..fleet.idle import span
from ..kill.plan.mig import holders, memory_unjudged
from ..model import (
    IDLE_SLACK,
    Gpu,
    MigInstance,
    MigPlace,
    Preflight,
    Proc,
    ProcessFacts,
    Sample,
    brief_process,
)
from ..model.textsafe import cut, printable
from ..text.units import fmt_bytes
from ..text.words import count, unaccounted_words

DEFAULT_UTIL_BELOW = 1  # percent: "utilization 0"
# A host read from Prometheus' series (gputui/transport/prometheus.py) lists no process: what is judged
# there is memory above idle, utilization, temperature, the GPU's error and ECC; never a holder.
SERIES_READER = "prometheus"
SERIES_NOTE = "from Prometheus series: no holder list"
SERIES_JUDGED = "memory and utilization from Prometheus series: no holder list"


@dataclass(frozen=True, slots=True)
class Conditions:
    """What "ready" means. The defaults are the ones every benchmark needs."""

    memory_slack: int = IDLE_SLACK  # bytes above the idle baseline that still count as idle
    util_below: int = DEFAULT_UTIL_BELOW  # percent
    accounted: bool = True  # no unaccounted memory (ghost, orphaned, ...)
    temp_below: int | None = None  # degrees C
    memory_below: int | None = None  # bytes used, whatever the baseline
    no_throttle: bool = False  # no active clock-event (throttle) reason
    persistence: bool = False  # persistence mode on

    @property
    def needs_preflight(self) -> bool:
        return self.no_throttle or self.persistence


@dataclass(frozen=True, slots=True)
class Unready:
    """One condition a GPU does not meet now."""

    # processes, memory, unaccounted, utilization, temperature, ecc, throttle, persistence, ...
    condition: str
    words: str  # what and by how much, for a person
    excess: float | None = None  # by how much (bytes, percent, degrees), where it is a number

    def describe(self) -> dict[str, object]:
        return {"condition": self.condition, "words": self.words, "excess": self.excess}


def started_by(sample: Sample, proc: Proc) -> str | None:
    """`started by 4242 `python supervisor.py``: the parent of a GPU process, as the sample knows it
    (a launcher, a supervisor, a shell); None when it does not (PID 1, the probe's own chain)."""
    if proc.ppid is None or proc.ppid <= 1:
        return None
    parent: ProcessFacts | None = next((p for p in sample.parents if p.pid == proc.ppid), None)
    if parent is None:
        parent = next((p for p in sample.processes if p.pid == proc.ppid), None)
    if parent is None:
        return None
    return f"started by {proc.ppid} `{cut(brief_process(parent.command, parent.name), 80)}`"


def new_process_words(sample: Sample, proc: Proc, where: str) -> str:
    """`new process 5151 on GPU 2, started by 4242 `python supervisor.py``: a GPU process that was
    not there when the wait began (a supervisor's restarted worker: stop the parent, not it).
    `where`: `on GPU 2`, `in MIG instance 0:1.0`."""
    parent = started_by(sample, proc)
    return f"new process {proc.pid} {where}" + (f", {parent}" if parent else "")


def _idle_note(proc: Proc, idle: Mapping[tuple[int, int | None], float] | None) -> str:
    """`; idle holder: 0% SM for 12m` for an idle holder, else nothing."""
    seconds = idle.get(proc.key) if idle else None
    return "" if seconds is None else f"; idle holder: 0% SM for {span(seconds)}"


def unready(
    gpu: Gpu,
    sample: Sample,
    conditions: Conditions,
    preflight: Preflight | None = None,
    known: Collection[tuple[int, int | None]] | None = None,
    idle: Mapping[tuple[int, int | None], float] | None = None,
    series: bool = False,
    instance: MigPlace | None = None,
) -> list[Unready]:
    """Every condition `gpu` fails in `sample` (empty: ready). `preflight`: its latest preflight
    record (the sample carries one only now and then). `known`: the processes (pid, start time)
    there when the wait began; one that is not is named as new, with the parent that started it.
    `idle`: the idle holders (gputui/fleet/idle.py) among them, with their seconds at 0 % SM: a GPU that
    waits on one says so (it frees nothing by itself: someone must stop it). `series`: the sample
    was made from Prometheus' series, with no holder list: each condition says so (SERIES_NOTE).

    `instance`: judge that MIG instance of `gpu` alone, a slice whose GPU's other instances run other
    jobs: nothing runs in it (the holders a clean of it stops: gputui/kill/plan/mig.py), its memory
    at idle where that can be judged (read by the driver, nothing running in its GPU instance) and
    below --memory-below; and its GPU's own health: no error, no memory fault, the temperature,
    clock-event reasons and persistence mode asked for. Never utilization (NVML reports none per
    instance, nor for a GPU in MIG mode) nor the GPU's unaccounted memory (other instances' is in it)."""
    if gpu.error:
        return [Unready("error", f"the GPU reports an error: {gpu.error}")]
    if instance is None:
        users, where = [p for p in sample.on_gpu(gpu.index) if p.is_holder], f"on GPU {gpu.index}"
        own = [
            *_memory(gpu, conditions),
            _unaccounted(gpu, conditions),
            _under("utilization", gpu.util_gpu, conditions.util_below, "%", float),
        ]
    else:
        mig = gpu.mig_instance(instance)
        if mig is None:
            return [Unready("mig", f"MIG instance {instance.label} is gone (destroyed, or MIG mode is off)")]
        users, where = holders(sample, instance), f"in MIG instance {instance.label}"
        own = [*_instance_memory(sample, instance, mig, conditions)]
    found = [
        u
        for u in (
            _processes(users, sample, known, idle, where),
            *own,
            _temperature(gpu, conditions),
            *_preflight(preflight, conditions),
        )
        if u is not None
    ]
    if series:
        return [Unready(u.condition, f"{u.words} ({SERIES_NOTE})", u.excess) for u in found]
    return found


def is_ready(gpu: Gpu, sample: Sample, conditions: Conditions, preflight: Preflight | None = None) -> bool:
    """`not unready(gpu, sample, conditions, preflight)`, the cheap conditions first and none past the
    first that fails: an exporter's 0 or 1 for each GPU at each scrape needs no words."""
    if gpu.error:
        return False
    failed = (
        _under("utilization", gpu.util_gpu, conditions.util_below, "%", float) is not None
        or _temperature(gpu, conditions) is not None
        or bool(_memory(gpu, conditions))
        or _unaccounted(gpu, conditions) is not None
        or bool(_preflight(preflight, conditions))
    )
    return not failed and not [p for p in sample.on_gpu(gpu.index) if p.is_holder]


def _processes(
    users: list[Proc],
    sample: Sample,
    known: Collection[tuple[int, int | None]] | None,
    idle: Mapping[tuple[int, int | None], float] | None,
    where: str,
) -> Unready | None:
    """The holders (Proc.is_holder) of a GPU or MIG instance, `where` it is: the new ones first
    (with the parent that started them), then the others, four of each named."""
    if not users:
        return None
    fresh = [p for p in users if known is not None and p.key not in known and p.kind != "ghost"]
    old = [p for p in users if p not in fresh]
    parts = [new_process_words(sample, p, where) for p in fresh[:4]]
    names = ", ".join(
        f"{p.pid} ({p.kind}{': ' + p.command_line if p.kind != 'ghost' else ''}{_idle_note(p, idle)})"
        for p in old[:4]
    )
    more = f" and {len(old) - 4} more" if len(old) > 4 else ""
    if old:
        parts.append(f"used or held by {names}{more}")
    if len(fresh) > 4:
        parts.append(f"and {len(fresh) - 4} more new")
    return Unready("processes", "; ".join(parts), float(len(users)))


def _instance_memory(
    sample: Sample, place: MigPlace, instance: MigInstance, conditions: Conditions
) -> list[Unready]:
    """A MIG instance's memory above idle where it can be judged (kill.plan.mig.memory_unjudged:
    nothing said where it cannot, its processes are), and at or above --memory-below."""
    used, out = instance.memory_used, []
    if (
        memory_unjudged(sample, place, instance) is None
        and used is not None
        and used > conditions.memory_slack
    ):
        slack = fmt_bytes(conditions.memory_slack)
        words = f"{fmt_bytes(used)} used with nothing running in it (slack {slack}; ghost or orphaned: a reset of the GPU frees it)"
        out.append(Unready("memory", words, float(used)))
    below = conditions.memory_below
    if below is not None and (used is None or used >= below):
        words = (
            "no memory figure of the MIG instance from the driver"
            if used is None
            else (f"{fmt_bytes(used)} used, not below {fmt_bytes(below)}")
        )
        out.append(Unready("memory-below", words, None if used is None else float(used)))
    return out


def _memory(gpu: Gpu, conditions: Conditions) -> list[Unready]:
    """Memory above the idle baseline (past the slack), and at or above an absolute bound if one is
    asked."""
    used, base = gpu.memory_used, gpu.memory_baseline or 0
    if used is None:
        return [Unready("memory", "no memory figure from the driver")]
    out = []
    above = used - base
    if above > conditions.memory_slack:
        slack = fmt_bytes(conditions.memory_slack)
        words = f"{fmt_bytes(above)} above idle (idle {fmt_bytes(base)}, slack {slack})"
        out.append(Unready("memory", words, float(above)))
    below = conditions.memory_below
    if below is not None and used >= below:
        out.append(
            Unready("memory-below", f"{fmt_bytes(used)} used, not below {fmt_bytes(below)}", float(used))
        )
    return out


def _unaccounted(gpu: Gpu, conditions: Conditions) -> Unready | None:
    account = gpu.accounting
    if not conditions.accounted or account is None or account.unaccounted <= conditions.memory_slack:
        return None
    return Unready("unaccounted", unaccounted_words(account), float(account.unaccounted))


def _under(
    condition: str, value: int | None, below: int, unit: str, excess: Callable[[int], float]
) -> Unready | None:
    """A reading that must stay below `below`: failed where the driver gives none, or where it is at
    or above; `excess` says by how much."""
    if value is None:
        return Unready(condition, f"no {condition} figure from the driver")
    if value < below:
        return None
    return Unready(condition, f"{value}{unit} (below {below}{unit} wanted)", excess(value))


def _temperature(gpu: Gpu, conditions: Conditions) -> Unready | None:
    """Only when a bound is asked; by how much: the degrees to shed to be just below it."""
    below = conditions.temp_below
    if below is None:
        return None
    return _under("temperature", gpu.temperature, below, "°C", lambda t: float(t - below + 1))


def _preflight(preflight: Preflight | None, conditions: Conditions) -> list[Unready]:
    """What the latest preflight reading fails: memory trouble always (uncorrected ECC errors, a
    row remap, a page retirement); clock-event reasons and persistence mode where asked."""
    if preflight is None:
        return [Unready("preflight", "no preflight reading yet")] if conditions.needs_preflight else []
    out = []
    faults = memory_faults(preflight)
    if faults:  # never ready, whatever was asked: the dashboard does not call such a GPU free either
        words = f"{', '.join(faults)}: the GPU wants a reset, not a job"
        out.append(Unready("ecc", words, float(len(faults))))
    if conditions.no_throttle:
        if preflight.throttle is None:
            out.append(Unready("throttle", "the driver does not report clock-event reasons"))
        elif preflight.throttle:
            reasons = ", ".join(preflight.throttle)
            out.append(Unready("throttle", f"throttling: {reasons}", float(len(preflight.throttle))))
    if conditions.persistence and preflight.persistence is not True:
        state = "is off" if preflight.persistence is False else "unknown"
        out.append(Unready("persistence", f"persistence mode {state}"))
    return out


def memory_faults(p: Preflight) -> list[str]:
    """The memory trouble a preflight reading shows, in words: uncorrected ECC errors, a row remap
    failed or pending, a page retirement pending. A GPU with any wants a reset, not a job."""
    out = []
    if p.ecc_uncorrected:
        out.append(count(p.ecc_uncorrected, "uncorrected ECC error"))
    if p.remap_failed:
        out.append("a row remap failed")
    elif p.remap_pending:
        out.append("row remap pending (a reset applies it)")
    if p.retired_pending:
        out.append("page retirement pending")
    return out


def preflight_flags(preflights: Mapping[int, Preflight]) -> dict[int, tuple[str, ...]]:
    """What is off about each GPU's preflight reading, in words, for the GPU table and the GPU view.

    Some states are worth a flag on any GPU (throttling, uncorrected ECC errors, pending row remaps
    or page retirements). Others are settings a GPU may legitimately have, and are flagged only
    where a GPU differs from most of its siblings: one GPU with persistence off, its clocks or power
    limit set, MIG on, another compute mode, a narrower PCIe link. GPUs without a flag are absent."""
    out: dict[int, list[str]] = {}
    for index, p in preflights.items():
        flags = out.setdefault(index, [])
        if p.throttle:
            flags.append("throttling: " + ", ".join(p.throttle))
        flags += memory_faults(p)
    settings: dict[str, Callable[[Preflight], object]] = {
        "persistence": lambda p: p.persistence,
        "compute": lambda p: p.compute_mode,
        "mig": lambda p: p.mig,
        "clocks": lambda p: _clocks_set(p),
        "power": lambda p: (
            None if p.power_limit is None else p.power_limit == (p.power_default or p.power_limit)
        ),
        "pcie": lambda p: None if p.pcie_width is None else (p.pcie_width, p.pcie_width_max),
    }
    for name, value_of in settings.items():
        values = {i: value_of(p) for i, p in preflights.items()}
        known = [v for v in values.values() if v is not None]
        if len(known) < 2:
            continue
        common, times = Counter(known).most_common(1)[0]
        if times * 2 <= len(known):
            continue  # no majority to differ from
        for index, value in values.items():
            if value is not None and value != common:
                out[index].append(_setting_words(name, preflights[index]))
    return {i: tuple(flags) for i, flags in sorted(out.items()) if flags}


def _clocks_set(p: Preflight) -> bool | None:
    """Whether application clocks differ from their defaults (clocks set or locked by someone)."""
    pairs = [(p.sm_app_clock, p.sm_app_clock_default), (p.mem_app_clock, p.mem_app_clock_default)]
    known = [(now, default) for now, default in pairs if now is not None and default is not None]
    return any(now != default for now, default in known) if known else None


def _setting_words(name: str, p: Preflight) -> str:
    if name == "persistence":
        return "persistence " + ("on" if p.persistence else "off")
    if name == "compute":
        return f"compute mode {printable(p.compute_mode or '?')}"
    if name == "mig":
        return "MIG " + ("on" if p.mig else "off")
    if name == "clocks":
        if not _clocks_set(p):
            return "clocks at their defaults"
        return f"clocks set: SM {p.sm_app_clock or '?'} MHz, memory {p.mem_app_clock or '?'} MHz"
    if name == "power":
        return f"power limit {p.power_limit or 0:.0f} W (default {p.power_default or 0:.0f} W)"
    return f"PCIe x{p.pcie_width or '?'} of x{p.pcie_width_max or '?'}"

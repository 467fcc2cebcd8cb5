"""The fleet's latest state as Prometheus metric families: what `gputui export` serves and writes.

Pure over the fleet's host views (no CLI, no I/O, no clock but a sample's age): `families(views)`
builds every family from what the fleet holds now, and `FleetCollector` hands them to a
prometheus_client registry at scrape time, so a scrape always sees the newest sample of each host
and nothing is kept between scrapes (a host, GPU or process that is gone is simply not listed:
Prometheus marks its series stale).

Names are in base units (bytes, seconds, ratios 0-1, watts, celsius) with the `gputui_` prefix.
Labels are kept few (dcgm-exporter#585): a GPU's series carry `host`, `gpu` (its index), `uuid` and
`pci_bus_id`; who holds a GPU is one info series per (GPU, process), joined by `uuid` (or `host`,
`gpu`) and `pid`, not a job label on every series. Every metric is documented in docs/MONITORING.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from .. import __version__
from ..fleet.session import CONNECTING, DOWN, LIVE, STALE, HostView
from ..model import NO_GPU_CODES, Gpu, MemoryAccount, Sample
from .readiness import Conditions, unready

__all__ = [
    "GPU_LABELS",
    "HOST_STATES",
    "FleetCollector",
    "IdleCount",
    "all_heard",
    "families",
    "host_state",
    "idle_holders_now",
    "registry",
]

NO_GPU = "no-gpu"
HOST_STATES = (CONNECTING, LIVE, STALE, DOWN, NO_GPU)
GPU_LABELS = ("host", "gpu", "uuid", "pci_bus_id")
PROCESS_LABELS = (*GPU_LABELS, "pid")
HOLDER_FIELDS = ("user", "kind", "name", "job", "slurm_job", "container")
# A label value is a host's text (a user name, a container's cgroup): bounded, so one odd value
# cannot grow a scrape. Every string is printable already (gputui.model escapes it).
MAX_LABEL = 128
# The kinds that hold memory of their own while alive (a ghost's PID is dead; a monitor watches;
# a zombie holds nothing): what an idle holder can be.
HOLDER_KINDS = ("user", "hidden")
READY = Conditions()  # `gputui wait`'s defaults: no holder, memory at idle, none unaccounted, util 0

IdleCount = Callable[[HostView, Sample, Gpu], int | None]


def _label(value: object) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"


def host_state(view: HostView) -> str:
    """One of HOST_STATES: the fleet's status of the host, or `no-gpu` where its probe runs but
    reads no GPU (no driver, no GPU, no NVML library, no permission). A host that went down stays
    `down` while it tries again, until it is live: an alert on it is not reset by every attempt."""
    if view.facts is not None and view.facts.error_code in NO_GPU_CODES:
        return NO_GPU
    return view.shown_status


def _up(view: HostView) -> bool:
    """Samples come from the host: its GPUs are listed (a stale host's last sample is at most
    DOWN_AFTER intervals old; past that the fleet calls it down and reconnects)."""
    return view.sample is not None and host_state(view) in (LIVE, STALE)


def all_heard(views: Sequence[HostView]) -> bool:
    """Every host has sent a sample or been judged down (or GPU-less): the first scrape would list
    the whole fleet. What `gputui export --listen`'s readiness endpoint answers."""
    return all(v.sample is not None or host_state(v) in (DOWN, NO_GPU) for v in views)


def idle_holders_now(view: HostView, sample: Sample, gpu: Gpu) -> int | None:
    """Holders of `gpu` that keep memory on it while it does nothing, in this sample alone: live
    processes (user or hidden) with memory on the GPU, counted when the GPU's utilization reads 0
    (0 when it is busy; None where the driver gives no utilization, as in MIG mode).

    The hook for idle-holder tracking over time (gputui/fleet/idle.py, where a branch adds it): pass
    another IdleCount to `families` and this one gives way. Over a scrape interval, Prometheus'
    `for:` (the rules' 15 minutes) supplies the "for how long"."""
    if gpu.util_gpu is None:
        return None
    if gpu.util_gpu > 0:
        return 0
    index = gpu.index
    return sum(
        1
        for p in sample.processes
        if index in p.gpus and p.kind in HOLDER_KINDS and (p.gpu_memory.get(index) or 0) > 0
    )


def families(views: Sequence[HostView], idle: IdleCount = idle_holders_now) -> list[Metric]:
    """Every metric family of the fleet as it is now (docs/MONITORING.md lists them)."""
    g = GaugeMetricFamily
    build = InfoMetricFamily("gputui_build", "gputui's version.", value={"version": __version__})
    up = g("gputui_host_up", "1 when samples come from the host's probe, else 0.", labels=["host"])
    state = g(
        "gputui_host_state",
        "1 for the host's state (connecting, live, stale, down, no-gpu), 0 for the others.",
        labels=["host", "state"],
    )
    host_info = InfoMetricFamily("gputui_host", "What the host's probe says of it (hello).", labels=["host"])
    age = g(
        "gputui_host_sample_age_seconds",
        "Seconds since the host's latest sample arrived.",
        labels=["host"],
    )
    connects = CounterMetricFamily(
        "gputui_host_connects", "Times the link to the host's probe came up.", labels=["host"]
    )
    unreadable = g(
        "gputui_host_unreadable_processes",
        "Processes whose open files the probe could not read (holders may be missed: run it as root).",
        labels=["host"],
    )
    omitted = g(
        "gputui_host_processes_omitted",
        "Process records left out of the host's sample (bounds).",
        labels=["host"],
    )
    gpu_info = InfoMetricFamily("gputui_gpu", "A GPU's model name.", labels=GPU_LABELS)
    total = g("gputui_gpu_memory_total_bytes", "GPU memory in all.", labels=GPU_LABELS)
    used = g("gputui_gpu_memory_used_bytes", "GPU memory in use (NVML).", labels=GPU_LABELS)
    baseline = g(
        "gputui_gpu_memory_baseline_bytes",
        "What the GPU's used memory reads with nothing on it (its idle figure).",
        labels=GPU_LABELS,
    )
    processes = g(
        "gputui_gpu_memory_processes_bytes",
        "GPU memory NVML lists for live processes.",
        labels=GPU_LABELS,
    )
    unaccounted = g(
        "gputui_gpu_memory_unaccounted_bytes",
        "GPU memory no live listed process accounts for, by category "
        "(ghost, container, unreported, hidden, orphaned, outside, unknown).",
        labels=[*GPU_LABELS, "category"],
    )
    util = g(
        "gputui_gpu_utilization_ratio",
        "Share of the last sample period a kernel ran on the GPU (0-1).",
        labels=GPU_LABELS,
    )
    mem_util = g(
        "gputui_gpu_memory_copy_utilization_ratio",
        "Share of the last sample period GPU memory was read or written (0-1).",
        labels=GPU_LABELS,
    )
    temperature = g("gputui_gpu_temperature_celsius", "GPU temperature.", labels=GPU_LABELS)
    power = g("gputui_gpu_power_watts", "GPU power draw.", labels=GPU_LABELS)
    power_limit = g("gputui_gpu_power_limit_watts", "GPU enforced power limit.", labels=GPU_LABELS)
    ready = g(
        "gputui_gpu_ready",
        "1 when the GPU is ready for the next run as `gputui wait` judges it, else 0.",
        labels=GPU_LABELS,
    )
    idle_holders = g(
        "gputui_gpu_idle_holders",
        "Live processes holding memory on the GPU while its utilization reads 0.",
        labels=GPU_LABELS,
    )
    error = g(
        "gputui_gpu_error",
        "1 while the GPU reports an error (code: gpu-lost, ...); absent otherwise.",
        labels=[*GPU_LABELS, "code"],
    )
    throttled = g(
        "gputui_gpu_throttled",
        "1 when any clock-event (throttle) reason but idle is active, else 0 (latest preflight).",
        labels=GPU_LABELS,
    )
    throttle_reason = g(
        "gputui_gpu_throttle_reason",
        "1 for each active clock-event reason (latest preflight); inactive ones are absent.",
        labels=[*GPU_LABELS, "reason"],
    )
    ecc = CounterMetricFamily(
        "gputui_gpu_ecc_errors",
        "Volatile ECC errors since the driver loaded, by type (corrected, uncorrected).",
        labels=[*GPU_LABELS, "type"],
    )
    remap_pending = g(
        "gputui_gpu_remap_pending", "1 when a row remap waits for a GPU reset, else 0.", labels=GPU_LABELS
    )
    remap_failed = g("gputui_gpu_remap_failed", "1 when a row remap failed, else 0.", labels=GPU_LABELS)
    retired_pending = g(
        "gputui_gpu_retired_pages_pending",
        "1 when a page retirement waits for a reset, else 0.",
        labels=GPU_LABELS,
    )
    holder = InfoMetricFamily(
        "gputui_gpu_holder",
        "A process that uses or holds the GPU: who it is (user, kind, name, job, Slurm job, container).",
        labels=PROCESS_LABELS,
    )
    proc_memory = g(
        "gputui_process_gpu_memory_bytes",
        "GPU memory NVML lists for the process on this GPU.",
        labels=PROCESS_LABELS,
    )
    proc_util = g(
        "gputui_process_gpu_utilization_ratio",
        "The process's share of the GPU's SM time over the probe's last reading (0-1).",
        labels=PROCESS_LABELS,
    )

    for view in views:
        host = _label(view.name)
        current = host_state(view)
        is_up = _up(view)
        up.add_metric([host], 1.0 if is_up else 0.0)
        for name in HOST_STATES:
            state.add_metric([host, name], 1.0 if name == current else 0.0)
        connects.add_metric([host], float(view.connects))
        facts = view.facts
        if facts is not None:
            host_info.add_metric(
                [host],
                {
                    "hostname": _label(facts.hostname),
                    "driver_version": _label(facts.driver_version),
                    "probe_version": _label(facts.probe_version),
                    "reader": _label(facts.reader),
                },
            )
        sample = view.sample
        if sample is None or not is_up:
            continue  # a down host's last sample is not today's state
        seconds = view.age
        if seconds is not None:
            age.add_metric([host], max(0.0, seconds))
        unreadable.add_metric([host], float(sample.scan_unreadable))
        omitted.add_metric([host], float(sample.omitted))
        jobs = {job.id: job for job in sample.jobs}
        for gpu in sample.gpus:
            labels = [host, str(gpu.index), _label(gpu.uuid), _label(gpu.pci_bus_id)]
            gpu_info.add_metric(labels, {"name": _label(gpu.name)})
            _put(total, labels, gpu.memory_total)
            _put(used, labels, gpu.memory_used)
            _put(baseline, labels, gpu.memory_baseline)
            _put(temperature, labels, gpu.temperature)
            _put(power, labels, gpu.power_draw)
            _put(power_limit, labels, gpu.power_limit)
            if gpu.util_gpu is not None:
                util.add_metric(labels, gpu.util_gpu / 100.0)
            if gpu.util_mem is not None:
                mem_util.add_metric(labels, gpu.util_mem / 100.0)
            if gpu.error:
                error.add_metric([*labels, _label(gpu.error)], 1.0)
            account = gpu.accounting
            if account is not None:
                processes.add_metric(labels, float(account.processes))
                for part in MemoryAccount.UNACCOUNTED:
                    unaccounted.add_metric([*labels, part], float(getattr(account, part)))
            preflight = view.preflight.get(gpu.index)
            ready.add_metric(labels, 0.0 if unready(gpu, sample, READY, preflight) else 1.0)
            count = idle(view, sample, gpu)
            if count is not None:
                idle_holders.add_metric(labels, float(count))
            if preflight is not None:
                if preflight.throttle is not None:
                    throttled.add_metric(labels, 1.0 if preflight.throttle else 0.0)
                    for reason in dict.fromkeys(preflight.throttle):
                        throttle_reason.add_metric([*labels, _label(reason)], 1.0)
                _put(ecc, [*labels, "corrected"], preflight.ecc_corrected)
                _put(ecc, [*labels, "uncorrected"], preflight.ecc_uncorrected)
                _flag(remap_pending, labels, preflight.remap_pending)
                _flag(remap_failed, labels, preflight.remap_failed)
                _flag(retired_pending, labels, preflight.retired_pending)
            for p in sample.processes:
                if gpu.index not in p.gpus:
                    continue
                who = [*labels, str(p.pid)]
                job = jobs.get(p.job) if p.job is not None else None
                holder.add_metric(
                    who,
                    {
                        "user": _label(p.user),
                        "kind": p.kind,
                        "name": _label(p.name),
                        "job": _label(p.job),
                        "slurm_job": _label(job.slurm_job if job is not None else None),
                        "container": _label(p.container or (job.container if job is not None else None)),
                    },
                )
                _put(proc_memory, who, p.gpu_memory.get(gpu.index))
                sm = p.sm_util(gpu.index)
                if sm is not None:
                    proc_util.add_metric(who, sm / 100.0)
    return [
        build, up, state, host_info, age, connects, unreadable, omitted, gpu_info, total, used,
        baseline, processes, unaccounted, util, mem_util, temperature, power, power_limit, ready,
        idle_holders, error, throttled, throttle_reason, ecc, remap_pending, remap_failed,
        retired_pending, holder, proc_memory, proc_util,
    ]  # fmt: skip


def _put(family: GaugeMetricFamily | CounterMetricFamily, labels: list[str], value: float | None) -> None:
    """A sample where the figure is known: a figure the driver did not give is absent, never 0."""
    if value is not None:
        family.add_metric(labels, float(value))


def _flag(family: GaugeMetricFamily, labels: list[str], value: bool | None) -> None:
    if value is not None:
        family.add_metric(labels, 1.0 if value else 0.0)


class FleetCollector:
    """A prometheus_client collector over the fleet's host views: the families are built from the
    views `source` returns, at each collect (a scrape, a textfile write)."""

    def __init__(self, source: Callable[[], Sequence[HostView]], idle: IdleCount = idle_holders_now) -> None:
        self.source = source
        self.idle = idle

    def collect(self) -> Iterable[Metric]:
        return families(self.source(), self.idle)

    def describe(self) -> Iterable[Metric]:
        """The families without samples: their names, for the registry (a scrape's `name[]=`
        selects among them)."""
        return families([], self.idle)


def registry(collector: Collector) -> CollectorRegistry:
    """A registry of its own holding `collector` alone: no process or platform metrics of this
    Python (node_exporter's textfile collector would find them clashing with its own)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    return reg

"""The readiness families: whether each GPU is ready for the next run as `gputui wait` judges it,
and how many live processes hold memory on it while it does nothing."""

from __future__ import annotations

from ...fleet.session import HostView
from ...model import Gpu, Sample
from ..readiness import Conditions, is_ready
from .scrape import Family, Scrape, collector, gpu_gauge, put

# The kinds that hold memory of their own while alive (a ghost's PID is dead; a monitor watches;
# a zombie holds nothing): what an idle holder can be.
HOLDER_KINDS = ("user", "hidden")
READY = Conditions()  # `gputui wait`'s defaults: no holder, memory at idle, none unaccounted, util 0


def idle_holders_now(view: HostView, sample: Sample, gpu: Gpu) -> int | None:
    """Holders of `gpu` that keep memory on it while it does nothing, in this sample alone: live
    processes (user or hidden) with memory on the GPU, counted when the GPU's utilization reads 0
    (0 when it is busy; None where the driver gives no utilization, as in MIG mode).

    The hook for idle-holder tracking over time (gputui/fleet/idle.py): pass another IdleCount to
    `families` and this one gives way. Over a scrape interval, Prometheus' `for:` (the rules' 15
    minutes) supplies the "for how long"."""
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


@collector("ready")
def ready_families(scrape: Scrape) -> list[Family]:
    ready = gpu_gauge(
        "gputui_gpu_ready", "1 when the GPU is ready for the next run as `gputui wait` judges it, else 0."
    )
    idle_holders = gpu_gauge(
        "gputui_gpu_idle_holders", "Live processes holding memory on the GPU while its utilization reads 0."
    )
    for row in scrape.gpus:
        preflight = row.view.preflight.get(row.gpu.index)
        ready.add_metric(row.labels, 1.0 if is_ready(row.gpu, row.sample, READY, preflight) else 0.0)
        put(idle_holders, row.labels, scrape.idle(row.view, row.sample, row.gpu))
    return [ready, idle_holders]

"""The holder families: who uses or holds each GPU, one info series per (GPU, process) joined to the
GPU's series by `uuid` (or `host`, `gpu`) and `pid`, and each process's memory and SM share on it.
Who it is (user, job, container) is in the info series only, not a label on every series
(dcgm-exporter#585)."""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric

from ...model import Job, Proc
from .scrape import GPU_LABELS, Scrape, collector, gpu_rows, label, put

PROCESS_LABELS = (*GPU_LABELS, "pid")


@collector("holders")
def holder_families(scrape: Scrape) -> list[Metric]:
    holder = InfoMetricFamily(
        "gputui_gpu_holder",
        "A process that uses or holds the GPU: who it is (user, kind, name, job, Slurm job, container).",
        labels=PROCESS_LABELS,
    )
    memory = GaugeMetricFamily(
        "gputui_process_gpu_memory_bytes",
        "GPU memory NVML lists for the process on this GPU.",
        labels=PROCESS_LABELS,
    )
    util = GaugeMetricFamily(
        "gputui_process_gpu_utilization_ratio",
        "The process's share of the GPU's SM time over the probe's last reading (0-1).",
        labels=PROCESS_LABELS,
    )
    for row in gpu_rows(scrape.views):
        jobs = {job.id: job for job in row.sample.jobs}
        index = row.gpu.index
        for p in row.sample.processes:
            if index not in p.gpus:
                continue
            who = [*row.labels, str(p.pid)]
            holder.add_metric(who, _who(p, jobs.get(p.job) if p.job is not None else None))
            put(memory, who, p.gpu_memory.get(index))
            sm = p.sm_util(index)
            put(util, who, None if sm is None else sm / 100.0)
    return [holder, memory, util]


def _who(p: Proc, job: Job | None) -> dict[str, str]:
    return {
        "user": label(p.user),
        "kind": p.kind,
        "name": label(p.name),
        "job": label(p.job),
        "slurm_job": label(job.slurm_job if job is not None else None),
        "container": label(p.container or (job.container if job is not None else None)),
    }

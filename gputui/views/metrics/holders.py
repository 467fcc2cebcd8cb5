"""The holder families: who uses or holds each GPU, one info series per (GPU, process) joined to the
GPU's series by `uuid` (or `host`, `gpu`) and `pid`, and each process's memory and SM share on it.
Who it is (user, job, container) is in the info series only, not a label on every series
(dcgm-exporter#585)."""

from __future__ import annotations

from ...model import Job, Proc, Sample
from .scrape import GPU_LABELS, Family, Scrape, collector, gauge, info, label, put

PROCESS_LABELS = (*GPU_LABELS, "pid")


@collector("holders")
def holder_families(scrape: Scrape) -> list[Family]:
    holder = info(
        "gputui_gpu_holder",
        "A process that uses or holds the GPU: who it is (user, kind, name, job, Slurm job, container).",
        PROCESS_LABELS,
    )
    memory = gauge(
        "gputui_process_gpu_memory_bytes",
        "GPU memory NVML lists for the process on this GPU.",
        PROCESS_LABELS,
    )
    util = gauge(
        "gputui_process_gpu_utilization_ratio",
        "The process's share of the GPU's SM time over the probe's last reading (0-1).",
        PROCESS_LABELS,
    )
    jobs: dict[str, Job] = {}
    sample: Sample | None = None
    for row in scrape.gpus:
        if row.sample is not sample:  # a host's jobs, looked up by id for each of its GPUs
            sample = row.sample
            jobs = {job.id: job for job in sample.jobs}
        index = row.gpu.index
        for p in row.processes:
            who = (*row.labels, str(p.pid))
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

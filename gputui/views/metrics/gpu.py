"""The GPU families: each GPU's model, memory (in all, in use, at idle, listed for processes, and
what no live process accounts for), utilization, temperature and power."""

from __future__ import annotations

from ...model import MemoryAccount
from .scrape import GPU_LABELS, Family, Scrape, collector, gpu_gauge, info, label, put


@collector("gpu")
def gpu_families(scrape: Scrape) -> list[Family]:
    model = info("gputui_gpu", "A GPU's model name.", GPU_LABELS)
    total = gpu_gauge("gputui_gpu_memory_total_bytes", "GPU memory in all.")
    used = gpu_gauge("gputui_gpu_memory_used_bytes", "GPU memory in use (NVML).")
    baseline = gpu_gauge(
        "gputui_gpu_memory_baseline_bytes",
        "What the GPU's used memory reads with nothing on it (its idle figure).",
    )
    processes = gpu_gauge("gputui_gpu_memory_processes_bytes", "GPU memory NVML lists for live processes.")
    unaccounted = gpu_gauge(
        "gputui_gpu_memory_unaccounted_bytes",
        "GPU memory no live listed process accounts for, by category "
        "(ghost, container, unreported, hidden, orphaned, outside, unknown).",
        "category",
    )
    util = gpu_gauge(
        "gputui_gpu_utilization_ratio", "Share of the last sample period a kernel ran on the GPU (0-1)."
    )
    mem_util = gpu_gauge(
        "gputui_gpu_memory_copy_utilization_ratio",
        "Share of the last sample period GPU memory was read or written (0-1).",
    )
    temperature = gpu_gauge("gputui_gpu_temperature_celsius", "GPU temperature.")
    power = gpu_gauge("gputui_gpu_power_watts", "GPU power draw.")
    power_limit = gpu_gauge("gputui_gpu_power_limit_watts", "GPU enforced power limit.")
    for row in scrape.gpus:
        gpu, labels = row.gpu, row.labels
        model.add_metric(labels, {"name": label(gpu.name)})
        put(total, labels, gpu.memory_total)
        put(used, labels, gpu.memory_used)
        put(baseline, labels, gpu.memory_baseline)
        put(temperature, labels, gpu.temperature)
        put(power, labels, gpu.power_draw)
        put(power_limit, labels, gpu.power_limit)
        put(util, labels, None if gpu.util_gpu is None else gpu.util_gpu / 100.0)
        put(mem_util, labels, None if gpu.util_mem is None else gpu.util_mem / 100.0)
        account = gpu.accounting
        if account is not None:
            processes.add_metric(labels, float(account.processes))
            for part in MemoryAccount.UNACCOUNTED:
                unaccounted.add_metric([*labels, part], float(getattr(account, part)))
    return [
        model, total, used, baseline, processes, unaccounted, util, mem_util, temperature, power, power_limit,
    ]  # fmt: skip

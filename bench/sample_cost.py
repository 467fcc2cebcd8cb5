#!/usr/bin/env python3
"""Cost of one sample on the monitored host: the gputui probe vs the tools people use today.

    python bench/sample_cost.py [--reader nvml|sim] [--samples 200] [--jobs 3] [--out results.json]

CPU time is what a sample costs the host (user + system, this process or the spawned child); wall
time is what the operator waits. With --reader nvml and PyTorch present, `--jobs` CUDA jobs are
started (spread over the GPUs; `--busy`: each runs matrix multiplies, so per-process utilization has
something to report) and killed at the end, by PID. Prints a table; writes raw numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui import api
from gputui.api import Probe
from gputui.probe.readers.nvml_lists import ProcessLists  # the one-call read against pynvml's
from tests.support.cudajob import CudaJob


def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def self_cpu() -> float:
    return time.process_time()


def spawn_cost(argv: list[str], runs: int) -> tuple[list[float], list[float]] | None:
    if shutil.which(argv[0]) is None:
        return None
    cpu, wall = [], []
    for _ in range(runs):
        c0, w0 = child_cpu(), time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        wall.append(time.perf_counter() - w0)
        cpu.append(child_cpu() - c0)
    return cpu, wall


def inproc_cost(fn, runs: int) -> tuple[list[float], list[float]]:
    fn()  # warm up
    cpu, wall = [], []
    for _ in range(runs):
        c0, w0 = self_cpu(), time.perf_counter()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(self_cpu() - c0)
    return cpu, wall


def probe_costs(probe: Probe, runs: int) -> dict[str, tuple[list[float], list[float]]]:
    probe.sample(full=True)
    probe.sample()
    parts: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in ("nvml", "holders", "total")}
    for _ in range(runs):
        c0, w0 = self_cpu(), time.perf_counter()
        _, listed = probe.read_gpus()
        c1, w1 = self_cpu(), time.perf_counter()
        scan = probe.scanner.scan()
        probe.describe(listed, scan)
        c2, w2 = self_cpu(), time.perf_counter()
        for key, cpu, wall in (
            ("nvml", c1 - c0, w1 - w0),
            ("holders", c2 - c1, w2 - w1),
            ("total", c2 - c0, w2 - w0),
        ):
            parts[key][0].append(cpu)
            parts[key][1].append(wall)
    full = inproc_cost(lambda: probe.scanner.scan(full=True), max(5, runs // 10))
    parts["full holder scan"] = full
    return parts


def whole_sample_costs(probe: Probe, runs: int) -> dict[str, tuple[list[float], list[float]]]:
    """The whole `Probe.sample()` as the app gets it (NVML, holders, accounting, records), with the
    slow reads (preflight, per-process utilization) off, on in every sample, and at their default
    rates (interval 0.5 s: preflight every ~10 s, per-process utilization every ~5 s), and each slow
    read alone. Keys name the configuration."""
    rows: dict[str, tuple[list[float], list[float]]] = {}
    probe.interval = 0.5
    for label, preflight_every, util_every in (
        ("sample: preflight off, proc util off", 0, 0),
        ("sample: proc util in every sample", 0, 1),
        ("sample: preflight in every sample", 1, 0),
        ("sample: default rates (10 s / 5 s)", None, None),
    ):
        probe.preflight_every, probe.proc_util_every = preflight_every, util_every
        rows[label] = inproc_cost(probe.sample, runs)
    probe.preflight_every = probe.proc_util_every = None
    rows["preflight read alone"] = inproc_cost(probe.reader.preflight, max(10, runs // 10))
    if probe.reader.process_utilization() is not None:
        rows["proc util read alone"] = inproc_cost(probe.reader.process_utilization, max(10, runs // 10))
    return rows


def list_costs(probe: Probe, runs: int) -> dict[str, tuple[list[float], list[float]]]:
    """NVML's process lists of every GPU (probe/readers/nvml_lists.py) read through pynvml's functions
    (two driver calls a list that is not empty) and in one call each, and the whole sample both ways:
    alternated run by run, so both see the same jobs and the same host. The slow reads are off for
    these samples: at their default rates they would land on one way's samples only (every tenth
    sample is always the same way's), which moved that way's median by 0.2 ms on an H200."""
    reader = probe.reader
    one_call = reader._lists
    handles = [static["handle"] for static in reader._gpus]
    ways = (("via pynvml", ProcessLists(reader._nv, one_call=False)), ("in one call", one_call))
    rows: dict[str, tuple[list[float], list[float]]] = {}

    def timed(label: str, fn) -> None:
        c0, w0 = self_cpu(), time.perf_counter()
        fn()
        wall, cpu = time.perf_counter() - w0, self_cpu() - c0
        rows.setdefault(label, ([], []))[0].append(cpu)
        rows[label][1].append(wall)

    probe.preflight_every = probe.proc_util_every = 0
    for _ in range(runs):
        for label, lists in ways:
            timed("process lists " + label, lambda lists=lists: [lists.read(h) for h in handles])
            reader._lists = lists
            timed("sample, slow reads off, lists " + label, probe.sample)
    reader._lists = one_call
    probe.preflight_every = probe.proc_util_every = None
    return rows


def phases(probe: Probe, runs: int) -> dict[str, list[float]]:
    """The probe's own split of each sample at the default rates (its `cost_ms`: wall ms of the reader,
    the holder scan, describing and the rest, the host's readings, and the sample's CPU)."""
    probe.preflight_every = probe.proc_util_every = None
    split: dict[str, list[float]] = {}
    for _ in range(runs):
        for key, value in probe.sample()["cost_ms"].items():
            if value is not None:
                split.setdefault(key, []).append(value)
    return split


def profile(probe: Probe, runs: int, top: int) -> str:
    """cProfile of `runs` samples at the default rates: the functions that cost the most themselves."""
    import cProfile
    import io
    import pstats

    probe.preflight_every = probe.proc_util_every = None
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(runs):
        probe.sample()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def preflight_calls(probe: Probe, runs: int) -> dict[str, list[float]]:
    """Wall ms of each NVML query of a preflight reading (by function, summed over a reading): the
    reader's queries go through its `_call` (by function) or `_supported` (by name)."""
    reader = probe.reader
    call, supported = reader._call, reader._supported
    took: dict[str, float] = {}

    def timer(name: str, t0: float) -> None:
        took[name] = took.get(name, 0.0) + (time.perf_counter() - t0) * 1e3

    def timed_call(fn, default, *args):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return call(fn, default, *args)
        finally:
            timer(getattr(fn, "__name__", "?"), t0)

    def timed_supported(index, h, name, convert=None, *args):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return supported(index, h, name, convert, *args)
        finally:
            timer(name, t0)

    reader._call, reader._supported = timed_call, timed_supported
    per: dict[str, list[float]] = {}
    try:
        for _ in range(runs):
            took.clear()
            reader.preflight()
            for name, ms in took.items():
                per.setdefault(name, []).append(ms)
    finally:
        del reader._call, reader._supported
    return per


def start_jobs(n: int, gpus: int, busy: bool = False) -> list[CudaJob]:
    """`n` CUDA jobs of 2 GiB spread over the GPUs; fewer (none) where PyTorch cannot start one."""
    jobs: list[CudaJob] = []
    for i in range(n):
        try:
            jobs.append(CudaJob(2, gpu=i % gpus, busy=busy))
        except RuntimeError:
            break
    return jobs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reader", choices=("nvml", "sim"), default="nvml")
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--spawns", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--busy", action="store_true", help="the CUDA jobs compute (matrix multiplies)")
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also: the probe's split of N samples, a cProfile of N samples, each preflight call timed",
    )
    args = ap.parse_args()

    reader = api.NvmlReader() if args.reader == "nvml" else api.SimReader(scenario="demo")
    probe = Probe(reader)
    hello = probe.start()
    if hello["error"]:
        print("no GPU reader:", hello["error"]["message"])
        return 3
    gpus = len(probe.read_gpus()[0])
    jobs: list[CudaJob] = []
    try:
        if args.reader == "nvml" and args.jobs:
            jobs = start_jobs(args.jobs, gpus, args.busy)
        rows: dict[str, tuple[list[float], list[float]]] = {}
        for key, value in probe_costs(probe, args.samples).items():
            rows[f"gputui probe: {key}"] = value
        for key, value in whole_sample_costs(probe, args.samples).items():
            rows[f"gputui probe {key}"] = value
        if args.reader == "nvml":
            for key, value in list_costs(probe, args.samples).items():
                rows[f"gputui probe {key}"] = value
            q = "--query-gpu=index,memory.used,memory.total,utilization.gpu,temperature.gpu,power.draw"
            for label, argv in (
                ("spawn nvidia-smi --query-gpu", ["nvidia-smi", q, "--format=csv"]),
                (
                    "spawn nvidia-smi --query-compute-apps",
                    ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv"],
                ),
                ("spawn nvidia-smi (full table)", ["nvidia-smi"]),
                ("spawn nvitop -1", ["nvitop", "-1"]),
                ("spawn gpustat", ["gpustat"]),
            ):
                got = spawn_cost(argv, args.spawns)
                if got:
                    rows[label] = got
            try:
                from nvitop import Device  # type: ignore

                def nvitop_sample() -> None:
                    for d in Device.all():
                        d.memory_used(), d.gpu_utilization(), d.temperature(), d.power_usage()
                        d.processes()

                rows["nvitop api, long-running"] = inproc_cost(nvitop_sample, args.samples)
            except ImportError:
                pass
            try:
                import gpustat  # type: ignore

                rows["gpustat new_query(), long-running"] = inproc_cost(
                    gpustat.new_query, max(10, args.samples // 10)
                )
            except ImportError:
                pass
        pattern = "/dev/nvidia*" if args.reader == "nvml" else reader.device_prefix + "*"
        files = sorted(str(p) for p in Path(pattern).parent.glob(Path(pattern).name))
        if shutil.which("fuser") and files:
            rows["spawn fuser " + ("/dev/nvidia*" if args.reader == "nvml" else "<sim>/nvidia*")] = (
                spawn_cost(["fuser", *files], args.spawns)
            )
        print(
            f"\nsample cost on {os.uname().nodename}: {gpus} GPU(s), {len(jobs)} CUDA job(s)"
            f"{' (busy)' if args.busy else ''}, reader {args.reader}"
        )
        print(f"{'what':<44} {'CPU ms (median)':>16} {'CPU ms (p95)':>13} {'wall ms (median)':>17}")
        raw = {}
        for label, (cpu, wall) in rows.items():
            cpu_ms = sorted(c * 1e3 for c in cpu)
            wall_ms = sorted(w * 1e3 for w in wall)
            p95 = cpu_ms[min(len(cpu_ms) - 1, int(len(cpu_ms) * 0.95))]
            print(
                f"{label:<44} {statistics.median(cpu_ms):>16.3f} {p95:>13.3f} {statistics.median(wall_ms):>17.3f}"
            )
            raw[label] = {"cpu_ms": cpu_ms, "wall_ms": wall_ms}
        if args.profile:
            split = phases(probe, args.profile)
            print(f"\nthe probe's own split at the default rates, {args.profile} samples (cost_ms)")
            print(f"{'part':<20} {'median':>8} {'p95':>8} {'max':>8}")
            for key, values in split.items():
                values.sort()
                p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
                print(f"{key:<20} {statistics.median(values):>8.3f} {p95:>8.3f} {values[-1]:>8.3f}")
            calls = preflight_calls(probe, 20) if hasattr(probe.reader, "_supported") else {}
            print("\nthe preflight reading's NVML calls, wall ms per reading (20 readings)")
            for name, values in sorted(calls.items(), key=lambda kv: -statistics.median(kv[1])):
                print(f"{name:<50} {statistics.median(values):>8.3f} {max(values):>8.3f}")
            print(f"\ncProfile of {args.profile} samples at the default rates, by own time")
            print(profile(probe, args.profile, 30))
        if args.out:
            args.out.write_text(json.dumps({"gpus": gpus, "jobs": len(jobs), "rows": raw}, indent=1))
    finally:
        for job in jobs:
            job.stop()
        probe.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

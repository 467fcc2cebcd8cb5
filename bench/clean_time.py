#!/usr/bin/env python3
"""Time to a verified clean GPU: gputui's kill-and-verify vs `kill PID; sleep 1; nvidia-smi`.

    python bench/clean_time.py [--reader nvml|sim] [--runs 10] [--gib 4] [--out raw.json]

Scenarios (GPU_FACTS.md): a cooperative job (SIGTERM suffices), a job that ignores SIGTERM, and the
ghost (a CUDA parent killed while its forked child keeps the memory). For each run a fresh job is
started, gputui plans "free GPU 0" from a full sample (gputui/kill/plan/, as the UI and `gputui clean`
do) and the probe's engine executes it; the clock runs from handing the plan to the engine to its
`done` event. The old procedure is timed on a fresh job too: SIGTERM to the PID nvidia-smi shows
(`kill PID`), `sleep 1`, then one `nvidia-smi --query-gpu=memory.used`; "clean" when the memory is
back at the idle baseline. With --reader sim the jobs are simulated (real processes, sim GPUs) and
the old procedure reads the sim instead of spawning nvidia-smi. Every process is started and ended
here, by PID.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui import api
from gputui.api import IDLE_SLACK, KillOptions, PlanOptions, Probe, Sample, execute, plan_for_gpus
from tests.support.cudajob import CudaJob

SCENARIOS = ("cooperative", "ignore-term", "ghost")


class CudaJobs:
    """Real CUDA jobs on GPU 0 (tests/support/cudajob.py)."""

    def __init__(self, gib: float) -> None:
        self.gib = gib
        self.live: list[CudaJob] = []

    def start(self, scenario: str) -> tuple[int, int]:
        job = CudaJob(self.gib, fork=scenario == "ghost", ignore_term=scenario == "ignore-term")
        self.live.append(job)
        if scenario == "ghost":
            job.kill_parent()  # the parent dies; the forked child keeps the memory
        return job.pid, job.child

    def cleanup(self) -> None:
        for job in self.live:
            job.stop()
        self.live.clear()


class SimJobs:
    def __init__(self, reader, gib: float) -> None:
        self.reader = reader
        self.gib = gib
        self.live: list = []

    def start(self, scenario: str) -> tuple[int, int]:
        role = {"cooperative": "idle", "ignore-term": "ignore-term", "ghost": "ghost"}[scenario]
        job = self.reader.spawn(role, gpu=0, memory=int(self.gib * (1 << 30)))
        self.live.append(job)
        return job.pid, job.child_pid or 0

    def cleanup(self) -> None:
        # What the procedure under test left alive (SIGTERM ignored, a ghost's child): by PID and
        # start time, through the sim's checked signal.
        for job in self.live:
            job.signal(signal.SIGKILL)
            if job.child_pid:
                job.signal(signal.SIGKILL, child=True)
        self.live.clear()


def memory_is_idle(probe: Probe, use_smi: bool, baseline_v1: int) -> bool:
    if use_smi:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        used_mib = int(out.strip().splitlines()[0])
        return used_mib * (1 << 20) <= baseline_v1 + IDLE_SLACK
    gpus, listed = probe.read_gpus()
    return Probe.gpu_is_idle(gpus[0]) and not any(0 in m for m in listed.values())


def run_gputui(probe: Probe, jobs, scenario: str, term_timeout: float) -> dict:
    pid, _ = jobs.start(scenario)
    sample = Sample.from_wire(probe.sample(full=True))
    plan = plan_for_gpus(
        sample, [0], host="bench", options=PlanOptions(kill=KillOptions(term_timeout=term_timeout))
    )
    wire = plan.to_wire()
    events: list[dict] = []
    t0 = time.perf_counter()
    done = execute(probe, wire, events.append)
    elapsed = time.perf_counter() - t0
    jobs.cleanup()
    stages = [e["stage"] for e in events]
    first_signal = next((e["data"]["elapsed_ms"] for e in events if e["stage"] == "signal"), None)
    gpu = (done["data"].get("gpus") or {}).get("0") or {} if done else {}
    return {
        "scenario": scenario,
        "seconds": elapsed,
        "probe_ms": done["data"]["elapsed_ms"] if done else None,  # the probe's own clock, to `done`
        "idle_ms": gpu.get("idle_ms"),  # when NVML first showed GPU 0 back at idle
        "clean": bool(done and done["data"].get("ok")),
        "targets": [t["pid"] for t in wire["targets"]],
        "listed_pid": pid,
        "first_signal_ms": first_signal,
        "stages": stages,
    }


def run_old(probe: Probe, jobs, scenario: str, use_smi: bool, baseline_v1: int) -> dict:
    pid, _ = jobs.start(scenario)
    t0 = time.perf_counter()
    try:
        os.kill(pid, signal.SIGTERM)  # `kill PID`: the PID nvidia-smi lists
        killed = True
    except ProcessLookupError:
        killed = False  # the ghost: nvidia-smi lists a PID that no longer exists
    time.sleep(1.0)  # the `sleep 1` being measured, not a wait of ours
    clean = memory_is_idle(probe, use_smi, baseline_v1)
    elapsed = time.perf_counter() - t0
    jobs.cleanup()
    return {"scenario": scenario, "seconds": elapsed, "clean": clean, "kill_ok": killed}


def settle(probe: Probe, timeout: float = 10.0) -> None:
    """Wait until GPU 0 is idle again before the next run (the previous run's leftovers)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not memory_is_idle(probe, False, 0):
        time.sleep(0.02)


def summary(rows: list[dict]) -> str:
    secs = sorted(r["seconds"] for r in rows)
    clean = sum(r["clean"] for r in rows)
    p95 = secs[min(len(secs) - 1, round(0.95 * (len(secs) - 1)))]
    return f"{statistics.median(secs):>8.3f} {p95:>8.3f}   {clean:>2}/{len(rows):<2}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reader", choices=("nvml", "sim"), default="nvml")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--gib", type=float, default=4.0)
    ap.add_argument("--term-timeout", type=float, default=5.0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    reader = api.NvmlReader() if args.reader == "nvml" else api.SimReader(gpus=1, scenario="empty")
    probe = Probe(reader)
    hello = probe.start()
    if hello["error"]:
        print("no GPU reader:", hello["error"]["message"])
        return 3
    jobs = CudaJobs(args.gib) if args.reader == "nvml" else SimJobs(reader, args.gib)
    use_smi = args.reader == "nvml"
    # nvidia-smi shows memory v1: learn its idle figure (the driver's reserve) first.
    baseline_v1 = 0
    if use_smi:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        baseline_v1 = int(out.strip().splitlines()[0]) * (1 << 20)
    results: dict[str, dict[str, list[dict]]] = {s: {"gputui": [], "old": []} for s in SCENARIOS}
    gpus, _ = probe.read_gpus()
    names = sorted({str(g.get("name", "?")).replace("NVIDIA ", "") for g in gpus})
    where = f"{len(gpus)}x{'/'.join(names)}"
    try:
        for scenario in SCENARIOS:
            for _ in range(args.runs):
                settle(probe)
                results[scenario]["gputui"].append(run_gputui(probe, jobs, scenario, args.term_timeout))
                settle(probe)
                results[scenario]["old"].append(run_old(probe, jobs, scenario, use_smi, baseline_v1))
    finally:
        jobs.cleanup()
        probe.close()
    print(
        f"\ntime to a verified clean GPU ({where}, {args.gib:g} GiB job, {args.runs} runs each, "
        f"TERM timeout {args.term_timeout:g} s)"
    )
    print(f"{'scenario':<12} {'procedure':<34} {'median s':>8} {'p95 s':>8}   clean")
    for scenario in SCENARIOS:
        print(
            f"{scenario:<12} {'gputui (plan -> verified verdict)':<34} {summary(results[scenario]['gputui'])}"
        )
        print(f"{'':<12} {'kill PID; sleep 1; nvidia-smi':<34} {summary(results[scenario]['old'])}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

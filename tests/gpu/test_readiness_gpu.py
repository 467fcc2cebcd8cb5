"""Readiness on a real GPU (issue 11): where the memory went, the preflight reading, per-process
utilization, and `gputui wait` after `gputui clean`, as whole commands. Every process is started here
and ended by PID (the cuda_job fixture); nothing changes a GPU setting."""

import json
import subprocess
import sys
import time

from gputui.probe.core import Probe
from gputui.probe.readers.nvml import NvmlReader
from tests.support.cudajob import GIB, by_pid
from tests.support.waiting import wait_until

PREFLIGHT_KEYS = (
    "persistence",
    "compute_mode",
    "mig",
    "sm_clock",
    "sm_clock_max",
    "mem_clock",
    "mem_clock_max",
    "power_limit",
    "power_default",
    "throttle",
    "ecc_uncorrected",
    "pcie_gen",
    "pcie_width",
    "pcie_width_max",
)


def started_probe() -> Probe:
    probe = Probe(NvmlReader())
    assert probe.start()["error"] is None
    return probe


def test_a_plain_jobs_memory_is_all_accounted(cuda_job):
    probe = started_probe()
    try:
        job = cuda_job(gib=2.0, gpu=0)
        gpu = probe.sample(full=True)["gpus"][0]
        account = gpu["accounting"]
        print("plain job, GPU 0:", json.dumps(account))
        assert account["processes"] >= 2 * GIB
        assert account["unaccounted"] == 0 and account["orphaned"] == 0
        assert account["baseline"] + account["processes"] >= gpu["memory_used"] - (32 << 20)
        assert job.pid
    finally:
        probe.close()


def test_the_ghosts_memory_is_the_ghosts_never_orphaned(cuda_job):
    probe = started_probe()
    try:
        job = cuda_job(gib=2.0, gpu=0, fork=True)
        job.kill_parent()  # the forked child keeps the memory; NVML lists the dead PID
        sample = probe.sample(full=True)
        account = sample["gpus"][0]["accounting"]
        print("ghost, GPU 0:", json.dumps(account))
        assert account["orphaned"] == 0 and account["unknown"] == 0
        assert account["ghost"] >= 2 * GIB and job.pid in account["ghosts"]
        assert job.child in account["suspects"]
        assert by_pid(sample)[job.child]["kind"] == "hidden"
    finally:
        probe.close()


def test_the_preflight_reading_of_a_real_gpu():
    probe = started_probe()
    try:
        sample = probe.sample(full=True, preflight=True)
        print(f"preflight cost: {sample['cost_ms']['preflight']} ms")
        for gpu in sample["gpus"]:
            reading = gpu["preflight"]
            assert isinstance(reading, dict)
            nulls = sorted(k for k, v in reading.items() if v is None)
            print(f"GPU {gpu['index']} preflight: {json.dumps(reading)}")
            print(f"GPU {gpu['index']} null fields: {', '.join(nulls) or 'none'}")
            for key in PREFLIGHT_KEYS:
                assert key in reading, key
            assert isinstance(reading["throttle"], list)
            assert reading["pcie_width_max"] is None or reading["pcie_width_max"] >= 1
    finally:
        probe.close()


def test_per_process_utilization_of_a_busy_job(cuda_job):
    probe = started_probe()
    probe.proc_util_every = 1
    try:
        job = cuda_job(gib=1.0, gpu=0, busy=True)

        def busy_share():
            sample = probe.sample()
            share = (by_pid(sample).get(job.pid, {}).get("gpu_util") or {}).get("0")
            return (share, sample) if share and share.get("sm") else None

        got = wait_until(busy_share, timeout=60.0, step=0.2)
        assert got, "no SM utilization reported for a job running matrix multiplies"
        share, sample = got
        print("busy job share:", share, "state:", sample["proc_util"], "cost:", sample["cost_ms"])
        assert sample["proc_util"]["state"] == "on"
        assert 0 < share["sm"] <= 100
    finally:
        probe.close()


def gputui(*args: str, timeout: float = 60.0) -> tuple[int, str, float]:
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "gputui", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - t0


def test_wait_after_clean_reports_ready(cuda_job):
    job = cuda_job(gib=2.0, gpu=0)
    rc, out, took = gputui("clean", "--pid", str(job.pid), "--yes")
    print(f"clean: rc {rc} in {took:.3f} s\n{out}")
    assert rc == 0, out
    job.proc.wait(5)
    rc, out, took = gputui("wait", "--settle", "1", "--timeout", "30", "--json")
    print(f"wait --settle 1: rc {rc} in {took:.3f} s\n{out}")
    assert rc == 0, out  # ready within its --timeout
    assert took >= 1.0  # not before the settle period (a lower bound: load only adds to it)
    rc, out, took = gputui("wait", "--timeout", "10")
    print(f"wait on ready GPUs: rc {rc} in {took:.3f} s")
    assert rc == 0, out

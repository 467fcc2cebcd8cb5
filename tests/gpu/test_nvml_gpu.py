"""The nvml reader and the probe against a real GPU and real CUDA jobs (GPU_FACTS.md scenarios)."""

import os
import signal
import time

from gputui.probe.core import Probe
from gputui.probe.readers.nvml import NvmlReader
from tests.support.cudajob import GIB, by_pid
from tests.support.waiting import wait_until


def test_reader_fields_on_a_real_gpu():
    probe = Probe(NvmlReader())
    hello = probe.start()
    try:
        assert hello["error"] is None and hello["host"]["driver_version"]
        gpu = probe.sample(full=True)["gpus"][0]
        for key in ("uuid", "name", "memory_total", "memory_used", "util_gpu", "temperature", "power_draw"):
            assert gpu[key] is not None, key
        assert gpu["uuid"].startswith("GPU-") and gpu["minor"] is not None
        assert os.path.exists(f"/dev/nvidia{gpu['minor']}")
    finally:
        probe.close()


def test_plain_job_is_a_user_on_its_gpu_and_memory_returns(cuda_job):
    probe = Probe(NvmlReader())
    probe.start()
    try:
        job = cuda_job(gib=2.0, gpu=0)
        sample = probe.sample(full=True)
        me = by_pid(sample)[job.pid]
        assert me["kind"] == "user" and me["gpus"] == [0]
        assert me["gpu_memory"]["0"] is None or me["gpu_memory"]["0"] >= 2 * GIB
        assert "/dev/nvidiactl" in me["holds"] and any(h.startswith("/dev/nvidia-uvm") for h in me["holds"])
        # The probe itself is an NVML client, so it holds the device files too: a protected monitor.
        assert by_pid(sample)[os.getpid()]["kind"] == "monitor"
        assert sample["gpus"][0]["memory_used"] >= 2 * GIB
        t0 = time.monotonic()
        os.kill(job.pid, signal.SIGTERM)
        job.proc.wait()
        clean = wait_until(
            lambda: Probe.gpu_is_idle(probe.read_gpus()[0][0]) and not probe.read_gpus()[1], 10.0, step=0.01
        )
        assert clean, "GPU 0 memory did not come back"
        print("released after %.3f s" % (time.monotonic() - t0))
    finally:
        probe.close()


def test_ghost_and_its_hidden_holder(cuda_job):
    """GPU_FACTS "Ghosts": kill a CUDA parent whose forked child inherited the fds."""
    probe = Probe(NvmlReader())
    probe.start()
    try:
        job = cuda_job(gib=2.0, gpu=0, fork=True)
        os.kill(job.pid, signal.SIGKILL)
        job.proc.wait()  # reaped: the PID no longer exists
        procs = by_pid(probe.sample(full=True))
        ghost, child = procs[job.pid], procs[job.child]
        assert ghost["kind"] == "ghost" and ghost["reason"] == "dead" and ghost["gpus"] == [0]
        assert child["kind"] == "hidden" and child["gpus"] == [0] and child["reason"] in ("pgid", "sid")
        assert job.child in ghost["links"]
        assert probe.read_gpus()[0][0]["memory_used"] >= 2 * GIB  # memory still held
        os.kill(job.child, signal.SIGKILL)
        assert wait_until(lambda: job.pid not in probe.read_gpus()[1], 10.0, step=0.01), "ghost still listed"
    finally:
        probe.close()


def test_one_call_process_lists_read_what_pynvml_reads(cuda_job):
    """probe/readers/nvml_lists.py against pynvml's own functions, on the real driver, with two CUDA
    jobs on GPU 0: the same processes, the same memory, every list read in one call."""
    import pynvml

    from gputui.probe.readers.nvml_lists import ProcessLists, entry_of

    jobs = [cuda_job(gib=1.0, gpu=0), cuda_job(gib=1.5, gpu=0)]
    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        lists = ProcessLists(pynvml)
        assert lists.direct == 3
        ours = lists.read(handle)
        theirs = [
            sorted(entry_of(p) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)),
            sorted(entry_of(p) for p in pynvml.nvmlDeviceGetGraphicsRunningProcesses(handle)),
            sorted(entry_of(p) for p in pynvml.nvmlDeviceGetMPSComputeRunningProcesses(handle)),
        ]
        assert [sorted(entries) for entries, _mps in ours] == theirs
        assert [mps for _entries, mps in ours] == [False, False, True]
        compute = {pid: used for pid, used, _gi, _ci in ours[0][0]}
        for job in jobs:
            assert job.pid in compute
            assert compute[job.pid] is None or compute[job.pid] >= GIB
    finally:
        pynvml.nvmlShutdown()

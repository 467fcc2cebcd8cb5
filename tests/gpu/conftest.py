"""GPU tests: real NVML, real CUDA jobs (PyTorch). Skipped where there is no NVIDIA driver."""

import os
import signal
import subprocess
import sys
import time

import pytest


def _have_gpu() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
        return count > 0
    except Exception:
        return False


HAVE_GPU = _have_gpu()


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/gpu/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.gpu)
            if not HAVE_GPU:
                item.add_marker(pytest.mark.skip(reason="no NVIDIA driver or GPU here"))


# A CUDA job: allocates GiB on one GPU, optionally forks a child that inherits the CUDA fds (a
# data-loader worker) and prints its pid; then waits on stdin.
JOB = r"""
import os, sys, signal
import torch
gib, gpu, fork, ignore = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "fork", sys.argv[4] == "ignore"
if ignore:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
x = torch.empty(int(gib * (1 << 30)), dtype=torch.uint8, device=f"cuda:{gpu}")
torch.cuda.synchronize()
child = 0
if fork:
    child = os.fork()
    if child == 0:
        sys.stdin.readline()   # the worker: no CUDA calls of its own, just holds the inherited fds
        os._exit(0)
print(os.getpid(), child, flush=True)
sys.stdin.readline()
"""


class CudaJob:
    def __init__(self, gib=1.0, gpu=0, fork=False, ignore_term=False):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", JOB, str(gib), str(gpu), "fork" if fork else "-", "ignore" if ignore_term else "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own group and session, like a job started from a shell
        )
        line = self.proc.stdout.readline().split()
        self.pid, self.child = int(line[0]), int(line[1])

    def stop(self):
        for pid in (self.child, self.pid):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.proc.wait()
        if self.child:
            deadline = time.monotonic() + 5
            while os.path.exists(f"/proc/{self.child}") and time.monotonic() < deadline:
                time.sleep(0.01)


@pytest.fixture
def cuda_job():
    jobs = []

    def start(**kw):
        job = CudaJob(**kw)
        jobs.append(job)
        return job

    yield start
    for job in jobs:
        job.stop()

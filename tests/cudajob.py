"""A real CUDA job, for everything that needs one: tests/gpu, bench/, scripts/real_gpu_check.py.

PyTorch allocates `gib` GiB on one GPU. With `fork`, the job then forks a child that makes no CUDA
call of its own and only holds the inherited device fds and context (a data-loader worker: once the
parent dies, NVML lists a dead PID while the child keeps the memory, docs/GPU_FACTS.md). With
`ignore_term`, SIGTERM is ignored. The job prints its PID and its child's (0 without one) and waits
on stdin. It runs in its own session, like a job started from a shell. Only the processes it
started are ever signalled, by PID. Needs PyTorch and a GPU: without them, RuntimeError.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

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
    def __init__(self, gib: float = 1.0, gpu: int = 0, fork: bool = False, ignore_term: bool = False) -> None:
        argv = [str(gib), str(gpu), "fork" if fork else "-", "ignore" if ignore_term else "-"]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", JOB, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        if len(line) != 2:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("the CUDA job did not start (is PyTorch with CUDA installed?)")
        self.pid, self.child = int(line[0]), int(line[1])

    def kill_parent(self) -> None:
        """SIGKILL the job and reap it: with `fork`, its child now holds the memory (the ghost)."""
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        """SIGKILL whatever of the job and its child is left, and wait until both are gone."""
        for pid in (self.child, self.pid):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.proc.wait()
        if self.child:  # not our child to reap (its parent is the job): wait for it to vanish
            deadline = time.monotonic() + 5
            while os.path.exists(f"/proc/{self.child}") and time.monotonic() < deadline:
                time.sleep(0.01)

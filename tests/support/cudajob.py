"""A real CUDA job, for everything that needs one: tests/gpu, bench/, scripts/real_gpu_check.py.

PyTorch allocates `gib` GiB on one GPU. With `fork`, the job then forks a child that makes no CUDA
call of its own and only holds the inherited device fds and context (a data-loader worker: once the
parent dies, NVML lists a dead PID while the child keeps the memory, docs/GPU_FACTS.md); `workers=N`
forks N such children (a launcher's workers, in its process group, the parent living on). With
`ignore_term`, SIGTERM is ignored; with `busy`, a thread runs matrix multiplies until the job ends
(not with `fork`: a forked child of a threaded CUDA process must make no CUDA call). The job prints its PID and its children's and waits on stdin (so
do the children: when the test's end of the pipe closes, every one of them exits). It runs in its own session, like a job started from a shell. Only the processes it
started are ever signalled, by PID. Needs PyTorch and a GPU: without them, RuntimeError.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from typing import Any

JOB = r"""
import os, sys, signal
import torch
gib, gpu, workers, ignore = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "ignore"
busy = sys.argv[5] == "busy"
if ignore:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
x = torch.empty(int(gib * (1 << 30)), dtype=torch.uint8, device=f"cuda:{gpu}")
torch.cuda.synchronize()
if busy:  # matrix multiplies on a thread of their own, until the job ends
    import threading
    def compute():
        a = torch.randn(4096, 4096, device=f"cuda:{gpu}")
        while True:
            a = (a @ a).clamp_(-1, 1)
            torch.cuda.synchronize()
    threading.Thread(target=compute, daemon=True).start()
children = []
for _ in range(workers):
    child = os.fork()
    if child == 0:
        sys.stdin.readline()   # a worker: no CUDA calls of its own, just holds the inherited fds
        os._exit(0)
    children.append(child)
print(os.getpid(), *children, flush=True)
sys.stdin.readline()
"""


class CudaJob:
    def __init__(
        self,
        gib: float = 1.0,
        gpu: int = 0,
        fork: bool = False,
        ignore_term: bool = False,
        workers: int = 0,
        busy: bool = False,
    ) -> None:
        count = workers or (1 if fork else 0)
        argv = [str(gib), str(gpu), str(count), "ignore" if ignore_term else "-", "busy" if busy else "-"]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", JOB, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        if len(line) != 1 + count:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("the CUDA job did not start (is PyTorch with CUDA installed?)")
        self.pid = int(line[0])
        self.workers = [int(w) for w in line[1:]]
        self.child = self.workers[0] if self.workers else 0
        # Read while the job (our child) is alive and its workers wait on stdin: their identity.
        self.starts = {pid: _start_time(pid) for pid in self.workers}

    def kill_parent(self) -> None:
        """SIGKILL the job and reap it: with `fork`, its child now holds the memory (the ghost)."""
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        """End whatever of the job and its children is left, and wait until all are gone.

        The children are not ours: each is signalled through a pidfd, and only when the process the
        pidfd pins has the start time it had when the job started (a reused PID is never signalled);
        closing the job's stdin ends them too."""
        fds = []
        for pid in self.workers:
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            if _start_time(pid) == self.starts.get(pid):
                fds.append(fd)
            else:
                os.close(fd)
        for fd in fds:
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait()
        for fd in fds:  # wait until each has exited (a pidfd is readable then)
            select.select([fd], [], [], 5)
            os.close(fd)


def _start_time(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return int(raw[raw.rindex(b")") + 2 :].split()[19])


GIB = 1 << 30


def by_pid(sample: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """A probe's raw sample record: its processes by PID (where the tests look for their jobs)."""
    return {p["pid"]: p for p in sample["processes"]}

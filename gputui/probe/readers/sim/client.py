"""What a CUDA process does against the sim, callable in this process: open its device files, make a
context (allocate memory on a GPU), and read a process's start time.

These are the worker program's own functions (worker.py), compiled from its source and run here, so
the reader, the tests and the benchmarks make and read contexts exactly as the sim's jobs do; with
the two facts of the program the reader must agree with (the device files' size, the roles that
make contexts). Apart from the reader: a test process that plays a CUDA client needs these and
nothing of the reader.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

from typing import Any, Dict, List, Optional, Tuple  # noqa: F401  (used in type comments)

from .worker import WORKER_SOURCE


def _worker_functions():
    # type: () -> Dict[str, Any]
    """The worker's helpers (open_devices, create_context, start_time), run in this process."""
    namespace = {"__name__": "gputui_sim_worker"}  # type: Dict[str, Any]
    exec(compile(WORKER_SOURCE, "<gputui sim worker>", "exec"), namespace)
    return namespace


_WORKER = _worker_functions()
# What the worker program decides and the reader must agree with, owned by the program (it runs alone):
DEVICE_SIZE = _WORKER["DEVICE_SIZE"]  # type: int  # bytes of a device file (a CUDA process maps them)
CONTEXT_ROLES = _WORKER["CONTEXT_ROLES"]  # type: Tuple[str, ...]  # the roles that make contexts


def create_context(directory, gpu, nbytes, util=0):
    # type: (str, int, int, int) -> int
    """Allocate `nbytes` on `gpu` of the sim at `directory` for the calling process.

    Returns the fd that holds the memory: it is released once this fd is closed in every process
    that has a copy (a forked child keeps it). The caller should also hold the device files
    (`open_devices`), as a CUDA process does."""
    fd = _WORKER["create_context"](directory, gpu, nbytes, util)  # type: int
    return fd


def open_devices(directory):
    # type: (str) -> List[int]
    """Open every device file of the sim at `directory`, as an NVML client does; return the fds
    (the caller closes them)."""
    fds = _WORKER["open_devices"](directory, False)  # type: List[int]
    return fds


def start_time(pid):
    # type: (int) -> Optional[int]
    """Field 22 of /proc/PID/stat, or None when the process is gone."""
    started = _WORKER["start_time"](pid)  # type: Optional[int]
    return started

"""NVML's running-process lists (compute, graphics, MPS), one driver call a list.

pynvml asks the driver twice for a list that is not empty (once for its length, once for the
entries) and makes an object of every entry. Here a buffer kept between samples takes the whole list
in one call, grown when the driver says it is too small, and only the four fields the probe uses are
read. Where pynvml lacks the _v3 functions or structures (older nvidia-ml-py), its own functions are
used; the answers are the same either way.

Stdlib + pynvml only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import ctypes
import functools
from typing import Any, Callable, List, Optional, Tuple  # noqa: F401  (type comments)

# pid, GPU memory in bytes (None: the driver does not say), GPU instance id, compute instance id
Entry = Tuple[int, Optional[int], Optional[int], Optional[int]]

# (the C function, pynvml's function for the same list, whether it is the MPS list)
LISTS = (
    ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses", False),
    ("nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses", False),
    ("nvmlDeviceGetMPSComputeRunningProcesses_v3", "nvmlDeviceGetMPSComputeRunningProcesses", True),
)
FIELDS = {"pid", "usedGpuMemory", "gpuInstanceId", "computeInstanceId"}  # read from each entry
NOT_AVAILABLE = 2**64 - 1  # NVML_VALUE_NOT_AVAILABLE_ulonglong: no figure (WDDM on Windows)
FIRST_CAPACITY = 64  # entries: more processes on one GPU than that is rare; the buffer grows then


class ProcessLists(object):
    """`read(handle)`: (the entries, whether the list is the MPS one) for each list the driver
    answered; a list it refuses (not supported, the GPU lost) is left out, as pynvml's error was."""

    def __init__(self, nv, one_call=True):
        # type: (Any, bool) -> None
        """`one_call=False`: every list through pynvml's functions (bench/sample_cost.py's baseline)."""
        self._nv = nv
        struct = getattr(nv, "c_nvmlProcessInfo_v3_t", None) if one_call else None  # type: Any
        fields = set(f[0] for f in getattr(struct, "_fields_", ()))
        self._struct = struct if fields >= FIELDS else None
        resolve = getattr(nv, "_nvmlGetFunctionPointer", None)
        # Each list in LISTS' order: (how to read it, whether it is the MPS list).
        self._lists = []  # type: List[Tuple[Callable[[Any], Optional[List[Entry]]], bool]]
        self.direct = 0  # how many are read in one call (the rest through pynvml's functions)
        for c_name, py_name, mps in LISTS:
            fn = None
            if self._struct is not None and resolve is not None:
                try:
                    fn = resolve(c_name)
                except Exception:  # NVMLError(FUNCTION_NOT_FOUND) on an older driver: pynvml's way
                    fn = None
            if fn is not None:
                self._lists.append((functools.partial(self._one_call, fn), mps))
                self.direct += 1
            elif getattr(nv, py_name, None) is not None:
                self._lists.append((functools.partial(self._through_pynvml, getattr(nv, py_name)), mps))
        self._capacity = 0
        self._buffer = None  # type: Any
        self._grow(FIRST_CAPACITY)

    def _grow(self, capacity):
        # type: (int) -> None
        if self._struct is not None and capacity > self._capacity:
            self._capacity = capacity
            self._buffer = (self._struct * capacity)()

    def read(self, handle):
        # type: (Any) -> List[Tuple[List[Entry], bool]]
        lists = []  # type: List[Tuple[List[Entry], bool]]
        for read_list, mps in self._lists:
            entries = read_list(handle)
            if entries is not None:
                lists.append((entries, mps))
        return lists

    def _through_pynvml(self, query, handle):
        # type: (Any, Any) -> Optional[List[Entry]]
        try:
            return [entry_of(p) for p in query(handle)]
        except self._nv.NVMLError:
            return None

    def _one_call(self, fn, handle):
        # type: (Any, Any) -> Optional[List[Entry]]
        nv = self._nv
        for _ in range(3):
            count = ctypes.c_uint(self._capacity)
            ret = fn(handle, ctypes.byref(count), self._buffer)
            if ret != nv.NVML_ERROR_INSUFFICIENT_SIZE:
                break
            # More processes than the buffer holds: room for them and a few that may start meanwhile.
            self._grow(count.value * 2 + 5)
        if ret != nv.NVML_SUCCESS:
            return None  # refused, or still growing after three tries: left out this sample
        buffer = self._buffer
        entries = []  # type: List[Entry]
        for i in range(min(count.value, self._capacity)):
            p = buffer[i]
            used = p.usedGpuMemory
            entries.append(
                (p.pid, None if used == NOT_AVAILABLE else used, p.gpuInstanceId, p.computeInstanceId)
            )
        return entries


def entry_of(p):
    # type: (Any) -> Entry
    """An entry from pynvml's object of one process (its older structures have no MIG ids)."""
    return (p.pid, p.usedGpuMemory, getattr(p, "gpuInstanceId", None), getattr(p, "computeInstanceId", None))

"""NVML's process lists in one driver call each (probe/readers/nvml_lists.py), against a driver
stand-in called through ctypes as the real one is: the C signature, a caller's buffer, a count in and
out. tests/gpu/test_nvml_gpu.py holds the same reads equal to pynvml's on a real GPU."""

from __future__ import annotations

import ctypes
import types
from typing import Any

import pynvml

from gputui.probe.readers.nvml_lists import FIELDS, NOT_AVAILABLE, ProcessLists, entry_of

SUCCESS, NOT_SUPPORTED, INSUFFICIENT_SIZE = 0, 3, 7


class Info(ctypes.Structure):  # nvml.h nvmlProcessInfo_v3_t
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


SIGNATURE = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(Info)
)


class Driver:
    """Each list's rows by GPU handle, answered the way nvml.h says: a count too small for the list is
    INSUFFICIENT_SIZE with the count needed; `refuse`: lists answered NOT_SUPPORTED."""

    def __init__(
        self, rows: dict[str, list[tuple[int, int, int, int]]], refuse: tuple[str, ...] = ()
    ) -> None:
        self.rows, self.refuse = rows, refuse
        self.calls: dict[str, int] = {}
        self.keep: list[Any] = []

    def function(self, name: str) -> Any:
        key = name.split("Get")[1].split("Running")[0].split("Compute")[0].lower() or "compute"

        def answer(handle: int, count: Any, infos: Any) -> int:
            self.calls[key] = self.calls.get(key, 0) + 1
            if key in self.refuse:
                return NOT_SUPPORTED
            rows = self.rows.get(key, [])
            if count[0] < len(rows) or (rows and not infos):
                count[0] = len(rows)
                return INSUFFICIENT_SIZE
            for i, (pid, used, gi, ci) in enumerate(rows):
                infos[i].pid, infos[i].usedGpuMemory = pid, used
                infos[i].gpuInstanceId, infos[i].computeInstanceId = gi, ci
            count[0] = len(rows)
            return SUCCESS

        fn = SIGNATURE(answer)
        self.keep.append(fn)  # a ctypes callback must outlive its calls
        return fn

    def pynvml(self, with_v3: bool = True) -> types.SimpleNamespace:
        def listing(key: str):
            def query(handle: int) -> list[types.SimpleNamespace]:
                if key in self.refuse:
                    raise NVMLError(NOT_SUPPORTED)
                return [
                    types.SimpleNamespace(
                        pid=p,
                        usedGpuMemory=None if u == NOT_AVAILABLE else u,
                        gpuInstanceId=g,
                        computeInstanceId=c,
                    )
                    for p, u, g, c in self.rows.get(key, [])
                ]

            return query

        nv = types.SimpleNamespace(
            NVMLError=NVMLError,
            NVML_SUCCESS=SUCCESS,
            NVML_ERROR_INSUFFICIENT_SIZE=INSUFFICIENT_SIZE,
            nvmlDeviceGetComputeRunningProcesses=listing("compute"),
            nvmlDeviceGetGraphicsRunningProcesses=listing("graphics"),
            nvmlDeviceGetMPSComputeRunningProcesses=listing("mps"),
        )
        if with_v3:
            nv.c_nvmlProcessInfo_v3_t = Info
            nv._nvmlGetFunctionPointer = self.function
        return nv


GIB = 1 << 30
ROWS = {
    "compute": [(4100, 4 * GIB, 0xFFFFFFFF, 0xFFFFFFFF), (4200, NOT_AVAILABLE, 1, 0)],
    "graphics": [(4300, GIB, 0xFFFFFFFF, 0xFFFFFFFF)],
    "mps": [],
}
EXPECTED = [
    ([(4100, 4 * GIB, 0xFFFFFFFF, 0xFFFFFFFF), (4200, None, 1, 0)], False),
    ([(4300, GIB, 0xFFFFFFFF, 0xFFFFFFFF)], False),
    ([], True),
]


def test_each_list_is_read_in_one_call_with_what_pynvml_reads() -> None:
    driver = Driver(ROWS)
    lists = ProcessLists(driver.pynvml())
    assert lists.direct == 3
    assert lists.read(1) == EXPECTED
    assert driver.calls == {"compute": 1, "graphics": 1, "mps": 1}  # pynvml: 2 for each list not empty
    fallback = ProcessLists(driver.pynvml(with_v3=False))
    assert fallback.direct == 0 and fallback.read(1) == EXPECTED


def test_a_list_larger_than_the_buffer_grows_it_once() -> None:
    crowd = [(10_000 + i, GIB, 0xFFFFFFFF, 0xFFFFFFFF) for i in range(150)]
    driver = Driver({"compute": crowd})
    lists = ProcessLists(driver.pynvml())
    first = lists.read(1)[0][0]
    assert [e[0] for e in first] == [pid for pid, *_ in crowd]
    assert driver.calls["compute"] == 2  # too small once, then the whole list
    lists.read(1)
    assert driver.calls["compute"] == 3  # the grown buffer holds it in one call from then on


def test_a_list_the_driver_refuses_is_left_out_as_with_pynvml() -> None:
    driver = Driver(ROWS, refuse=("graphics",))
    direct = ProcessLists(driver.pynvml()).read(1)
    assert direct == [EXPECTED[0], EXPECTED[2]]
    assert ProcessLists(driver.pynvml(with_v3=False)).read(1) == direct


def test_a_function_the_library_lacks_is_read_through_pynvml() -> None:
    driver = Driver(ROWS)
    nv = driver.pynvml()

    def older_driver(name: str) -> Any:
        if "MPS" in name:
            raise NVMLError(13)  # NVML_ERROR_FUNCTION_NOT_FOUND
        return driver.function(name)

    nv._nvmlGetFunctionPointer = older_driver
    lists = ProcessLists(nv)
    assert lists.direct == 2
    assert sorted(lists.read(1), key=lambda x: x[1]) == EXPECTED


def test_the_installed_pynvml_has_the_structure_this_reads() -> None:
    # nvidia-ml-py's structure of one entry carries every field the one-call read takes; a release
    # that renamed one would send the reader through pynvml's functions instead (not wrong, slower).
    struct = pynvml.c_nvmlProcessInfo_v3_t
    assert {f[0] for f in struct._fields_} >= FIELDS
    assert entry_of(types.SimpleNamespace(pid=1, usedGpuMemory=None)) == (1, None, None, None)

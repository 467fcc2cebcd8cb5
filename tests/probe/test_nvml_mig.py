"""MIG and MPS in the NVML reader, on a fake pynvml (tests/probe/test_nvml_reader.py's, extended).

MIG: a GPU in MIG mode lists its instances (nvmlDeviceGetMaxMigDeviceCount slots, an empty slot
answers NOT_FOUND), each with its GPU and compute instance ids, UUID and memory; processes carry
the instance they run in (gpuInstanceId / computeInstanceId, 0xFFFFFFFF for none). MIG off, a GPU
or pynvml without MIG, and errors on the way are null, never an exception. MPS: what NVML lists
through nvmlDeviceGetMPSComputeRunningProcesses is an MPS client.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from gputui.probe.core import Probe
from gputui.probe.readers import nvml as nvml_reader
from gputui.probe.readers.nvml import NvmlReader
from tests.support.fakenvml import NVMLError, fake_pynvml, load

GiB = 1 << 30
NONE = 0xFFFFFFFF
NOT_FOUND, NOT_SUPPORTED = 6, 3


@pytest.fixture
def use(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(nv: Any) -> NvmlReader:
        monkeypatch.setitem(sys.modules, "pynvml", nv)
        return NvmlReader()

    return install


def ns(**kw: Any) -> types.SimpleNamespace:
    return types.SimpleNamespace(**kw)


def with_mig(
    nv: Any, gpu: int = 0, slots: int = 7, instances: dict[int, dict[str, Any]] | None = None
) -> Any:
    """GPU `gpu` in MIG mode with `instances` by slot ({slot: {gi, ci, uuid, name, total, used}});
    the other GPUs answer MIG mode disabled. A MIG handle is ("mig", gpu, slot)."""
    instances = instances if instances is not None else {}
    nv.NVML_ERROR_NOT_FOUND = NOT_FOUND
    calls: dict[str, int] = {}

    def count(name: str) -> None:
        calls[name] = calls.get(name, 0) + 1

    def mig_mode(handle: Any) -> list[int]:
        count("mode")
        return [1, 1] if handle == gpu else [0, 0]

    def max_count(handle: Any) -> int:
        return slots

    def by_index(handle: Any, slot: int) -> Any:
        count("handle")
        if handle != gpu or slot not in instances:
            raise NVMLError(NOT_FOUND)
        return ("mig", handle, slot)

    def field(key: str) -> Any:
        def fn(handle: Any) -> Any:
            value = instances[handle[2]][key]
            if isinstance(value, Exception):
                raise value
            return value

        return fn

    parent_memory, parent_uuid, parent_name = (
        nv.nvmlDeviceGetMemoryInfo,
        nv.nvmlDeviceGetUUID,
        nv.nvmlDeviceGetName,
    )

    def memory(handle: Any, version: Any = None) -> Any:
        if isinstance(handle, tuple):
            count("memory")
            inst = instances.get(handle[2])
            if inst is None:
                raise NVMLError(NOT_FOUND)
            return ns(total=inst["total"], used=inst["used"], reserved=0, free=inst["total"] - inst["used"])
        return parent_memory(handle, version) if version else parent_memory(handle)

    nv.nvmlDeviceGetMigMode = mig_mode
    nv.nvmlDeviceGetMaxMigDeviceCount = max_count
    nv.nvmlDeviceGetMigDeviceHandleByIndex = by_index
    nv.nvmlDeviceGetGpuInstanceId = field("gi")
    nv.nvmlDeviceGetComputeInstanceId = field("ci")
    nv.nvmlDeviceGetMemoryInfo = memory
    nv.nvmlDeviceGetUUID = lambda h: field("uuid")(h) if isinstance(h, tuple) else parent_uuid(h)
    nv.nvmlDeviceGetName = lambda h: field("name")(h) if isinstance(h, tuple) else parent_name(h)
    nv.calls = calls
    return nv


def instance(gi: int, ci: Any, used: int, total: int = 35 * GiB) -> dict[str, Any]:
    return {
        "gi": gi,
        "ci": ci,
        "uuid": f"MIG-{gi:08d}-0000-0000-0000-00000000000{ci if ci != NONE else 9}",
        "name": b"NVIDIA H200 MIG 2g.35gb",
        "total": total,
        "used": used,
    }


def procs(rec: dict[str, Any], gpu: int, key: str, rows: list[dict[str, Any]]) -> None:
    rec["gpus"][gpu][key] = rows


def test_mig_on_lists_its_instances_and_where_each_process_runs(use: Any) -> None:
    rec = load("nvml_h200x2_idle.json")
    procs(
        rec,
        0,
        "compute",
        [
            {"pid": 501, "usedGpuMemory": 8 * GiB, "gpuInstanceId": 1, "computeInstanceId": 0},
            {"pid": 502, "usedGpuMemory": None, "gpuInstanceId": 2, "computeInstanceId": NONE},
        ],
    )
    # GPU 1 is not in MIG mode: its ids mean nothing, even a 0 a driver might give.
    procs(rec, 1, "compute", [{"pid": 503, "usedGpuMemory": GiB, "gpuInstanceId": 0, "computeInstanceId": 0}])
    nv = with_mig(fake_pynvml(rec), instances={0: instance(1, 0, 8 * GiB), 3: instance(2, NONE, 2 * GiB)})
    reader = use(nv)
    reader.open()
    gpus, listed = reader.read()
    assert gpus[1]["mig_instances"] is None
    assert gpus[0]["mig_instances"] == [
        {
            "gi": 1,
            "ci": 0,
            "uuid": "MIG-00000001-0000-0000-0000-000000000000",
            "name": "NVIDIA H200 MIG 2g.35gb",
            "memory_total": 35 * GiB,
            "memory_used": 8 * GiB,
        },
        {
            "gi": 2,
            "ci": None,  # the driver's "none"
            "uuid": "MIG-00000002-0000-0000-0000-000000000009",
            "name": "NVIDIA H200 MIG 2g.35gb",
            "memory_total": 35 * GiB,
            "memory_used": 2 * GiB,
        },
    ]
    assert listed == {501: {0: 8 * GiB}, 502: {0: None}, 503: {1: GiB}}
    assert reader.process_tags() == {501: {"mig": [(0, 1, 0)]}, 502: {"mig": [(0, 2, None)]}}


def test_the_layout_is_read_again_now_and_then_memory_every_reading(use: Any) -> None:
    instances = {0: instance(1, 0, 0)}
    nv = with_mig(fake_pynvml(load("nvml_h200x2_idle.json")), instances=instances)
    reader = use(nv)
    reader.open()
    reader.read()
    handles = nv.calls["handle"]
    assert handles == 7  # every slot, once
    instances[0]["used"] = 5 * GiB
    instances[1] = instance(3, 0, GiB)  # created by the operator: seen at the next layout reading
    gpus, _ = reader.read()
    assert nv.calls["handle"] == handles and gpus[0]["mig_instances"][0]["memory_used"] == 5 * GiB
    assert len(gpus[0]["mig_instances"]) == 1
    for _ in range(nvml_reader.MIG_LAYOUT_EVERY):
        gpus, _ = reader.read()
    assert [i["gi"] for i in gpus[0]["mig_instances"]] == [1, 3]


def test_a_destroyed_instance_drops_out_and_the_layout_is_read_again(use: Any) -> None:
    instances = {0: instance(1, 0, 0), 1: instance(2, 0, 0)}
    nv = with_mig(fake_pynvml(load("nvml_h200x2_idle.json")), instances=instances)
    reader = use(nv)
    reader.open()
    assert len(reader.read()[0][0]["mig_instances"]) == 2
    del instances[1]
    assert [i["gi"] for i in reader.read()[0][0]["mig_instances"]] == [1]
    handles = nv.calls["handle"]
    assert [i["gi"] for i in reader.read()[0][0]["mig_instances"]] == [1]
    assert nv.calls["handle"] == handles + 7  # read again at once


def test_mig_unsupported_is_null_and_not_asked_again(use: Any) -> None:
    nv = fake_pynvml(load("nvml_h200x2_idle.json"))
    asked: list[Any] = []

    def unsupported(handle: Any) -> Any:
        asked.append(handle)
        raise NVMLError(NOT_SUPPORTED)

    nv.nvmlDeviceGetMigMode = unsupported
    reader = use(nv)
    reader.open()
    for _ in range(nvml_reader.MIG_LAYOUT_EVERY + 2):
        gpus, _ = reader.read()
    assert [g["mig_instances"] for g in gpus] == [None, None]
    assert asked == [0, 1]


def test_a_pynvml_without_mig_and_odd_answers_are_null_not_errors(use: Any) -> None:
    # No MIG functions at all (an old pynvml): null.
    reader = use(fake_pynvml(load("nvml_h200x2_idle.json")))
    reader.open()
    assert [g["mig_instances"] for g in reader.read()[0]] == [None, None]
    # MIG on, but the ids and the count cannot be read: the instance is listed without them.
    inst = instance(1, 0, 0)
    inst["gi"], inst["ci"] = NVMLError(NOT_SUPPORTED), NVMLError(NOT_SUPPORTED)
    nv = with_mig(fake_pynvml(load("nvml_h200x2_idle.json")), instances={0: inst})
    reader = use(nv)
    reader.open()
    assert reader.read()[0][0]["mig_instances"][0]["gi"] is None
    # A transient error reading the mode: null this time, asked again later.
    nv.nvmlDeviceGetMigMode = lambda h: (_ for _ in ()).throw(NVMLError(999))
    reader = use(nv)
    reader.open()
    assert reader.read()[0][0]["mig_instances"] is None
    assert 0 not in reader._mig_unsupported


def test_mps_clients_are_what_the_mps_list_names(use: Any) -> None:
    rec = load("nvml_h200x2_idle.json")
    server = {"pid": 700, "usedGpuMemory": 512 << 20, "gpuInstanceId": NONE, "computeInstanceId": NONE}
    client = {"pid": 701, "usedGpuMemory": 4 * GiB, "gpuInstanceId": NONE, "computeInstanceId": NONE}
    procs(rec, 0, "compute", [server, client])  # nvidia-smi's "C" and "M+C"
    procs(rec, 0, "mps", [client])
    reader = use(fake_pynvml(rec))
    reader.open()
    _, listed = reader.read()
    assert listed == {700: {0: 512 << 20}, 701: {0: 4 * GiB}}
    assert reader.process_tags() == {701: {"mps": True}}


def test_the_probe_puts_mig_and_mps_on_the_wire(use: Any) -> None:
    rec = load("nvml_h200x2_idle.json")
    me = __import__("os").getpid()  # a live process NVML "lists": the test's own
    procs(rec, 0, "compute", [{"pid": me, "usedGpuMemory": GiB, "gpuInstanceId": 1, "computeInstanceId": 0}])
    procs(rec, 0, "mps", [{"pid": me, "usedGpuMemory": GiB}])
    nv = with_mig(fake_pynvml(rec), instances={0: instance(1, 0, GiB)})
    probe = Probe(use(nv))
    probe.start()
    sample = probe.sample(full=True)
    assert sample["gpus"][0]["mig_instances"][0]["gi"] == 1 and sample["gpus"][1]["mig_instances"] is None
    [mine] = [p for p in sample["processes"] if p["pid"] == me]
    assert mine["mig"] == [{"gpu": 0, "gi": 1, "ci": 0}] and mine["mps"] == "client"
    others = [p for p in sample["processes"] if p["pid"] != me]
    assert all(p["mig"] == [] and p["mps"] is None for p in others)

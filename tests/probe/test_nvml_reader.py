"""NVML-to-record conversion, against values recorded on a real 2 x H200 machine (bench/record_nvml.py).

A fake `pynvml` module answers from the recording, so this runs without a GPU; tests/gpu runs the same
reader against the real driver.
"""

import sys
import types

import pytest

from gputui.probe.core import PROC_UTIL_S, Probe
from gputui.probe.readers.base import ReaderError
from gputui.probe.readers.nvml import NvmlReader
from tests.support.fakenvml import NVMLError, UtilBuffer, fake_pynvml, load


@pytest.fixture
def use(monkeypatch):
    def install(nv, **kwargs):
        monkeypatch.setitem(sys.modules, "pynvml", nv)
        return NvmlReader(**kwargs)

    return install


def test_idle_h200_records(use):
    reader = use(fake_pynvml(load("nvml_h200x2_idle.json")))
    facts = reader.open()
    assert facts == {
        "driver_version": "580.159.04",
        "nvml_version": "13.580.159.04",
        "cuda_driver_version": 13000,
    }
    gpus, listed = reader.read()
    assert listed == {}
    g = gpus[0]
    assert g["name"] == "NVIDIA H200" and g["uuid"].startswith("GPU-") and g["minor"] == 0
    assert g["memory_total"] == 150754820096  # 143,771 MiB (GPU_FACTS.md)
    assert (g["memory_used"], g["memory_reserved"], g["memory_version"]) == (0, 644939776, 2)
    assert g["power_limit"] == 700.0 and 50 < g["power_draw"] < 700
    assert g["persistence"] is True and g["error"] is None


def test_job_h200_lists_the_process_with_its_memory(use):
    rec = load("nvml_h200x2_job.json")
    reader = use(fake_pynvml(rec))
    reader.open()
    gpus, listed = reader.read()
    (pid,) = [p["pid"] for p in rec["gpus"][0]["compute"]]
    assert listed == {pid: {0: rec["gpus"][0]["compute"][0]["usedGpuMemory"]}}
    assert gpus[0]["memory_used"] > 3 << 30


def test_v1_only_driver_falls_back_and_probe_learns_the_baseline(use):
    rec = load("nvml_h200x2_idle.json")
    for g in rec["gpus"]:
        g["memory_v2"] = {"nvml_error": 3}  # not supported
    probe = Probe(use(fake_pynvml(rec)))
    probe.start()
    gpus, _ = probe.read_gpus()
    assert gpus[0]["memory_version"] == 1 and gpus[0]["memory_reserved"] is None
    # v1 counts the driver's reserve as used: the idle figure is learned while nothing is listed.
    assert gpus[0]["memory_baseline"] == 644939776 and Probe.gpu_is_idle(gpus[0])


def test_unsupported_fields_are_null_not_errors(use):
    rec = load("nvml_h200x2_idle.json")
    for key in ("temperature", "power", "power_limit", "util", "persistence", "minor"):
        rec["gpus"][1][key] = {"nvml_error": 3}
    reader = use(fake_pynvml(rec))
    reader.open()
    g = reader.read()[0][1]
    for key in ("temperature", "power_draw", "power_limit", "util_gpu", "util_mem", "persistence", "minor"):
        assert g[key] is None, key
    assert g["memory_total"] == 150754820096


def test_pci_bus_id_is_read_and_null_where_unsupported(use):
    """The GPU record's `pci_bus_id` (the label Prometheus exporters join on): nvmlDeviceGetPciInfo's
    busId (bytes in old bindings, str in new); null where the call fails or pynvml lacks it."""
    rec = load("nvml_h200x2_idle.json")
    nv = fake_pynvml(rec)
    answers = {0: b"00000000:18:00.0", 1: NVMLError(3)}

    def pci_info(handle):
        answer = answers[int(handle)]
        if isinstance(answer, Exception):
            raise answer
        return types.SimpleNamespace(busId=answer)

    nv.nvmlDeviceGetPciInfo = pci_info
    reader = use(nv)
    reader.open()
    gpus, _ = reader.read()
    assert [g["pci_bus_id"] for g in gpus] == ["00000000:18:00.0", None]
    reader = use(fake_pynvml(rec))  # a pynvml without the call
    reader.open()
    assert [g["pci_bus_id"] for g in reader.read()[0]] == [None, None]


def test_lost_gpu_is_marked_not_raised(use):
    reader = use(fake_pynvml(load("nvml_h200x2_idle.json"), lost={1}))
    reader.open()
    gpus, _ = reader.read()
    assert gpus[0]["error"] is None and gpus[1]["error"] == "gpu-lost" and gpus[1]["memory_used"] is None


@pytest.mark.parametrize(("code", "expected"), [(12, "no-driver"), (9, "no-driver"), (4, "no-permission")])
def test_init_failures_become_reader_errors(use, code, expected):
    reader = use(fake_pynvml(load("nvml_h200x2_idle.json"), init_error=code))
    with pytest.raises(ReaderError) as err:
        reader.open()
    assert err.value.code == expected


def test_missing_library(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    with pytest.raises(ReaderError) as err:
        NvmlReader().open()
    assert err.value.code == "no-library"


def test_probe_without_driver_still_streams_holders(use):
    probe = Probe(use(fake_pynvml(load("nvml_h200x2_idle.json"), init_error=9)))
    hello = probe.start()
    assert hello["error"]["code"] == "no-driver"
    sample = probe.sample()
    assert sample["gpus"] == [] and isinstance(sample["processes"], list)


NOW = 1_700_000_000.0  # the reader's clock in these tests (Unix seconds)


def test_process_utilization_is_averaged_since_the_last_reading(use):
    """nvmlDeviceGetProcessUtilization returns the driver's samples newer than a timestamp; the
    reader averages each process's since its last call, asks from the newest it saw, and treats
    NOT_FOUND (no sample since) as "nothing ran" and NOT_SUPPORTED as final for that GPU."""
    nv = fake_pynvml(load("nvml_h200x2_job.json"))
    buffer = UtilBuffer().install(nv)
    buffer.add(0, 7, NOW - 3, sm=90, mem=40)
    buffer.add(0, 7, NOW - 1, sm=70, mem=20, dec=4294967295)
    buffer.add(0, 9, NOW - 2, sm=10, mem=5, enc=3, dec=1)
    unsupported = buffer.query

    def query(handle, since):
        if handle == 1:
            buffer.asked.append((handle, since))
            raise NVMLError(3)
        return unsupported(handle, since)

    nv.nvmlDeviceGetProcessUtilization = query
    reader = use(nv, clock=lambda: NOW)
    reader.open()
    first = reader.process_utilization(5.0)
    assert first == {
        7: {0: {"sm": 80, "mem": 30, "enc": 0, "dec": 0}},  # the "not available" marker counts as 0
        9: {0: {"sm": 10, "mem": 5, "enc": 3, "dec": 1}},
    }
    assert reader.process_utilization(5.0) == {}  # nothing newer on GPU 0; GPU 1 not asked again
    since = int((NOW - 5) * 1e6)
    assert buffer.asked == [(0, since), (1, since), (0, int((NOW - 1) * 1e6))]


def test_the_first_reading_covers_the_last_interval_not_the_whole_buffer(use):
    """A process whose one start-up kernel ran a minute before the probe started is at 0 % in the
    first reading (it was 1 % SM on a real H100 when the first call asked from timestamp 0 and got
    the driver's whole buffer); one busy during the last interval is not."""
    nv = fake_pynvml(load("nvml_h200x2_job.json"))
    buffer = UtilBuffer().install(nv)
    buffer.add(0, 7, NOW - 60, sm=1, mem=0)  # its start-up kernel, long before
    for age in (4, 3, 2, 1):
        buffer.add(0, 9, NOW - age, sm=95, mem=50)
    reader = use(nv, clock=lambda: NOW)
    reader.open()
    assert reader.process_utilization(5.0) == {9: {0: {"sm": 95, "mem": 50, "enc": 0, "dec": 0}}}
    assert all(since > 0 for _gpu, since in buffer.asked)


def test_the_probe_bounds_the_first_reading_to_its_reading_period(use):
    """Through the probe: per-process utilization is read every PROC_UTIL_S seconds (5 samples at
    1 s), and the first reading covers that period. PID 610 holds GPU 0 in the recording; its only
    kernel ran before the probe started: its record has no utilization share (nothing ran)."""
    nv = fake_pynvml(load("nvml_h200x2_job.json"))
    buffer = UtilBuffer().install(nv)
    buffer.add(0, 610, NOW - 60, sm=1)
    probe = Probe(use(nv, clock=lambda: NOW))
    probe.start()
    sample = probe.sample()
    [record] = [r for r in sample["processes"] if r["pid"] == 610]
    assert record["gpu_util"] is None
    assert buffer.asked[0] == (0, int((NOW - PROC_UTIL_S) * 1e6))
    buffer.add(0, 610, NOW + 1, sm=60, mem=10)  # it runs now: the next reading shows it
    for _ in range(4):
        probe.sample()
    sample = probe.sample()
    [record] = [r for r in sample["processes"] if r["pid"] == 610]
    assert record["gpu_util"] == {"0": {"sm": 60, "mem": 10, "enc": 0, "dec": 0}}


def test_process_utilization_unsupported_everywhere_is_none(use):
    nv = fake_pynvml(load("nvml_h200x2_idle.json"))
    reader = use(nv)
    reader.open()
    assert reader.process_utilization() is None  # this pynvml has no such query
    nv.NVML_ERROR_NOT_FOUND = 6

    def unsupported(handle, since):
        raise NVMLError(3)

    nv.nvmlDeviceGetProcessUtilization = unsupported
    assert reader.process_utilization() is None


def test_per_process_utilization_is_read_only_where_processes_are_listed(use):
    """Through the probe: a GPU where NVML lists no process has nobody to give a share to, and the
    query costs 1.8 ms a GPU on an H100: only GPU 0 (PID 610 holds it in the recording) is asked;
    GPU 1, idle, never is."""
    nv = fake_pynvml(load("nvml_h200x2_job.json"))
    buffer = UtilBuffer().install(nv)
    buffer.add(0, 610, NOW - 1, sm=40)
    buffer.add(1, 999, NOW - 1, sm=10)  # a process that has gone from GPU 1
    probe = Probe(use(nv, clock=lambda: NOW))
    probe.start()
    first = probe.sample()
    [record] = [r for r in first["processes"] if r["pid"] == 610]
    assert record["gpu_util"] == {"0": {"sm": 40, "mem": 0, "enc": 0, "dec": 0}}
    for _ in range(2 * int(PROC_UTIL_S)):
        sample = probe.sample()
    assert [gpu for gpu, _since in buffer.asked] == [0, 0, 0]  # at seq 0, 5 and 10
    assert sample["proc_util"]["state"] == "on"

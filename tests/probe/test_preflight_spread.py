"""A preflight reading spread over samples (core.Probe.read_preflight), and the NVML reader's steps:
what cannot change while the driver runs is read once (readers/nvml.py preflight_steps)."""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any

import pytest

from gputui.probe.core import PREFLIGHT_SLICE_S
from gputui.probe.readers.nvml import NvmlReader
from gputui.probe.readers.sim.gpus import preflight_record
from tests.support.fakenvml import NVMLError, fake_pynvml, load

NOT_SUPPORTED = 3


def counting_nvml(calls: Counter[str]) -> Any:
    """The recorded H200 pair, with the preflight's queries answered and counted by name; NVLink not
    supported (as on a PCIe card), so each of its 18 links answers NOT_SUPPORTED."""
    nv = fake_pynvml(load("nvml_h200x2_idle.json"))
    answers = {
        "nvmlDeviceGetClockInfo": 1980,
        "nvmlDeviceGetMaxClockInfo": 1980,
        "nvmlDeviceGetApplicationsClock": 1980,
        "nvmlDeviceGetDefaultApplicationsClock": 1980,
        "nvmlDeviceGetPowerManagementDefaultLimit": 700000,
        "nvmlDeviceGetMaxPcieLinkGeneration": 5,
        "nvmlDeviceGetMaxPcieLinkWidth": 16,
        "nvmlDeviceGetCurrPcieLinkGeneration": 5,
        "nvmlDeviceGetCurrPcieLinkWidth": 16,
        "nvmlDeviceGetComputeMode": 0,
        "nvmlDeviceGetMigMode": (0, 0),
        "nvmlDeviceGetCurrentClocksEventReasons": 0,
        "nvmlDeviceGetTotalEccErrors": 0,
        "nvmlDeviceGetRemappedRows": (0, 0, 0, 0),
        "nvmlDeviceGetRetiredPagesPendingStatus": 0,
        "nvmlDeviceGetDisplayActive": 0,
    }

    def counted(name: str, value: Any) -> Any:
        def query(handle: int, *args: Any) -> Any:
            calls[name] += 1
            return value

        return query

    for name, value in answers.items():
        setattr(nv, name, counted(name, value))

    def no_nvlink(handle: int, link: int) -> Any:
        calls["nvmlDeviceGetNvLinkState"] += 1
        raise NVMLError(NOT_SUPPORTED)

    nv.nvmlDeviceGetNvLinkState = no_nvlink

    def no_fan(handle: int) -> Any:  # an SXM board: cooled by the chassis
        calls["nvmlDeviceGetFanSpeed"] += 1
        raise NVMLError(NOT_SUPPORTED)

    nv.nvmlDeviceGetFanSpeed = no_fan
    nv.NVML_ERROR_NOT_SUPPORTED = NOT_SUPPORTED
    nv.nvmlDeviceGetNvLinkRemotePciInfo_v2 = lambda handle, link: None
    return nv


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> tuple[NvmlReader, Counter[str]]:
    calls: Counter[str] = Counter()
    monkeypatch.setitem(sys.modules, "pynvml", counting_nvml(calls))
    reader = NvmlReader()
    reader.open()
    return reader, calls


def test_a_reading_has_the_fields_the_protocol_names(nvml: tuple[NvmlReader, Counter[str]]) -> None:
    reader, _ = nvml
    reading = reader.preflight()
    assert sorted(reading) == [0, 1]
    assert set(reading[0]) == set(preflight_record({}))  # the sim speaks the same vocabulary
    assert reading[0]["sm_clock_max"] == 1980 and reading[0]["power_default"] == 700.0
    assert reading[0]["mig"] is False and reading[0]["remap_failed"] is False
    assert reading[0]["nvlink_peers"] is None


def test_steps_merged_are_the_reading(nvml: tuple[NvmlReader, Counter[str]]) -> None:
    reader, _ = nvml
    merged: dict[int, dict[str, Any]] = {}
    for step in reader.preflight_steps():
        for index, fields in step().items():
            merged.setdefault(index, {}).update(fields)
    assert merged == reader.preflight()


def test_what_cannot_change_is_read_once(nvml: tuple[NvmlReader, Counter[str]]) -> None:
    reader, calls = nvml
    first = reader.preflight()
    once = Counter(calls)
    assert once["nvmlDeviceGetMaxClockInfo"] == 4  # SM and memory, 2 GPUs
    assert once["nvmlDeviceGetNvLinkState"] == 36  # 18 links, 2 GPUs: none supported
    assert once["nvmlDeviceGetFanSpeed"] == 2 and first[0]["fan"] is None
    calls.clear()
    assert reader.preflight() == first
    for steady in (
        "nvmlDeviceGetMaxClockInfo",
        "nvmlDeviceGetDefaultApplicationsClock",
        "nvmlDeviceGetPowerManagementDefaultLimit",
        "nvmlDeviceGetMaxPcieLinkGeneration",
        "nvmlDeviceGetMaxPcieLinkWidth",
        "nvmlDeviceGetNvLinkState",
        "nvmlDeviceGetFanSpeed",  # NOT_SUPPORTED once: a GPU does not grow a fan
    ):
        assert calls[steady] == 0, steady
    # What can change is asked every reading.
    assert calls["nvmlDeviceGetClockInfo"] == 4 and calls["nvmlDeviceGetTotalEccErrors"] == 4


def slow_steps(reader: Any, pause: float) -> None:
    """Make `reader` give its reading a field a step, each step longer than the probe's slice."""

    def steps() -> list[Any]:
        def step(index: int, key: str, value: Any) -> Any:
            def read() -> dict[int, dict[str, Any]]:
                time.sleep(pause)
                return {index: {key: value}}

            return read

        return [step(i, k, v) for i, fields in reader.preflight().items() for k, v in fields.items()]

    reader.preflight_steps = steps


def test_a_due_reading_is_spread_a_step_a_sample(sim_probe: Any) -> None:
    probe, reader = sim_probe(gpus=2)
    slow_steps(reader, pause=2 * PREFLIGHT_SLICE_S)  # each step alone outlasts the slice
    fields = len(preflight_record({}))
    steps = 2 * fields
    probe.preflight_every = 3
    first = probe.sample()
    assert all(g["preflight"] is not None for g in first["gpus"])  # the first sample: whole, at once
    carried = []
    for _ in range(3 + steps):
        sample = probe.sample()
        carried.append(any("preflight" in g for g in sample["gpus"]))
    # Due with seq 3 (the 3rd of these), read a step a sample, carried whole by the sample of its last step.
    assert carried.index(True) == 2 + steps - 1
    assert carried.count(True) == 1


def test_a_reading_asked_for_comes_whole_and_replaces_one_under_way(sim_probe: Any) -> None:
    probe, reader = sim_probe(gpus=2)
    slow_steps(reader, pause=2 * PREFLIGHT_SLICE_S)
    probe.preflight_every = 2
    probe.sample()
    probe.sample()
    under_way = probe.sample()  # seq 2: due, one step taken
    assert all("preflight" not in g for g in under_way["gpus"])
    asked = probe.sample(preflight=True)
    assert [set(g["preflight"]) for g in asked["gpus"]] == [set(preflight_record({}))] * 2
    after = probe.sample()  # seq 4: due again: a new reading starts, not the old one's rest
    assert all("preflight" not in g for g in after["gpus"])

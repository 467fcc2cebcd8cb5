"""A defect in a reading the sample can go without (the preflight, per-process utilization) leaves
that reading out and is said once on the wire; the probe goes on sampling (core.Faults). On the lent
H100 a TypeError in the preflight's cache ended the probe at its first sample, and every `clean`
with it."""

from __future__ import annotations

import io
import json
import sys
from typing import Any

import pytest

from gputui.probe.core import Probe
from gputui.probe.main import Loop, Output
from gputui.probe.readers.nvml import NvmlReader
from tests.support.fakenvml import fake_pynvml, load


def defect(*args: Any) -> Any:
    raise TypeError("unhashable type")


@pytest.fixture
def nv(monkeypatch: pytest.MonkeyPatch) -> Any:
    module = fake_pynvml(load("nvml_h200x2_idle.json"))
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


def test_a_defect_in_one_preflight_query_leaves_out_only_its_fields(nv: Any) -> None:
    nv.nvmlDeviceGetFanSpeed = defect
    probe = Probe(NvmlReader())
    probe.start()
    first = probe.sample()
    assert len(first["gpus"]) == 2
    for gpu in first["gpus"]:
        assert gpu["preflight"]["persistence"] is not None and gpu["preflight"].get("fan") is None
    [fault] = probe.faults.take()
    assert "preflight" in fault and "TypeError: unhashable type" in fault
    probe.sample(preflight=True)
    assert probe.faults.take() == []  # said once


def test_a_defect_in_per_process_utilization_turns_it_off(nv: Any) -> None:
    probe = Probe(NvmlReader())
    probe.start()
    probe.reader.process_utilization = defect  # type: ignore[method-assign]
    probe.proc_util_every = 1
    sample = probe.sample()
    assert sample["gpus"] and sample["proc_util"]["state"] == "unsupported"
    [fault] = probe.faults.take()
    assert fault.startswith("per-process utilization left out: TypeError")
    probe.sample()
    assert probe.faults.take() == []


def test_the_line_loop_says_a_fault_as_an_error_record_after_the_sample(nv: Any) -> None:
    nv.nvmlDeviceGetDisplayActive = defect
    probe = Probe(NvmlReader())
    probe.start()
    out = io.BytesIO()
    loop = Loop(probe, Output(out), 1.0)
    loop.send_sample()
    loop.send_sample()
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["type"] for r in records] == ["sample", "error", "sample"]
    assert records[1]["code"] == "reader-fault"
    assert records[1]["message"] == "the preflight reading left out: TypeError: unhashable type"

"""`gputui wait` reports the verdict as it was reached: how long each GPU had been ready at that
moment, not when the report is written (on a busy machine that is later: a GPU judged ready at once
read "ready for 0.002 s" in the JSON, and a GPU still settling at a timeout could pass the settle time
by the time its line was written, and lose its line)."""

from __future__ import annotations

import argparse
import io
import json

import pytest

from gputui.cli import wait
from gputui.cli.wait import GpuWait, _report
from gputui.model import MigPlace
from gputui.views.readiness import Unready

VERDICT = 1000.0  # the monotonic moment the verdict was reached


@pytest.fixture
def written_later(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wait.time, "monotonic", lambda: VERDICT + 0.5)  # the report comes 0.5 s on


def test_a_gpu_ready_at_once_is_ready_for_zero_seconds(written_later: None) -> None:
    out, err = io.StringIO(), io.StringIO()
    args = argparse.Namespace(json=True, settle=0.0)
    waits = {("demo-b", 3): GpuWait("demo-b", 3, ready_since=VERDICT)}
    _report(out, err, args, waits, VERDICT, 0.2, ready=True)
    doc = json.loads(out.getvalue())
    assert doc["hosts"] == [
        {"host": "demo-b", "gpus": {"3": {"ready": True, "ready_for_s": 0.0, "unready": []}}}
    ]


def test_a_gpu_still_settling_at_the_timeout_keeps_its_line(written_later: None) -> None:
    out, err = io.StringIO(), io.StringIO()
    args = argparse.Namespace(json=False, settle=2.0)
    waits = {("h", 0): GpuWait("h", 0, ready_since=VERDICT - 1.8)}
    _report(out, err, args, waits, VERDICT, 30.0, ready=False)
    assert "h GPU 0: ready for 1.8 s of 2" in err.getvalue()


def test_the_live_line_names_a_mig_instance_beside_its_gpu() -> None:
    # A MIG instance waited for alone is named by its place, after its GPU; each says what it waits for.
    place = MigPlace(0, 1, 0)
    waits: dict[wait.Key, GpuWait] = {
        ("mig", place): GpuWait(
            "mig", place, last=[Unready("processes", "used or held by 4121 (user: python train.py)")]
        ),
        ("mig", 0): GpuWait("mig", 0, ready_since=VERDICT - 1.0),
    }
    line = wait.live_text(waits, {}, VERDICT, 2.0, 200)
    assert line.startswith("1/2 ready"), line
    assert line.index("GPU 0 ready 1.0/2 s") < line.index("MIG 0:1.0 used or held by 4121"), line

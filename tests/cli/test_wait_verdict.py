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

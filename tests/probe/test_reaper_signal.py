"""A `signal` plan (issue 19, item 12): one signal by name, sent once to one process the probe has
identified (pid and start time, through its pidfd) and found not protected; no ladder, no
verification, what it did said in the verdict.

Sim jobs (started by the test's sim, which ends them) and a shell this test starts and reaps.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from gputui.probe.main import Loop
from gputui.probe.procfs import read_stat
from gputui.probe.readers.sim import GiB
from gputui.probe.run.signal_run import execute_signal
from tests.support.pythons import PYTHON38
from tests.support.simprobe import alive

REPO = Path(__file__).resolve().parents[2]


def record(pid: int, start: int, name: str, **changes: Any) -> dict[str, Any]:
    out = {
        "type": "signal",
        "v": 1,
        "id": "s-" + uuid.uuid4().hex[:8],
        "operator": "tester",
        "signal": name,
        "targets": [{"pid": pid, "start_time": start, "reason": "chosen in the detail", "gpus": []}],
    }
    out.update(changes)
    return out


def send(probe: Any, pid: int, start: int, name: str, **changes: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    execute_signal(probe, record(pid, start, name, **changes), events.append)
    return events


def state(pid: int) -> str:
    stat = read_stat(pid)
    assert stat is not None
    return stat.state


def test_sigstop_then_sigcont_once_each_and_nothing_else(sim_probe):
    probe, sim = sim_probe()
    job = sim.spawn("busy", gpu=0, memory=GiB)
    events = send(probe, job.pid, job.start_time, "SIGSTOP")
    assert [e["stage"] for e in events] == ["accepted", "check", "signal", "verdict", "done"]
    assert [e["signal"] for e in events if e["stage"] == "signal"] == ["SIGSTOP"]  # no SIGCONT after it
    done = events[-1]
    assert done["result"] == "signalled" and done["data"]["ok"] is True and done["data"]["scope"] == "signal"
    [verdict] = done["data"]["processes"]
    assert verdict["result"] == "signalled" and verdict["state"] == "T" and verdict["signals"] == ["SIGSTOP"]
    assert state(job.pid) == "T" and "now stopped, state T" in done["message"]
    events = send(probe, job.pid, job.start_time, "SIGCONT")
    assert events[-1]["result"] == "signalled" and state(job.pid) in ("R", "S")
    assert alive(job.pid, job.start_time)  # neither ended it
    json.dumps(events)


def test_sigterm_once_ends_a_job_that_handles_it(sim_probe):
    probe, sim = sim_probe()
    job = sim.spawn("busy", gpu=0, memory=GiB)
    events = send(probe, job.pid, job.start_time, "SIGTERM")
    assert events[-1]["result"] == "signalled"
    assert events[-1]["data"]["processes"][0]["result"] == "exited"
    assert not alive(job.pid, job.start_time)


def test_a_job_that_ignores_sigterm_is_not_killed_after_it(sim_probe):
    probe, sim = sim_probe()
    job = sim.spawn("ignore-term", gpu=0, memory=GiB)
    events = send(probe, job.pid, job.start_time, "SIGTERM")
    assert [e["signal"] for e in events if e["stage"] in ("signal", "escalate")] == ["SIGTERM"]
    assert events[-1]["data"]["processes"][0]["result"] == "signalled"
    assert alive(job.pid, job.start_time)


def test_protected_and_reused_processes_are_not_signalled(sim_probe):
    probe, sim = sim_probe()
    monitor = sim.spawn("monitor")
    shell = subprocess.Popen(["bash"], stdin=subprocess.PIPE)  # an interactive shell: a person's
    try:
        for pid, start in ((monitor.pid, monitor.start_time), (probe.pid, read_stat(probe.pid).start_time)):
            events = send(probe, pid, start, "SIGSTOP")
            assert events[-1]["result"] == "not-signalled" and events[-1]["data"]["ok"] is False
            assert events[-1]["data"]["processes"][0]["result"] == "protected"
            assert not [e for e in events if e["stage"] == "signal"]
        events = send(probe, shell.pid, read_stat(shell.pid).start_time, "SIGKILL")
        assert events[-1]["data"]["processes"][0]["result"] == "protected", events[-1]["message"]
        assert "session" in events[-1]["data"]["processes"][0]["why"]
        job = sim.spawn("busy", gpu=0, memory=GiB)
        events = send(probe, job.pid, job.start_time - 1, "SIGKILL")
        assert events[-1]["data"]["processes"][0]["result"] == "pid-reused"
        assert alive(job.pid, job.start_time) and alive(monitor.pid, monitor.start_time)
        assert state(shell.pid) != "Z"
    finally:
        shell.stdin.close()  # type: ignore[union-attr]
        shell.wait(timeout=10)


@pytest.mark.parametrize(
    "change, words",
    [
        ({"signal": "SIGFOO"}, "'signal' must be one of"),
        ({"signal": 9}, "'signal' must be one of"),
        ({"targets": []}, "exactly one target"),
        ({"targets": [{"pid": 5}]}, "start_time"),
        ({"id": ""}, "'id'"),
    ],
)
def test_a_malformed_signal_is_refused(sim_probe, change, words):
    probe, sim = sim_probe()
    job = sim.spawn("busy", gpu=0, memory=GiB)
    events = send(probe, job.pid, job.start_time, "SIGKILL", **change)
    assert [e["type"] for e in events] == ["error"] and words in events[0]["message"]
    assert alive(job.pid, job.start_time)


def test_a_read_only_probe_refuses_a_signal(sim_probe):
    probe, sim = sim_probe(read_only=True)
    job = sim.spawn("busy", gpu=0, memory=GiB)
    lines: list[dict[str, Any]] = []
    Loop(probe, lines.append, 1.0).handle(
        json.dumps(record(job.pid, job.start_time, "SIGKILL")).encode() + b"\n"
    )
    assert [(r["type"], r["code"]) for r in lines] == [("error", "read-only")]
    assert alive(job.pid, job.start_time)


PY38_RUNNER = """
import json, os
from gputui.probe.core import Probe
from gputui.probe.readers.sim import SimReader
from gputui.probe.run.signal_run import execute_signal

sim = SimReader(gpus=1, scenario="empty")
probe = Probe(sim)
probe.start()
out = []
try:
    job = sim.spawn("busy", gpu=0, memory=1 << 30)
    for name in ("SIGSTOP", "SIGCONT"):
        record = {"type": "signal", "v": 1, "id": "py38-" + name, "signal": name,
                  "targets": [{"pid": job.pid, "start_time": job.start_time}]}
        execute_signal(probe, record, out.append)
    out.append(probe.detail({"type": "detail", "v": 1, "id": "e", "pid": job.pid,
                             "start_time": job.start_time, "environ": True}))
finally:
    probe.close()
print(json.dumps(out))
"""


def test_signals_and_the_environment_on_python_38():
    """The probe runs on Python 3.8 hosts: no os.pidfd_open there, the raw syscalls instead."""
    if not PYTHON38.exists():
        pytest.skip("no Python 3.8 at " + str(PYTHON38))
    result = subprocess.run(
        [str(PYTHON38), "-c", PY38_RUNNER],
        env={"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    events = json.loads(result.stdout)
    dones = [e for e in events if e.get("stage") == "done"]
    assert dones[0]["result"] == "signalled" and dones[0]["data"]["processes"][0]["state"] == "T"
    assert dones[1]["result"] == "signalled" and dones[1]["data"]["processes"][0]["state"] in ("R", "S")
    assert events[0]["data"]["method"] in ("pidfd-syscall", "kill")
    assert any(e["name"] == "PATH" for e in events[-1]["environ"])

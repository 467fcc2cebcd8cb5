"""What one sample may carry: clipped fields, a bounded process count, and never a line over the limit.

A process with a megabyte of arguments that holds a GPU device file used to make every sample longer
than wire.MAX_LINE: the app dropped them all while the host stayed "live".
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gputui.probe import core
from gputui.probe.core import MAX_ARG, MAX_ARGS, clip_command, fit_line
from gputui.probe.wire import MAX_LINE, MAX_TEXT, clip_text, decode
from tests.support.probeproc import ProbeProcess

# Opens every device file of the sim whose prefix is argv[1] (as a CUDA process does), says so, and
# holds them until its stdin closes. The rest of argv is ballast.
HOLDER = """
import glob, os, sys
fds = [os.open(path, os.O_RDONLY) for path in glob.glob(sys.argv[1] + "*")]
sys.stdout.write("ready %d\\n" % len(fds))
sys.stdout.flush()
sys.stdin.read()
"""


class Holders:
    """Processes this test starts, each holding the sim's device files; closed and reaped at the end."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, prefix: str, ballast: list[str]) -> int:
        proc = subprocess.Popen(
            [sys.executable, "-S", "-c", HOLDER, prefix, *ballast],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.procs.append(proc)
        ready = proc.stdout.readline().split()
        assert ready[:1] == [b"ready"] and int(ready[1]) > 0, ready
        return proc.pid

    def close(self) -> None:
        for proc in self.procs:
            proc.stdin.close()  # it exits at EOF
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()  # this PID only: a holder we started
                proc.wait()


@pytest.fixture
def holders():
    made = Holders()
    yield made
    made.close()


def sample_line(probe: ProbeProcess) -> bytes:
    """Ask the running probe for a sample after a full scan; its raw line."""
    probe.send(b'{"type":"sample","v":1,"full":true}')
    while True:
        line = probe.proc.stdout.readline()
        assert line, probe.proc.stderr.read().decode(errors="replace")[-2000:]
        if b'"type":"sample"' in line[:40]:
            return line


def started_probe() -> tuple[ProbeProcess, str]:
    probe = ProbeProcess("--interval", "3600")
    hello = probe.read()
    assert hello["type"] == "hello"
    probe.read()  # the first sample
    return probe, hello["host"]["device_prefix"]


def test_a_megabyte_command_line_is_clipped_and_the_sample_still_arrives(holders):
    probe, prefix = started_probe()
    try:
        # 200 arguments of 6,000 bytes (a single argument may not pass 128 KiB on Linux): 1.2 MB.
        ballast = [f"--opt{i}=" + "x" * 6000 for i in range(200)]
        pid = holders.start(prefix, ballast)
        line = sample_line(probe)
        assert len(line) - 1 <= MAX_LINE
        record, err = decode(line, ("sample",))
        assert err is None, err
        proc = next(p for p in record["processes"] if p["pid"] == pid)
        assert proc["kind"] == "hidden" and any(h.startswith(prefix) for h in proc["holds"])
        command = proc["command"]
        assert command[:3] == [sys.executable, "-S", "-c"]
        assert len(command) == MAX_ARGS + 1 and command[-1] == f"... ({200 + 5 - MAX_ARGS} more)"
        assert command[5] == "--opt0=" + "x" * (MAX_ARG - 7) + f"\u2026({len(ballast[0])} bytes)"
        assert all(len(arg) <= MAX_ARG + 20 for arg in command)
        assert len(json.dumps(proc)) < 64 * 1024
        assert probe.quit()[0] == 0
    finally:
        probe.close()


def test_a_sample_that_would_still_be_too_long_sends_fewer_processes(holders):
    """Each holder's arguments survive clipping at about 200 KB of JSON (control characters are six
    bytes each on the wire): eight of them are over the limit, so the probe leaves some out and
    says how many."""
    probe, prefix = started_probe()
    try:
        ballast = ["\x01" * 600 for _ in range(MAX_ARGS)]
        pids = {holders.start(prefix, ballast) for _ in range(8)}
        line = sample_line(probe)
        assert len(line) - 1 <= MAX_LINE
        record, err = decode(line, ("sample",))
        assert err is None, err
        sent = {p["pid"] for p in record["processes"]}
        assert 0 < len(sent & pids) < len(pids)
        assert record["processes_omitted"] >= len(pids - sent)
        # What is left out is what matters least: a monitor (the probe itself) goes before a holder.
        assert all(p["kind"] != "monitor" for p in record["processes"])
        assert probe.quit()[0] == 0
    finally:
        probe.close()


def test_process_count_is_bounded_gpu_holders_first(sim_probe, monkeypatch):
    probe, _reader = sim_probe(scenario="demo")
    full = probe.sample(full=True)
    assert full["processes_omitted"] == 0
    kinds = [p["kind"] for p in full["processes"]]
    users_and_ghosts = kinds.count("user") + kinds.count("ghost")
    assert "monitor" in kinds and "zombie" in kinds
    monkeypatch.setattr(core, "MAX_PROCESSES", users_and_ghosts)
    bounded = probe.sample(full=True)
    assert sorted(p["kind"] for p in bounded["processes"]) == sorted(
        k for k in kinds if k in ("user", "ghost")
    )
    assert bounded["processes_omitted"] == len(kinds) - users_and_ghosts


def test_clip_text_and_command_mark_what_they_cut():
    assert clip_text("short") == "short" and clip_text(None) is None
    long = "é" * (MAX_TEXT + 1)
    assert clip_text(long) == "é" * MAX_TEXT + f"\u2026({2 * (MAX_TEXT + 1)} bytes)"
    argv = ["a" * (MAX_ARG + 1)] + ["b"] * MAX_ARGS
    clipped = clip_command(argv)
    assert clipped[0] == "a" * MAX_ARG + f"\u2026({MAX_ARG + 1} bytes)"
    assert clipped[-1] == "... (1 more)" and len(clipped) == MAX_ARGS + 1
    assert clip_command(["python", "train.py"]) == ["python", "train.py"]


def test_over_long_events_and_other_records_never_leave_as_over_long_lines():
    done = {
        "type": "event",
        "plan": "p1",
        "stage": "done",
        "result": "clean",
        "data": {
            "clean": True,
            "elapsed_ms": 12.5,
            "processes": [{"pid": i, "why": "x" * 200} for i in range(9000)],
        },
    }
    line = fit_line(done)
    assert len(line) - 1 <= MAX_LINE
    record, err = decode(line, ("event",))
    assert err is None and record["stage"] == "done" and record["plan"] == "p1"
    assert record["data"]["clean"] is True and record["data"]["elapsed_ms"] == 12.5
    assert "processes" not in record["data"] and "bytes" in record["data"]["clipped"]
    hello = {"type": "hello", "host": {"hostname": "h" * (2 * MAX_LINE)}}
    record, err = decode(fit_line(hello), ("error",))
    assert err is None and record["code"] == "too-long"


def test_jobs_never_make_a_sample_too_long_and_leave_room_for_the_processes():
    """64 jobs whose every text is at its bound in astral characters (twelve bytes each on the
    wire), with their members and processes, beside 400 process records: over the line, so the
    jobs keep to a quarter of it, the smallest left out and counted, and the process records go."""
    from gputui.probe.core import MAX_JOB_BYTES
    from gputui.probe.jobs import JOB_TEXT, MAX_JOBS, ROOT_ARG, ROOT_ARGS

    wide = "\U0001f600" * JOB_TEXT
    jobs = [
        {
            "id": str(1000 + i), "root": 1000 + i, "root_start": 1, "name": wide, "user": wide,
            "command": ["\U0001f600" * ROOT_ARG] * ROOT_ARGS, "uid": 0, "state": "S", "ppid": 1,
            "boundary": "shell", "members": list(range(16)), "processes": [[p, p] for p in range(16)],
            "gpus": [0], "memory": (MAX_JOBS - i) << 30, "slurm_job": wide, "container": wide, "unit": wide,
        }
        for i in range(MAX_JOBS)
    ]  # fmt: skip
    procs = [{"pid": 5000 + i, "kind": "user", "command": ["x" * 400]} for i in range(400)]
    sample = {"type": "sample", "v": 1, "seq": 1, "gpus": [], "processes": procs, "processes_omitted": 0,
              "jobs": jobs, "jobs_omitted": 0}  # fmt: skip
    line = fit_line(sample)
    assert len(line) - 1 <= MAX_LINE
    record, err = decode(line, ("sample",))
    assert err is None, err
    sent = record["jobs"]
    assert 0 < len(sent) < MAX_JOBS and record["jobs_omitted"] == MAX_JOBS - len(sent)
    assert [j["id"] for j in sent] == [j["id"] for j in jobs[: len(sent)]]  # the largest kept
    assert len(json.dumps(sent)) <= MAX_JOB_BYTES
    assert len(record["processes"]) == len(procs) and record["processes_omitted"] == 0

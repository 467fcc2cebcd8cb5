"""What one sample may carry: clipped fields, a bounded process count, and never a line over the limit.

A process with a megabyte of arguments that holds a GPU device file used to make every sample longer
than wire.MAX_LINE: the app dropped them all while the host stayed "live".
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gputui.probe import core
from gputui.probe.core import MAX_ARG, MAX_ARGS, PARENT_ARG, clip_command, fit_line
from gputui.probe.wire import MAX_LINE, MAX_TEXT, clip_arg, clip_text, decode
from tests.support.fuzzing import FUZZ
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


LAUNCHER = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-S", "-c", sys.argv[1], sys.argv[2]], stdin=subprocess.PIPE)
sys.stdin.read()  # the test closes it: the holder below is ended, then this launcher
child.stdin.close()
child.wait()
"""


def test_a_long_path_keeps_its_name_whole_and_cuts_its_directories():
    path = "/tmp/pytest-of-alice/pytest-1234/test_a_notebook_kernel0/work/kernels/notebook_kernel_launcher.py"
    clipped = clip_arg(path, 64)
    assert len(clipped) <= 64 and clipped != path
    assert clipped.startswith("/\u2026/") and clipped.endswith("/kernels/notebook_kernel_launcher.py")
    # The directories nearest the name are kept, as many as fit.
    assert path.endswith(clipped[2:]) and len(clip_arg(path, 63)) <= 63
    # What comes before a path (an option's name) is kept with its first `/`.
    option = "--config=" + path
    assert clip_arg(option, 64).startswith("--config=/\u2026/")
    assert clip_arg(option, 64).endswith("/notebook_kernel_launcher.py")
    # A relative path alike, its first directory kept.
    relative = "experiments/" + "x" * 80 + "/train.py"
    assert clip_arg(relative, 64) == "experiments/\u2026/train.py"
    # A name that does not fit whole keeps its start after the mark; the bytes say how long it was.
    huge = "/opt/" + "n" * 100 + ".py"
    assert clip_arg(huge, 64).startswith("\u2026/nnnn") and clip_arg(huge, 64).endswith(
        f"\u2026({len(huge)} bytes)"
    )
    # Not a path (white space, no `/`): its start, as every clipped text.
    text = "a sentence / with a slash " * 5
    assert clip_arg(text, 64) == clip_text(text, 64)
    assert clip_arg("x" * 100, 64) == clip_text("x" * 100, 64)
    assert clip_arg(path, len(path)) == path and clip_arg("train.py", 64) == "train.py"


@FUZZ
@given(st.text(st.sampled_from("ab/é\u00a0 .\x00"), max_size=200), st.integers(min_value=4, max_value=80))
@example(text="a/aa/", limit=4)  # `…/aa/` is 5: a name's trailing `/` takes room too
def test_a_clipped_argument_is_bounded_and_marked(text, limit):
    clipped = clip_arg(text, limit)
    if len(text) <= limit:
        assert clipped == text
        return
    assert "\u2026" in clipped
    assert len(clipped) <= limit + len(f"\u2026({4 * len(text)} bytes)")  # the wire's bound holds
    name = text.rstrip("/").rsplit("/", 1)[-1]
    tail = text[len(text.rstrip("/")) :]  # a directory's trailing slashes go with its name
    path = text.rstrip("/").rfind("/") > 0 and not any(c.isspace() for c in text)
    if path and len("\u2026/" + name + tail) <= limit:  # room for `…/` and the name: the name is whole
        assert len(clipped) <= limit and clipped.endswith("/" + name + tail)


def test_a_launchers_long_script_path_keeps_its_name_in_the_parents_record(holders, tmp_path):
    """The tree's parent row: a launcher below a deep directory, which started a GPU holder."""
    script = tmp_path / ("d" * 40) / "kernels" / "notebook_kernel_launcher.py"
    script.parent.mkdir(parents=True)
    script.write_text(LAUNCHER)
    probe, prefix = started_probe()
    launcher = subprocess.Popen(
        [sys.executable, "-S", str(script), HOLDER, prefix], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    try:
        record = None
        for _ in range(100):  # until the holder below it holds the device files
            line = sample_line(probe)
            record, err = decode(line, ("sample",))
            assert err is None, err
            if any(p.get("ppid") == launcher.pid and p["kind"] == "hidden" for p in record["processes"]):
                break
        assert record is not None
        parent = next(p for p in record["parents"] if p["pid"] == launcher.pid)
        shown = parent["command"][2]
        assert len(str(script)) > PARENT_ARG and len(shown) <= PARENT_ARG
        assert shown.endswith("/kernels/notebook_kernel_launcher.py") and "\u2026" in shown
        assert probe.quit()[0] == 0
    finally:
        launcher.stdin.close()
        try:
            launcher.wait(timeout=30)
        except subprocess.TimeoutExpired:
            launcher.kill()  # this PID only: the launcher this test started
            launcher.wait()
        probe.close()


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

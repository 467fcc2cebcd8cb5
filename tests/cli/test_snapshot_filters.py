"""`gputui snapshot --user/--pid/--gpu/--only/--compute` (nvitop's filters): the real CLI on the
test's own demo. The options are terms of the dashboard's filter language (gputui/views/filter.py),
and the snapshot prints, in text and JSON, and in each frame of --watch, only the GPUs and processes
they match; a filter that matches nothing says so; a bad value is one line and exit 2."""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import ROOT, gputui
from tests.support.livedemo import Live, snapshot
from tests.support.recfile import long_recording

ME = pwd.getpwuid(os.getuid()).pw_name  # who the demo's processes run as


def doc_of(*args: str) -> dict[str, Any]:
    run = gputui("snapshot", "--demo", "--json", *args)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def gpus_of(doc: dict[str, Any]) -> set[tuple[str, int]]:
    return {(h["name"], g["index"]) for h in doc["hosts"] for g in h["gpus"]}


def procs_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for h in doc["hosts"] for p in h["processes"]]


def test_gpu_and_only_keep_those_gpus_and_the_processes_on_them() -> None:
    everything = doc_of()
    assert everything["filter"] is None
    for args in (["--gpu", "2,3"], ["--gpu", "2", "--gpu", "3"], ["--only", "2,3"]):
        doc = doc_of(*args)
        assert doc["filter"] == "gpu:2,3"
        assert gpus_of(doc) == {(h, i) for h in ("demo-a", "demo-b") for i in (2, 3)}, args
        procs = procs_of(doc)
        assert procs and all({2, 3} & set(p["gpus"]) for p in procs), args
    # HOST:INDEX, as clean and wait take it; the jobs are those of the processes left.
    doc = doc_of("--gpu", "demo-a:3")
    assert gpus_of(doc) == {("demo-a", 3)}
    [a, b] = doc["hosts"]
    assert b["processes"] == [] and b["jobs"] == [] and b["status"] == "live"
    assert a["processes"] and all(3 in p["gpus"] for p in a["processes"])
    assert {j["id"] for j in a["jobs"]} == {p["job"] for p in a["processes"] if p.get("job")}
    # A UUID (a prefix of one) names one GPU.
    uuid = everything["hosts"][1]["gpus"][1]["uuid"]
    assert gpus_of(doc_of("--gpu", uuid)) == {("demo-b", 1)}


def test_compute_keeps_the_processes_with_a_gpu_context() -> None:
    doc = doc_of("--compute")
    assert doc["filter"] == "kind:user"
    procs = procs_of(doc)
    assert procs and {p["kind"] for p in procs} == {"user"}
    assert all(p["gpus"] for p in procs)  # NVML lists each on a GPU: monitors and holders left out
    # The GPUs as the fleet table shows them: those a compute process runs on.
    assert ("demo-b", 3) not in gpus_of(doc)  # demo-b's GPU 3 is free


def test_user_and_the_text_table() -> None:
    run = gputui("snapshot", "--demo", "--user", f"nobody-else,{ME}", "--compute")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == f"filter: user:nobody-else,{ME} kind:user"
    assert "monitor" not in run.stdout and "zombie" not in run.stdout and "ghost " not in run.stdout
    assert run.stdout.count("== demo-") == 2 and " user " in run.stdout


def test_user_takes_a_uid_as_well_as_a_name() -> None:
    """A user is a name or a uid (nvitop's --user takes either): the uid matches the processes of
    that uid, named or not, as the name does."""

    def kinds(doc: dict[str, Any]) -> set[str]:  # each snapshot starts its own demo: its own PIDs
        return {p["kind"] for p in procs_of(doc)}

    doc = doc_of("--user", str(os.getuid()))
    assert doc["filter"] == f"user:{os.getuid()}"
    assert procs_of(doc) and {p["user"] for p in procs_of(doc)} == {ME}
    assert kinds(doc) == kinds(doc_of("--user", ME)) >= {"user", "monitor"}
    assert procs_of(doc_of("--user", str(os.getuid() + 1))) == []


def test_a_filter_that_matches_nothing_says_so() -> None:
    run = gputui("snapshot", "--demo", "--user", "nobody-here")
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("no GPU or process here matches the filter") == 2, run.stdout
    assert "GPU  name" not in run.stdout
    assert "nothing matches --user nobody-here (filter: user:nobody-here)" in run.stderr
    run = gputui("snapshot", "--demo", "--json", "--user", "nobody-here")
    assert run.returncode == 0 and "nothing matches" in run.stderr
    doc = json.loads(run.stdout)
    assert not gpus_of(doc) and not procs_of(doc)


def test_pid_on_the_tests_own_live_demo(live: Live) -> None:
    """PIDs of a demo that lives across commands: the test's own (stopped by the fixture)."""
    first = snapshot(live)
    [trainer] = [p for p in procs_of(first) if p["kind"] == "ghost"][:1]
    holder = next(p for p in procs_of(first) if p["kind"] == "hidden" and p["gpus"])
    r = live.gputui("snapshot", "--demo", "--json", "--pid", str(trainer["pid"]), "--pid", str(holder["pid"]))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["filter"] == f"pid:{trainer['pid']},{holder['pid']}"
    assert {p["pid"] for p in procs_of(doc)} == {trainer["pid"], holder["pid"]}


def test_watch_prints_each_frame_filtered() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputui", "snapshot", "--demo", "--watch", "0.5", "--json", "--gpu", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
        env=env,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline(), proc.stdout.readline()]
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    for line in lines:
        doc = json.loads(line)
        assert doc["filter"] == "gpu:1" and gpus_of(doc) == {("demo-a", 1), ("demo-b", 1)}


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--gpu", "x2"], ["--gpu", "'x2'", "an index, a UUID, HOST:INDEX or HOST:all"]),
        (["--only", "1,,2"], ["--only", "'1,,2'"]),
        (["--gpu", "a b"], ["--gpu", "'a b'"]),
        (["--pid", "0"], ["--pid", "'0'", "is not a PID"]),
        (["--pid", "12x"], ["--pid", "'12x'"]),
        (["--pid", "1" * 40], ["--pid", "is not a PID"]),
        (["--user", ""], ["--user", "''", "is not a user name"]),
        (["--user", "al ice"], ["--user", "'al ice'"]),
        (["--user", "a\x1b[2Jb"], ["--user", "is not a user name"]),
        # A number is a uid, and a uid is below 2**32 - 1 (uid_t's -1 is no user).
        (["--user", "9" * 20], ["--user", "is not a user name or uid"]),
        (["--user", str(2**32 - 1)], ["--user", "is not a user name or uid"]),
        (["--user", "alice,-1"], ["--user", "'alice,-1'"]),  # no name starts with '-'
        (["--gpu", "demo-c:1"], ["--gpu", "demo-c", "is not one of the hosts"]),
    ],
)
def test_a_bad_value_is_one_clear_line_and_exit_2(args: list[str], words: list[str]) -> None:
    for command in (["snapshot", "--demo"], ["--demo"]):
        run = gputui(*command, *args)
        assert run.returncode == 2, (command, args, run.stdout, run.stderr)
        assert "Traceback" not in run.stderr and "\x1b" not in run.stderr, run.stderr
        last = run.stderr.strip().splitlines()[-1]
        for word in words:
            assert word in last, (command, args, last)


def test_a_recording_is_filtered_the_same_way(tmp_path: Path) -> None:
    path = tmp_path / "r.gz"
    long_recording(path, seconds=5)
    run = gputui("snapshot", "--replay", str(path), "--json", "--gpu", "demo-b:2", "--compute")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["filter"] == "gpu:demo-b:2 kind:user" and gpus_of(doc) == {("demo-b", 2)}
    assert procs_of(doc) and all(p["kind"] == "user" and 2 in p["gpus"] for p in procs_of(doc))

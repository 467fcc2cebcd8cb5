"""The `detail` request: one process in full, read from /proc on demand, on real processes.

Sim jobs (started by the test's own sim probe, which ends them) and processes this test starts and
reaps itself; nothing else is signalled.
"""

import json
import os

from gputui.probe.core import MAX_PARENTS
from gputui.probe.detail import MAX_DETAIL_ARG, MAX_DETAIL_COMMAND
from gputui.probe.procfs import read_stat
from gputui.probe.wire import MAX_LINE, PROBE_TYPES, decode, encode
from tests.support.probeproc import ProbeProcess
from tests.support.sleepers import end, sleeper

GIB = 1 << 30


def ask(probe, pid, start, rid="d1"):
    return probe.detail({"type": "detail", "v": 1, "pid": pid, "start_time": start, "id": rid})


def test_a_launcher_in_full(sim_probe):
    probe, reader = sim_probe(gpus=2, scenario="workers")
    sample = probe.sample(full=True)
    [launcher] = reader.jobs_with_role("workers")
    answer = ask(probe, launcher.pid, launcher.start_time)
    assert answer["type"] == "detail" and answer["id"] == "d1" and answer["result"] == "ok"
    assert (answer["pid"], answer["start_time"]) == (launcher.pid, launcher.start_time)
    with open(f"/proc/{launcher.pid}/cmdline", "rb") as f:
        assert answer["command"] == [a.decode() for a in f.read().rstrip(b"\0").split(b"\0")]
    assert answer["cwd"] == os.readlink(f"/proc/{launcher.pid}/cwd")
    assert answer["exe"] == os.readlink(f"/proc/{launcher.pid}/exe")
    assert answer["uid"] == os.getuid() and answer["threads"] >= 1
    assert answer["state"] in ("R", "S") and answer["elapsed"] >= 0 and answer["started"] > 1e9
    assert answer["pgid"] == launcher.pid and answer["nspid"] == [launcher.pid]
    assert answer["cgroup"] and answer["unreadable"] == {}
    # The device files it holds, by fd: every simulated one (GPU_FACTS: CUDA opens them all).
    assert {f["path"] for f in answer["fds"]} >= set(reader.device_paths)
    assert answer["fd_count"] >= len(answer["fds"]) and answer["fds_more"] == 0
    # Its parent is the sim's session process, whose parent is this process: the probe itself.
    session = read_stat(launcher.pid).ppid
    assert [p["pid"] for p in answer["parents"]] == [session, os.getpid()]
    assert answer["parents"][0]["start_time"] == read_stat(session).start_time
    assert answer["parents_end"] == "probe"
    assert len(encode(answer)) < MAX_LINE
    assert decode(encode(answer), PROBE_TYPES)[0] == answer
    # The sample names the same parent among the processes' parents that it does not list.
    parents = {p["pid"]: p for p in sample["parents"]}
    listed = {p["pid"] for p in sample["processes"]}
    assert session in parents and parents[session]["ppid"] == os.getpid()
    assert parents[session]["name"] and parents[session]["start_time"] == read_stat(session).start_time
    assert not set(parents) & (listed | {1}) and len(parents) <= MAX_PARENTS


def test_a_process_that_is_gone_or_another_one_is_not_described(sim_probe):
    probe, _ = sim_probe()
    proc = sleeper()
    try:
        start = read_stat(proc.pid).start_time
        other = ask(probe, proc.pid, start + 1)
        assert other["result"] == "pid-reused" and "another process" in other["message"]
        assert "command" not in other and "cwd" not in other
    finally:
        end(proc)
    gone = ask(probe, proc.pid, start)
    assert gone["result"] == "exited" and "command" not in gone


def test_bad_requests_are_refused_with_their_id(sim_probe):
    probe, _ = sim_probe()
    for bad in ({"pid": "1", "start_time": 0}, {"pid": 0, "start_time": 0}, {"pid": 5, "start_time": None}):
        answer = probe.detail({"type": "detail", "v": 1, "id": "x7", **bad})
        assert answer["result"] == "refused" and answer["id"] == "x7", bad
    assert probe.detail({"pid": 1, "start_time": -1, "id": 5})["id"] is None


def test_a_huge_command_line_is_cut_visibly_and_the_environment_is_never_read(sim_probe):
    probe, _ = sim_probe()
    secret = "hunter2-" + "s" * 40
    args = ["é" * 5000] + [f"--arg{i}" for i in range(400)]
    proc = sleeper(*args, env={**os.environ, "GPUTUI_TEST_SECRET": secret}, cwd="/")
    try:
        answer = ask(probe, proc.pid, read_stat(proc.pid).start_time)
    finally:
        end(proc)
    command = answer["command"]
    assert answer["result"] == "ok" and answer["cwd"] == "/"
    long_arg = command[3]
    assert long_arg.startswith("é" * MAX_DETAIL_ARG) and long_arg.endswith("…(10000 bytes)")
    assert command[-1].endswith("more)") and sum(len(a) for a in command) <= MAX_DETAIL_COMMAND + 100
    assert command[4:6] == ["--arg0", "--arg1"]
    assert secret not in json.dumps(answer)
    assert len(encode(answer)) < MAX_LINE


def test_the_probe_process_answers_over_its_pipe():
    probe = ProbeProcess("--interval", "60")
    try:
        hello = probe.read()
        sample = probe.read()
        me = next(p for p in sample["processes"] if p["pid"] == hello["pid"])
        probe.send(
            encode({"type": "detail", "pid": me["pid"], "start_time": me["start_time"], "id": "a"}),
            b'{"type":"detail","v":1,"pid":"x","start_time":1,"id":"b"}',
        )
        mine, refused = probe.read(), probe.read()
        # Its own command line is the probe's, not the bootstrap's source code.
        assert mine["type"] == "detail" and mine["result"] == "ok" and mine["id"] == "a"
        assert mine["command"][0] == "gputui-probe" and "--interval" in mine["command"]
        assert mine["parents_end"] in ("probe", "init")
        assert (refused["result"], refused["id"]) == ("refused", "b")
        assert probe.quit()[0] == 0
    finally:
        probe.close()

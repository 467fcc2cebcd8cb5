"""The live demo (issue 19 #1): one simulated cluster that the dashboard, `snapshot`, `clean` and
`wait` all attach to while it lives, so the README's "clean, then wait" can be rehearsed.

Every test gets its own XDG_RUNTIME_DIR and TMPDIR (so no two tests, and no test and the user, share
a demo), runs the real `gputui` command (a wrapper on PATH for this checkout), and ends with
`gputui demo stop` and a check that no process of its demo is left: the PIDs found below the daemon
in /proc, and any process whose command line names the test's private directories. Only those are
ever signalled, and only if the stop did not end them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from gputui.probe.readers.sim import SimReader, start_time
from tests.support.livedemo import POLL, TIMEOUT, Live, commands_on, naming, processes, snapshot
from tests.support.simprobe import alive
from tests.support.ttyrun import on_pty
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
README_LINE = (
    "gputui clean --demo demo-a --all --yes && gputui wait --demo demo-a --settle 2 && ./run_benchmark.sh"
)
# Each test starts a demo (two sims, some twenty processes) and runs several commands: more than the
# suite's 120 s on a machine busy with other work.
pytestmark = pytest.mark.timeout(600)
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="a directory of another user needs root to make")
# -- helpers ------------------------------------------------------------------------------------


# -- the README's workflow ----------------------------------------------------------------------


def test_the_readme_workflow_runs_as_written(live: Live) -> None:
    assert README_LINE in (REPO / "README.md").read_text()
    script = live.cwd / "run_benchmark.sh"
    script.write_text("#!/bin/sh\necho ran > benchmark.out\n")
    script.chmod(0o755)
    r = subprocess.run(
        ["bash", "-c", README_LINE],
        cwd=live.cwd,
        env=live.env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    live.record()
    assert r.returncode == 0, r.stdout + r.stderr
    assert (live.cwd / "benchmark.out").read_text() == "ran\n"
    assert "CLEAN" in r.stdout and "ready: demo-a" in r.stdout


def test_two_clients_see_one_cluster_and_a_clean_is_seen_by_the_next(live: Live) -> None:
    # Two at once, with no demo running: both start it, one daemon runs, both attach to it.
    clients = [
        subprocess.Popen(
            ["gputui", "snapshot", "--demo", "demo-a", "--json"],
            cwd=live.cwd,
            env=live.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [c.communicate(timeout=TIMEOUT) for c in clients]
    live.record()
    assert [c.returncode for c in clients] == [0, 0], outputs
    first, second = (json.loads(out) for out, _ in outputs)
    assert processes(first, "demo-a") and processes(first, "demo-a") == processes(second, "demo-a")
    assert len(daemons(live)) == 1
    on_gpu0 = processes(first, "demo-a", 0)
    assert on_gpu0
    r = live.gputui("clean", "--demo", "demo-a:0", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    after = snapshot(live, "demo-a")
    assert not processes(after, "demo-a", 0) & on_gpu0
    assert processes(after, "demo-a", 3) == processes(first, "demo-a", 3)  # the rest untouched
    # The attached probe's plan signalled the sim's jobs; the sim's session reaped them (no zombie).
    assert all(start_time(pid) != started for pid, started in on_gpu0)


# -- one daemon per user, started, stopped, ended ------------------------------------------------


def daemons(demo: Live) -> set[tuple[int, int | None]]:
    return {p for p in naming(str(demo.run)) if alive(*p) and "gputui.cli.demod" in _cmdline(p[0])}


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def test_demo_start_twice_is_one_daemon(live: Live) -> None:
    starts = [
        subprocess.Popen(
            ["gputui", "demo", "start"],
            cwd=live.cwd,
            env=live.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=TIMEOUT) for p in starts]
    live.record()
    assert [p.returncode for p in starts] == [0, 0], outputs
    doc = live.status()
    assert doc["running"] and doc["pid"] > 0
    for out, err in outputs:
        assert f"PID {doc['pid']}" in out + err
    assert len(daemons(live)) == 1
    again = live.gputui("demo", "start")
    assert again.returncode == 0 and "already running" in again.stdout + again.stderr
    assert len(daemons(live)) == 1


def test_demo_stop_leaves_nothing(live: Live) -> None:
    r = live.gputui("demo", "start")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = live.status()
    hosts = doc["hosts"]
    assert set(hosts) == {"demo-a", "demo-b"}
    dirs = [Path(h["directory"]) for h in hosts.values()]
    assert all(d.is_dir() and str(d).startswith(str(live.demo_dir)) for d in dirs)
    running = live.record()
    assert len(running) >= 16  # the daemon, two sim sessions, their jobs
    r = live.gputui("demo", "stop")
    assert r.returncode == 0, r.stdout + r.stderr
    # `stop` returns once everything is gone: no waiting here.
    assert not [p for p in running if alive(*p)]
    assert not any(d.exists() for d in dirs)
    assert not live.status()["running"]
    plain = live.gputui("demo", "status")
    assert plain.returncode == 1 and "not running" in plain.stdout
    again = live.gputui("demo", "stop")
    assert again.returncode == 0 and "not running" in again.stdout + again.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_the_daemon_ends_cleanly_on_a_signal(live: Live, sig: signal.Signals) -> None:
    r = live.gputui("demo", "start")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = live.status()
    running = live.record()
    dirs = [Path(h["directory"]) for h in doc["hosts"].values()]
    pid = doc["pid"]
    fd = os.pidfd_open(pid)  # this test's daemon (started just above), pinned
    try:
        assert start_time(pid) == dict(running)[pid]
        signal.pidfd_send_signal(fd, sig)
    finally:
        os.close(fd)
    assert wait_until(lambda: not [p for p in running if alive(*p)], 60.0, step=POLL)
    assert not any(d.exists() for d in dirs)
    assert not live.status()["running"]


def test_the_daemon_ends_when_no_client_is_left(live: Live) -> None:
    # Generous: the reader must attach within the timeout of `demo start` on a busy machine.
    r = live.gputui("demo", "start", "--idle-timeout", "10")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = live.status()
    reader = SimReader(attach=True, base_dir=doc["hosts"]["demo-a"]["directory"])
    reader.open()  # a client, as every `--demo` probe is
    try:
        running = live.record()
        time.sleep(22.0)  # two idle timeouts: a client is there all along
        assert live.status()["running"]
        assert reader.read()[1]
    finally:
        reader.close()
    assert wait_until(lambda: not [p for p in running if alive(*p)], 120.0, step=POLL)
    assert not live.status()["running"]


# -- jobs that come and go -------------------------------------------------------------------------


def test_jobs_come_and_go(live: Live) -> None:
    r = live.gputui("demo", "start", "--refill-after", "2", "--bench-run", "3", "--bench-gap", "8")
    assert r.returncode == 0, r.stdout + r.stderr
    live.record()
    # demo-b's GPU 3 runs a benchmark now and then: `wait` has something to wait for, and returns.
    assert wait_until(
        lambda: any("bench" in c for c in commands_on(snapshot(live, "demo-b"), "demo-b", 3)),
        TIMEOUT,
        step=POLL,
    )
    r = live.gputui("wait", "--demo", "demo-b", "--gpu", "3", "--settle", "1", "--timeout", str(int(TIMEOUT)))
    assert r.returncode == 0, r.stdout + r.stderr
    # A GPU that a clean freed gets a job again once it has been free for the refill time.
    before = processes(snapshot(live, "demo-a"), "demo-a", 0)
    r = live.gputui("clean", "--demo", "demo-a:0", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    assert wait_until(lambda: processes(snapshot(live, "demo-a"), "demo-a", 0) - before, TIMEOUT, step=POLL)
    live.record()


def at_a_terminal(live: Live, *args: str) -> tuple[int, str]:
    """`gputui ARGS` as a person runs it: stdin, stdout and stderr on a real pty (a hint to try the
    demo is only for a terminal); its exit code and all it wrote there."""
    code, said = on_pty(["gputui", *args], env=live.env, cwd=live.cwd, streams=("stdin", "stdout", "stderr"),
                        timeout=TIMEOUT)  # fmt: skip
    return code, said.decode(errors="replace")


def test_the_suggestion_on_a_host_without_gpus_works(live: Live) -> None:
    """What `wait` on a machine without a driver suggests to a person runs, as the README says: the
    demo's GPU 3 of demo-b, freed by its benchmark, is waited on and ready (exit 0)."""
    code, said = at_a_terminal(live, "wait", "--timeout", "5")
    if code != 3:
        pytest.skip("this host has an NVIDIA driver and a GPU")
    suggested = re.findall(r"`(gputui [^`]*--demo[^`]*)`", said)
    assert suggested, said
    readme = (REPO / "README.md").read_text()
    assert all(f"`{command}`" in readme for command in suggested), suggested  # what it says there
    for command in suggested:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=live.cwd,
            env=live.env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        live.record()
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
        assert done.stdout.startswith("ready: "), done.stdout  # demo-b GPU 3, when its benchmark ends


# -- a private directory, or nothing ---------------------------------------------------------------


def _refused(demo: Live, *words: str) -> None:
    try:
        for args in (("demo", "start"), ("snapshot", "--demo"), ("demo", "status")):
            r = demo.gputui(*args)
            assert r.returncode == 4, (args, r.stdout, r.stderr)
            assert "Traceback" not in r.stderr
            assert r.stderr.count("\n") == 1 and all(w in r.stderr for w in words), r.stderr
        assert not daemons(demo)
    finally:
        # As it was, so that the fixture's `demo stop` can look (and find nothing to stop).
        os.chmod(demo.run, 0o700)
        for where in (demo.demo_dir, Path(demo.env["TMPDIR"]) / f"gputui-demo-{os.geteuid()}"):
            if where.is_symlink():
                where.unlink()
            elif where.exists():
                os.rmdir(where)


@ROOT_ONLY
def test_a_demo_directory_of_another_user_is_refused(live: Live) -> None:
    live.demo_dir.mkdir(mode=0o700)
    os.chown(live.demo_dir, NOBODY, NOBODY)
    _refused(live, str(live.demo_dir), "uid 65534")


def test_a_demo_directory_others_can_open_is_refused(live: Live) -> None:
    live.demo_dir.mkdir()
    os.chmod(live.demo_dir, 0o755)
    _refused(live, str(live.demo_dir), "755")


def test_a_linked_demo_directory_is_refused(live: Live) -> None:
    elsewhere = live.root / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    live.demo_dir.symlink_to(elsewhere)
    _refused(live, str(live.demo_dir), "symbolic link")


def test_a_runtime_dir_others_can_write_is_refused(live: Live) -> None:
    os.chmod(live.run, 0o777)
    _refused(live, str(live.run), "777")


def test_without_a_runtime_dir_the_demo_lives_in_a_private_temporary_one(live: Live) -> None:
    env = dict(live.env)
    del env["XDG_RUNTIME_DIR"]
    live.env = env
    r = live.gputui("demo", "start")
    assert r.returncode == 0, r.stdout + r.stderr
    live.record()
    where = Path(env["TMPDIR"]) / f"gputui-demo-{os.geteuid()}"
    info = os.lstat(where)
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()
    assert stat.S_IMODE(info.st_mode) == 0o700
    directory = Path(live.status()["directory"])  # the demo's own, by its name, in that one
    assert directory.parent == where and stat.S_IMODE(os.lstat(directory).st_mode) == 0o700


@ROOT_ONLY
def test_a_temporary_demo_directory_of_another_user_is_refused(live: Live) -> None:
    env = dict(live.env)
    del env["XDG_RUNTIME_DIR"]
    live.env = env
    where = Path(env["TMPDIR"]) / f"gputui-demo-{os.geteuid()}"
    where.mkdir(mode=0o700)
    os.chown(where, NOBODY, NOBODY)
    _refused(live, str(where), "uid 65534")


# -- tests and screenshots keep their own fresh demo -------------------------------------------------


def test_a_fresh_demo_starts_no_daemon(live: Live) -> None:
    env = dict(live.env, GPUTUI_DEMO="fresh")
    r = live.gputui("snapshot", "--demo", "--json", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not live.demo_dir.exists() and not daemons(live)
    bad = live.gputui("snapshot", "--demo", env=dict(live.env, GPUTUI_DEMO="sometimes"))
    assert bad.returncode == 2 and "GPUTUI_DEMO" in bad.stderr and "Traceback" not in bad.stderr

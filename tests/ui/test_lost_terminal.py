"""A terminal that goes away, as a person loses one: `gputui --demo` on a real pty (its controlling
terminal: closing it sends SIGHUP, as a dropped SSH session does), closed or SIGTERM'd at several
moments: during start-up, with the dashboard up, with a dialog open, during a plan. Each time the
app exits (no busy loop, no wedged shutdown), every process it started is gone (probes, sims, their
jobs: recorded by PID and start time while the app ran), and a plan it was running has its outcome
in the audit log, every line whole. docs/RELIABILITY.md, "A terminal that goes away".

Nothing here is timed: the waits are generous deadlines for a busy machine. bench/lost_terminal.py
measures how long the exits take.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputui.kill.auditlog import read_records, unfinished
from tests.support.paths import REPO
from tests.support.ptyapp import PtyApp, alive, descendants, start_time

EXIT_DEADLINE = 20.0  # seconds: the app is gone by then, however busy the machine (it takes < 1 s)
GONE_DEADLINE = 20.0  # seconds for what it started to end after it
HUNG_UP = (128 + signal.SIGHUP, -signal.SIGHUP)  # handled, or killed before the handler was there
TERMINATED = (128 + signal.SIGTERM, -signal.SIGTERM)


def start(workdir: Path, **kwargs: bool) -> PtyApp:
    return PtyApp(workdir, **kwargs)


def assert_all_gone(app: PtyApp, statuses: tuple[int, ...]) -> None:
    status = app.wait_exit(EXIT_DEADLINE)
    assert status is not None, "gputui is still running after its terminal went away"
    assert status in statuses, status
    assert app.left_behind(GONE_DEADLINE) == [], "processes the app started are still there"
    assert app.sim_dirs() == [], "a sim did not end"


@pytest.mark.parametrize("delay", [0.1, 0.3, 0.6, 1.0])
def test_terminal_closed_during_start_up(tmp_path: Path, delay: float) -> None:
    app = start(tmp_path)
    try:
        app.pause(delay)
        app.hang_up()
        assert_all_gone(app, HUNG_UP)
    finally:
        app.close()


@pytest.mark.parametrize("delay", [0.3, 1.0])
def test_sigterm_during_start_up(tmp_path: Path, delay: float) -> None:
    app = start(tmp_path)
    try:
        app.pause(delay)
        app.terminate()
        assert_all_gone(app, TERMINATED)
    finally:
        app.close()


@pytest.mark.parametrize("controlling", [True, False], ids=["sighup", "eof-only"])
def test_terminal_closed_with_the_dashboard_up(tmp_path: Path, controlling: bool) -> None:
    """Also without SIGHUP (the pty is not the app's controlling terminal): then only the input's
    end (EOF or EIO) says the terminal is gone, and the app must hear it there."""
    app = start(tmp_path, controlling=controlling)
    try:
        app.up()
        app.hang_up()
        assert_all_gone(app, HUNG_UP)
    finally:
        app.close()


def test_sigterm_with_the_dashboard_up_restores_the_terminal(tmp_path: Path) -> None:
    app = start(tmp_path)
    try:
        app.up()
        mark = app.mark()
        app.terminate()
        assert_all_gone(app, TERMINATED)
        app.pump()
        assert b"\x1b[?1049l" in app.output[mark:], "the app did not leave the alternate screen"
    finally:
        app.close()


def test_terminal_closed_with_a_dialog_open(tmp_path: Path) -> None:
    app = start(tmp_path)
    try:
        app.up()
        app.open_dialog()
        app.hang_up()
        assert_all_gone(app, HUNG_UP)
        records, _ = read_records(app.log) if app.log.exists() else ([], 0)
        assert not [r for r in records if r["kind"] in ("plan", "intent")], "nothing was confirmed"
    finally:
        app.close()


def assert_outcome_logged(app: PtyApp, plan: str) -> None:
    """The plan's `done` is in the audit log, every line whole; an unknown outcome (the app ended
    before the verdict) is reported at the next start."""
    records, torn = read_records(app.log)
    assert torn == 0, "a line of the audit log is not whole"
    with open(app.log, "rb") as f:
        assert f.read().endswith(b"\n")
    done = [r for r in records if r["action"] == plan and r["kind"] == "done"]
    assert done, "the plan has no outcome in the audit log"
    if all(r["result"] == "outcome-unknown" for r in done):
        assert plan in {u.action for u in unfinished(app.log)}


def test_terminal_closed_during_a_plan(tmp_path: Path) -> None:
    app = start(tmp_path)
    try:
        plan = app.start_plan()
        app.hang_up()
        assert_all_gone(app, HUNG_UP)
        assert_outcome_logged(app, plan)
    finally:
        app.close()


def test_sigterm_during_a_plan(tmp_path: Path) -> None:
    app = start(tmp_path)
    try:
        plan = app.start_plan()
        mark = app.mark()
        app.terminate()
        assert_all_gone(app, TERMINATED)
        assert_outcome_logged(app, plan)
        app.pump()
        assert b"\x1b[?1049l" in app.output[mark:], "the app did not leave the alternate screen"
    finally:
        app.close()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_tmux_kill_session_during_start_up(tmp_path: Path) -> None:
    """The report's own steps: `tmux new-session -d "gputui --demo"`, then `tmux kill-session`."""
    tmux = ["tmux", "-L", f"gputui-test-{os.getpid()}", "-f", "/dev/null"]
    env = dict(os.environ, TMPDIR=str(tmp_path))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    command = f"exec {sys.executable} -m gputui --demo --log {tmp_path / 'actions.jsonl'}"
    seen: dict[int, int] = {}  # the app and every process below it: PID -> start time
    try:
        subprocess.run([*tmux, "new-session", "-d", "-s", "lost", "-x", "120", "-y", "36", command],
                       env=env, cwd=tmp_path, check=True)  # fmt: skip
        panes = subprocess.run([*tmux, "list-panes", "-F", "#{pane_pid}"], capture_output=True, text=True)
        pid = int(panes.stdout.split()[0])
        started = start_time(pid)
        assert started is not None
        seen[pid] = started
        # In start-up, as in the report: the moment the first probe is there.
        deadline = time.monotonic() + 60
        while not seen.keys() - {pid} and alive(pid, started) and time.monotonic() < deadline:
            seen.update(descendants(pid))
            time.sleep(0.005)
        assert seen.keys() - {pid}, "the app started no probe"
        subprocess.run([*tmux, "kill-session", "-t", "lost"], check=True)
        deadline = time.monotonic() + EXIT_DEADLINE
        while alive(pid, started) and time.monotonic() < deadline:
            seen.update(descendants(pid))
            time.sleep(0.01)
        assert not alive(pid, started), "gputui is still running after tmux kill-session"
        deadline = time.monotonic() + GONE_DEADLINE
        while [p for p, s in seen.items() if alive(p, s)] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [p for p, s in seen.items() if alive(p, s)] == []
        assert not [p for p in tmp_path.iterdir() if p.name.startswith("gputui-sim-")]
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        for p, s in seen.items():
            if alive(p, s):
                os.kill(p, signal.SIGKILL)


@pytest.mark.parametrize("which", ["stdin", "stdout", "both"])
def test_a_terminal_that_hung_up_before_the_check_ends_as_the_hangup(tmp_path: Path, which: str) -> None:
    """The kernel marks a terminal hung up before it sends SIGHUP: in between, the start-up's check
    sees no terminal. A terminal that hung up is not "a file or a pipe": the dashboard ends as the
    hangup (129) and says so, never exit 2 with advice about redirected output. Here the pty is not
    the app's controlling terminal, so no SIGHUP comes at all: the check alone must tell."""
    master, slave = os.openpty()
    os.close(master)  # hung up before the app starts
    env = dict(os.environ, TMPDIR=str(tmp_path), GPUTUI_DEMO="fresh")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    with open(tmp_path / "out", "wb") as out:
        stdin = slave if which in ("stdin", "both") else subprocess.DEVNULL
        stdout = slave if which in ("stdout", "both") else out
        result = subprocess.run(
            [sys.executable, "-m", "gputui", "--demo", "--log", str(tmp_path / "actions.jsonl")],
            stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, env=env, cwd=tmp_path, timeout=120,
        )  # fmt: skip
    os.close(slave)
    err = result.stderr.decode(errors="replace")
    if which == "stdin":  # stdout is a file: that is what the check says first
        assert result.returncode == 2 and "stdout is not one" in err, err
        return
    assert result.returncode == HUNG_UP[0], err
    assert "hung up" in err and "Traceback" not in err and "a file or a pipe" not in err, err

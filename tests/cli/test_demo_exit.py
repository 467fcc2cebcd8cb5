"""`gputui --demo` in a real terminal (a pty): every process it starts is gone when it exits,
however it exits (q, Ctrl-C, SIGTERM)."""

import os
import pty
import signal
import subprocess
import sys
import time

import pytest


def descendants(root):
    """PIDs below `root`, from /proc (children files need CONFIG_PROC_CHILDREN; walk ppids instead)."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    text = f.read()
            except OSError:
                continue
            parents[int(name)] = int(text[text.rindex(")") + 2 :].split()[1])
    found, frontier = set(), {root}
    while frontier:
        nxt = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= nxt
        frontier = nxt
    return found


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def sim_dirs(tmpdir):
    return {n for n in os.listdir(tmpdir) if n.startswith("gputui-sim-")}


@pytest.mark.parametrize("how", ["q", "ctrl-c", "sigterm"])
def test_demo_leaves_nothing_behind(tmp_path, how):
    # A private temporary directory: the sim makes its directory there, and a demo that other users
    # (or other tests) run at the same time cannot be mistaken for a leftover of this one.
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    master, slave = pty.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="120", LINES="36", TMPDIR=str(tmpdir))
    env["GPUTUI_DEMO"] = "fresh"  # the demo's own sims, below the app (not the live demo's daemon)
    app = subprocess.Popen(
        [sys.executable, "-m", "gputui", "--demo", "--log", str(tmp_path / "log.jsonl")],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    try:
        # Two demo hosts: two probes, each with a sim session and its jobs.
        deadline = time.monotonic() + 120  # generous: CI machines can be busy
        started = set()
        while time.monotonic() < deadline:
            started = descendants(app.pid)
            if len(started) >= 16:
                break
            time.sleep(0.2)
            _drain(master)
        assert len(started) >= 16, f"the demo started only {len(started)} processes"
        started_dirs = sim_dirs(tmpdir)
        time.sleep(1.0)
        started = descendants(app.pid)
        if how == "q":
            os.write(master, b"q")
        elif how == "ctrl-c":
            os.write(master, b"\x03")
        else:
            app.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        while app.poll() is None and time.monotonic() < deadline:
            _drain(master)
            time.sleep(0.05)
        assert app.poll() is not None, "gputui did not exit"
        deadline = time.monotonic() + 15
        while any(alive(p) for p in started) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in started if alive(p)]
        assert started_dirs, "the demo made no sim directory where it was told to"
        assert not sim_dirs(tmpdir)
    finally:
        if app.poll() is None:
            app.kill()
        app.wait()
        os.close(master)


def _drain(fd):
    import select

    while select.select([fd], [], [], 0)[0]:
        try:
            if not os.read(fd, 65536):
                return
        except OSError:
            return

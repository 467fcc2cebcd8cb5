"""`gputui snapshot --watch S` (issue 19, item 12; as `gpustat -i`): the snapshot again every S
seconds from one fleet that stays connected, redrawn in place on a terminal, appended with a
separator line otherwise, one JSON document a line with --json; Ctrl+C ends it quietly with exit 0.

Real subprocesses on the demo (demo-a alone: a fresh simulated host per run); a real pty for the
terminal, tests/support/vt.py to see what it shows. Each waits for two refreshes, then sends SIGINT to the
process it started. One fleet all along: the probe's PID, and every simulated process's, is the same
in every refresh (a new connection would start a new probe, and the demo new processes).
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from tests.support.vt import Screen

REPO = Path(__file__).resolve().parents[2]
SEPARATOR = "--- gputui snapshot"


def env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO), **extra)


def start(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "gputui", "snapshot", *args],
        cwd=REPO,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        **kwargs,
    )


def read_until(fd: int, proc: subprocess.Popen, done, timeout: float = 120) -> bytes:
    """Bytes from `fd` until `done(bytes so far)` or the process ends."""
    buf = b""
    deadline = time.monotonic() + timeout
    while not done(buf) and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO on a pty whose other end has closed
                break
            if not chunk:
                break
            buf += chunk
        elif proc.poll() is not None:
            break
    return buf


def stop(proc: subprocess.Popen) -> tuple[int, bytes]:
    """SIGINT, as Ctrl+C sends it; the exit status and stderr."""
    proc.send_signal(signal.SIGINT)
    try:
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, proc.stderr.read() if proc.stderr is not None else b""


def pids(doc: dict) -> set[int]:
    return {p["pid"] for h in doc["hosts"] for p in h["processes"]}


def test_json_lines_from_one_fleet_and_ctrl_c_exits_0_quietly():
    proc = start(
        "--demo",
        "demo-a",
        "--watch",
        "0.5",
        "--json",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
    )
    try:
        out = read_until(proc.stdout.fileno(), proc, lambda b: b.count(b"\n") >= 2)
        code, err = stop(proc)
    finally:
        proc.stdout.close()
        proc.stderr.close()
    assert code == 0 and err == b"", (code, err.decode())
    first, second = [json.loads(line) for line in out.splitlines()[:2]]
    assert first["version"] == second["version"] == 1 and second["time"] > first["time"]
    assert [h["name"] for h in first["hosts"]] == ["demo-a"] and first["hosts"][0]["status"] == "live"
    # One connection: the same probe and the same simulated processes.
    probe = {p["pid"] for p in first["hosts"][0]["processes"] if "gputui-probe" in " ".join(p["command"])}
    assert probe and probe <= pids(second) and pids(first) == pids(second)


def test_text_is_appended_with_a_separator_when_not_a_terminal():
    proc = start(
        "--demo", "demo-a", "--watch", "0.5", stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env()
    )
    try:
        out = read_until(proc.stdout.fileno(), proc, lambda b: b.count(SEPARATOR.encode()) >= 3)
        code, err = stop(proc)
    finally:
        proc.stdout.close()
        proc.stderr.close()
    assert code == 0 and err == b"", (code, err.decode())
    text = out.decode()
    assert "\x1b" not in text  # no terminal codes in a file or a pipe
    frames = text.split(SEPARATOR)[1:3]
    assert len(frames) == 2 and all("== demo-a" in f and "GPU  name" in f for f in frames), text


def test_on_a_terminal_it_redraws_in_place():
    columns, lines = 100, 60
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    proc = start(
        "--demo", "demo-a", "--watch", "0.5",
        stdin=slave, stdout=slave, stderr=slave, env=env(COLUMNS=str(columns), LINES=str(lines), TERM="xterm"),
    )  # fmt: skip
    os.close(slave)
    try:
        out = read_until(master, proc, lambda b: b.count(SEPARATOR.encode()) >= 3)
        proc.send_signal(signal.SIGINT)
        out += read_until(master, proc, lambda b: False, timeout=60)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert code == 0, out.decode(errors="replace")
    assert out.count(SEPARATOR.encode()) >= 3
    screen = Screen(columns, lines)
    screen.feed(out)
    assert screen.wraps == 0, screen.text()
    shown = screen.text()
    # Every refresh over the last: one frame on the screen and in its scroll-back.
    assert sum(SEPARATOR in row for row in shown) == 1, shown
    assert sum(row.startswith("== demo-a") for row in shown) == 1, shown
    assert "Traceback" not in "\n".join(shown)


def test_a_bad_refresh_interval_is_a_usage_error():
    for value in ("0", "abc", "nan", "99999"):
        run = subprocess.run(
            [sys.executable, "-m", "gputui", "snapshot", "--demo", "--watch", value],
            capture_output=True, text=True, timeout=60, env=env(), cwd=REPO, check=False,
        )  # fmt: skip
        assert run.returncode == 2 and "Traceback" not in run.stderr, (value, run.stderr)
        assert "--watch" in run.stderr, run.stderr

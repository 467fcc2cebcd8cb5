"""`gputui --replay FILE` as a person runs it, on a real pty: the dashboard opens on the recording
with its line, `p` pauses, `q` quits (exit 0); a recording with a damaged line further in plays up
to it, says so on its line, and after `q` says it once more in one line on the terminal (exit 1)."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.ptyapp import PLAIN
from tests.support.recfile import demo_recording, gzip_lines, lines_of

pytestmark = pytest.mark.timeout(300)


class Terminal:
    def __init__(self, workdir: Path, *args: str) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
        env = dict(os.environ, TERM="xterm-256color", PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PLAIN, "-m", "gputui", "--log", str(workdir / "actions.jsonl"), *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=workdir,
            start_new_session=True,
        )
        os.close(slave)
        os.set_blocking(master, False)
        self.master = master
        self.output = bytearray()

    def pump(self) -> None:
        while select.select([self.master], [], [], 0)[0]:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.output += data

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while text.encode() not in self.output:
            assert self.proc.poll() is None, (
                f"gputui exited ({self.proc.returncode}): {bytes(self.output)[-2000:]!r}"
            )
            assert time.monotonic() < deadline, f"no {text!r} on the terminal"
            time.sleep(0.05)
            self.pump()

    def send(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def exit_code(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            self.pump()
        self.pump()
        assert self.proc.returncode is not None
        return self.proc.returncode

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # the app this test started, by its PID
        self.proc.wait()
        os.close(self.master)


def test_the_dashboard_opens_on_a_recording_pauses_and_quits(tmp_path: Path) -> None:
    path = tmp_path / "r.gz"
    demo_recording(path, seconds=20)
    term = Terminal(tmp_path, "--replay", str(path))
    try:
        term.wait_for("REPLAY")
        term.wait_for("r.gz")
        term.wait_for("vllm_serve")  # demo-a's first sample, in the fleet's tables
        term.send(b"p")
        term.wait_for("paused")
        term.send(b"q")
        assert term.exit_code() == 0
        assert b"Traceback" not in term.output
    finally:
        term.close()


def test_a_damaged_line_is_said_again_after_the_dashboard(tmp_path: Path) -> None:
    good = tmp_path / "good.gz"
    demo_recording(good, seconds=4)
    lines = lines_of(good)
    bad = tmp_path / "bad.gz"
    gzip_lines(bad, [*lines[:8], b"garbage\n", *lines[8:]])
    term = Terminal(tmp_path, "--replay", str(bad))
    try:
        term.wait_for("stopped")
        term.send(b"q")
        assert term.exit_code() == 1
        tail = bytes(term.output).decode(errors="replace").rsplit("\x1b", 1)[-1]
        assert "gputui: the replay stopped: " in tail and "bad.gz: line 9: the entry is not JSON" in tail
        assert b"Traceback" not in term.output
    finally:
        term.close()

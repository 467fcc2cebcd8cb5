"""The dashboard in a real terminal, as a person runs it, and every process it starts.

`PtyApp` starts `gputui --demo` on a fresh pty, which is its controlling terminal (the app is the
session leader: closing the terminal sends it SIGHUP, as a dropped SSH session or `tmux
kill-session` does) or, with `controlling=False`, only its stdin and stdout (closing it is then EOF
and EIO with no SIGHUP). Its audit log and its temporary directory (where the sims keep their
files) are the caller's. It reads the terminal's output all the time (an app whose output is not
read blocks), and records every process below the app as it sees it, by PID and start time, so
that after the app is gone the test can check that none of them is left, and end only those.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.paths import REPO

# Run as `python -c CTTY -m gputui ...`: make the pty on stdin the controlling terminal of the new
# session (start_new_session made it), then become gputui, keeping the PID.
CTTY = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable] + sys.argv[1:])"
)
PLAIN = "import os, sys; os.execv(sys.executable, [sys.executable] + sys.argv[1:])"
CTRL_K = b"\x0b"
STARTED = 16  # processes below the app once both demo probes run their sims
# The plan dialog's title: `F` on demo-a (4 GPUs), or on demo-b (8) where its row came first.
DIALOGS = ("Free every GPU (0-3) · confirm", "Free every GPU (0-7) · confirm")
REFUSED = "Not confirmed"  # the dialog's note on a confirmation that came before its targets showed


def stat_of(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command (state first), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def start_time(pid: int) -> int | None:
    fields = stat_of(pid)
    return int(fields[19]) if fields else None


def alive(pid: int, started: int) -> bool:
    """`pid` is still the process that started at `started`, and not a zombie."""
    fields = stat_of(pid)
    return fields is not None and fields[0] != "Z" and int(fields[19]) == started


def descendants(root: int) -> dict[int, int]:
    """PID -> start time of every process below `root` now (by parent links in /proc)."""
    parents: dict[int, int] = {}
    starts: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = stat_of(int(name))
            if fields is not None:
                parents[int(name)] = int(fields[1])
                starts[int(name)] = int(fields[19])
    found: dict[int, int] = {}
    frontier = {root}
    while frontier:
        below = {pid for pid, ppid in parents.items() if ppid in frontier and pid not in found}
        found.update((pid, starts[pid]) for pid in below)
        frontier = below
    return found


class PtyApp:
    def __init__(
        self,
        workdir: Path,
        *args: str,
        controlling: bool = True,
        size: tuple[int, int] = (120, 36),
        env: dict[str, str] | None = None,
    ):
        self.log = workdir / "actions.jsonl"
        self.tmpdir = workdir / "tmp"
        self.tmpdir.mkdir(parents=True, exist_ok=True)
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        env = dict(env if env is not None else os.environ, TERM="xterm-256color", TMPDIR=str(self.tmpdir))
        env["GPUTUI_DEMO"] = "fresh"
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        argv = [sys.executable, "-c", CTTY if controlling else PLAIN, "-m", "gputui", "--demo"]
        self.proc = subprocess.Popen(
            [*argv, "--log", str(self.log), *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=workdir,
            start_new_session=True,
        )
        os.close(slave)
        self.master: int | None = master
        os.set_blocking(master, False)
        self.pid = self.proc.pid
        self.output = bytearray()
        self.seen: dict[int, int] = {}  # every process seen below the app: PID -> start time
        self.exited_at: float | None = None

    # -- while it runs -------------------------------------------------------------------------

    def pump(self) -> None:
        """Read what the app wrote; record the processes below it."""
        while self.master is not None and select.select([self.master], [], [], 0)[0]:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                break
            if not data:
                break
            self.output += data
            del self.output[: max(0, len(self.output) - (4 << 20))]
        if self.proc.poll() is None:
            self.seen.update(descendants(self.pid))

    def pause(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.pump()
            time.sleep(0.02)

    def wait_for(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.proc.poll() is not None:
                raise AssertionError(f"gputui exited ({self.proc.returncode}) while waiting for {what}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no {what} within {timeout:g} s; the terminal's last output:\n{self.tail()}"
                )
            self.pause(0.05)

    def tail(self, chars: int = 2000) -> str:
        """The end of what the app wrote, escape sequences taken out: what a failure shows."""
        text = bytes(self.output[-8 * chars :]).decode(errors="replace")
        return re.sub(r"\x1b\[[0-9;?]*[@-~]|\x1b[()][0-9A-Za-z]", " ", text)[-chars:]

    def mark(self) -> int:
        """Where the output is now: `shows(text, since=mark)` looks only at what came after."""
        return len(self.output)

    def shows(self, text: str, since: int = 0) -> bool:
        self.pump()
        return text.encode() in self.output[since:]

    def send(self, keys: bytes) -> None:
        assert self.master is not None
        os.write(self.master, keys)

    def running_probes(self) -> int:
        """Probes of the app that have started their sim (a probe, its sim's init, its jobs)."""
        self.pump()
        return len(descendants(self.pid))

    # -- the dashboard, driven by keys ----------------------------------------------------------

    def up(self) -> None:
        """The dashboard up: both probes running their sims, the first samples in."""
        self.wait_for(lambda: self.running_probes() >= STARTED, 120, "demo processes")
        self.pause(1.0)

    def open_dialog(self) -> None:
        """`F` (free every GPU of the host) until the plan dialog shows (the first sample may come
        late, and `F` is refused until then)."""
        deadline = time.monotonic() + 60
        while True:
            mark = self.mark()
            self.send(b"F")
            try:
                self.wait_for(
                    lambda m=mark: any(self.shows(d, since=m) for d in DIALOGS), 10, "the plan dialog"
                )
                return
            except AssertionError:
                if time.monotonic() > deadline:
                    raise

    def start_plan(self) -> str:
        """Free every GPU of the host under the cursor (`F`, then ctrl+k: demo-a, or demo-b when its
        row came first); back once the probe has signalled, with the plan's id. A server on each host
        ignores SIGTERM: the plan then waits 5 s for it, still running."""
        from gputui.kill.auditlog import read_records

        self.up()
        self.open_dialog()

        def signalled() -> bool:
            if not self.log.exists():
                return False
            records, _ = read_records(self.log)
            return any(r["kind"] == "event" and r.get("signal") == "SIGTERM" for r in records)

        # A confirmation that comes before the dialog has drawn its targets is refused, and the
        # dialog says so: a person reads them and presses again, and so does this.
        mark = self.mark()
        self.send(CTRL_K)
        self.wait_for(lambda: signalled() or self.shows(REFUSED, since=mark), 60, "the plan's start")
        if not signalled():
            self.pause(0.5)
            self.send(CTRL_K)
        self.wait_for(signalled, 60, "a SIGTERM event in the audit log")
        records, _ = read_records(self.log)
        [plan] = [r["action"] for r in records if r["kind"] == "plan"]
        return plan

    # -- the terminal goes ---------------------------------------------------------------------

    def hang_up(self) -> float:
        """Close the terminal (the pty's master side); the monotonic time it closed."""
        self.pump()
        assert self.master is not None
        os.close(self.master)
        self.master = None
        return time.monotonic()

    def terminate(self) -> float:
        self.pump()
        self.proc.send_signal(signal.SIGTERM)
        return time.monotonic()

    def wait_exit(self, timeout: float) -> int | None:
        """The app's exit status once it has exited (None if it is still there after `timeout`);
        `exited_at` is when it was first seen gone."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.pump()
            time.sleep(0.005)
        if self.proc.returncode is not None and self.exited_at is None:
            self.exited_at = time.monotonic()
        return self.proc.returncode

    def left_behind(self, timeout: float) -> list[int]:
        """The recorded processes still there after waiting up to `timeout` for them to end."""
        deadline = time.monotonic() + timeout
        while True:
            left = [pid for pid, started in self.seen.items() if alive(pid, started)]
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.05)

    def sim_dirs(self) -> list[str]:
        """The sims' directories left (a sim removes its own when it ends)."""
        return sorted(p.name for p in self.tmpdir.iterdir() if p.name.startswith("gputui-sim-"))

    def close(self) -> None:
        """End what is left of what this started (the app, then each recorded process, by PID and
        start time: nothing else), and close the terminal."""
        if self.proc.poll() is None:
            self.seen.update(descendants(self.pid))
            self.proc.kill()
        self.proc.wait()
        for pid, started in self.seen.items():
            if alive(pid, started):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        if self.master is not None:
            os.close(self.master)
            self.master = None

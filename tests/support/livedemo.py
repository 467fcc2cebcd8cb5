"""The live demo (gputui/cli/demod.py) as its tests run it: a private runtime directory and TMPDIR
per test, the real `gputui` command (a wrapper on PATH for this checkout), the processes of the
demo recorded by PID and start time (below the daemon in /proc, or naming the test's directories),
and `gputui snapshot --json` read back. The `live` fixture (tests/cli/conftest.py) stops the demo
and checks that nothing of it is left."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputui.probe.readers.sim import start_time
from tests.support.paths import REPO
from tests.support.simprobe import alive
from tests.support.waiting import wait_until

TIMEOUT = 300.0  # generous: the CI machine is busy; nothing here asserts a duration
POLL = 0.2  # seconds between two looks at the demo (each may run a `gputui` command)


def parents() -> dict[int, int]:
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    text = f.read()
            except OSError:
                continue
            found[int(name)] = int(text[text.rindex(")") + 2 :].split()[1])
    return found


def below(root: int) -> set[tuple[int, int | None]]:
    """(pid, start time) of every process below `root` (walking ppids in /proc)."""
    table = parents()
    found: set[int] = set()
    frontier = {root}
    while frontier:
        nxt = {pid for pid, ppid in table.items() if ppid in frontier} - found
        found |= nxt
        frontier = nxt
    return {(pid, start_time(pid)) for pid in found}


def naming(text: str) -> set[tuple[int, int | None]]:
    """Processes whose command line contains `text` (the test's private directory)."""
    out = set()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        if text in cmdline:
            out.add((int(name), start_time(int(name))))
    return out


@dataclass
class Live:
    root: Path  # the test's own directory
    run: Path  # its XDG_RUNTIME_DIR
    env: dict[str, str]
    cwd: Path
    seen: set[tuple[int, int | None]] = field(default_factory=set)  # processes of the demo, recorded

    @property
    def demo_dir(self) -> Path:
        return self.run / "gputui-demo"

    def gputui(
        self, *args: str, timeout: float = TIMEOUT, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["gputui", *args],
            cwd=self.cwd,
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def status(self) -> dict[str, Any]:
        r = self.gputui("demo", "status", "--json")
        assert r.returncode in (0, 1), r.stdout + r.stderr
        doc = json.loads(r.stdout)
        assert doc["running"] == (r.returncode == 0)
        return doc

    def record(self) -> set[tuple[int, int | None]]:
        """Every process of the running demo now (the daemon and all below it)."""
        doc = self.status()
        if doc["running"]:
            pid = doc["pid"]
            self.seen |= {(pid, start_time(pid))} | below(pid)
        self.seen |= naming(str(self.root))
        return {p for p in self.seen if alive(*p)}

    def left(self) -> list[tuple[int, int | None]]:
        return sorted(p for p in self.seen | naming(str(self.root)) if alive(*p))


def private_env(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    run = tmp_path / "run"
    run.mkdir()
    os.chmod(run, 0o700)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "gputui"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m gputui "$@"\n')
    wrapper.chmod(0o755)
    env = dict(os.environ, XDG_RUNTIME_DIR=str(run), TMPDIR=str(tmp), PYTHONPATH=str(REPO))
    env["PATH"] = f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}"
    env.pop("GPUTUI_DEMO", None)  # the live demo (the suite's conftest asks for a fresh one)
    return env, run, tmp


def snapshot(demo: Live, *hosts: str) -> dict[str, Any]:
    r = demo.gputui("snapshot", "--demo", *hosts, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def processes(doc: dict[str, Any], host: str, gpu: int | None = None) -> set[tuple[int, int]]:
    (entry,) = [h for h in doc["hosts"] if h["name"] == host]
    return {
        (p["pid"], p["start_time"])
        for p in entry["processes"]
        if p["gpus"] and (gpu is None or gpu in p["gpus"])
    }


def commands_on(doc: dict[str, Any], host: str, gpu: int) -> list[str]:
    (entry,) = [h for h in doc["hosts"] if h["name"] == host]
    return [" ".join(p["command"]) for p in entry["processes"] if gpu in p["gpus"]]


@contextlib.contextmanager
def live_demo(tmp_path: Path) -> Iterator[Live]:
    """A live demo of the test's own, stopped at the end with a check that no process of it is left.
    Only processes recorded as the demo's are ever signalled, and only if `gputui demo stop` did not
    end them. (The `live` fixture of tests/cli and tests/serve.)"""
    env, run, _ = private_env(tmp_path)
    cwd = tmp_path / "work"
    cwd.mkdir()
    demo = Live(tmp_path, run, env, cwd)
    try:
        yield demo
    finally:
        try:
            demo.record()
        except AssertionError:
            pass  # a status that failed: the stop and the scan below still say what is left
        stopped = demo.gputui("demo", "stop")
        wait_until(lambda: not demo.left(), 60.0, step=POLL)
        left = demo.left()
        for pid, _ in left:  # only processes of this test's own demo, recorded above
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert not left, f"processes of the demo left after `gputui demo stop`: {left}"

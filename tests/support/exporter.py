"""`gputui export` and `gputui serve` as the tests run them: a real subprocess, the URL it serves read
from its stderr, and ended by its PID (SIGTERM, then SIGKILL if it does not go), always reaped."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# What a serving command says on stderr once it listens (after the demo's start, if any).
SERVING = re.compile(r"gputui (?:export|serve): serving (\S+)")


def env(**extra: str) -> dict[str, str]:
    """This environment, the repository first on the path (GPUTUI_DEMO=fresh comes from conftest)."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, **extra)


def gputui(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """`gputui ARGS...` to its end (`timeout`: only a guard against a hang), its output as text."""
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env(),
        timeout=timeout,
        check=False,
    )


def start(*args: str, command: str = "export") -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "gputui", command, *args],
        cwd=REPO,
        env=env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def served_url(proc: subprocess.Popen[bytes], timeout: float = 120) -> str:
    """The URL the command says it serves (export: /metrics; serve: the page), read from its stderr
    line by line without blocking past `timeout`."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    said: list[str] = []
    line = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.2)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        chunk = os.read(proc.stderr.fileno(), 1)
        if not chunk:
            break
        line += chunk
        if chunk == b"\n":
            said.append(line.decode())
            found = SERVING.match(said[-1])
            if found:
                return found.group(1)
            line = b""
    raise AssertionError(f"it said {[*said, line.decode()]!r} (exit {proc.poll()})")


def get(
    url: str, headers: dict[str, str] | None = None, timeout: float = 30
) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of a GET; an HTTP error status is an answer too."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def wait_for(condition, timeout: float = 120, every: float = 0.2):
    """`condition()`'s first true value within `timeout` seconds (None past it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    return None


def stop(proc: subprocess.Popen[bytes], timeout: float = 60) -> int:
    """SIGTERM to the process this test started (by its PID), then SIGKILL if it lingers; its exit
    status, once reaped."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    return proc.returncode


@contextmanager
def exporter_over_demo() -> Iterator[str]:
    """`gputui export --listen` over a fresh demo (demo-a 4 GPUs, demo-b 8): its host:port."""
    proc = start("--demo", "--listen", "127.0.0.1:0", "--interval", "1")
    try:
        yield urllib.parse.urlsplit(served_url(proc)).netloc
    finally:
        assert stop(proc) == 0

"""`gputui export` as the tests run it: a real subprocess, its URL read from its stderr, and ended by
its PID (SIGTERM, then SIGKILL if it does not go), always reaped."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVING = "gputui export: serving "


def env(**extra: str) -> dict[str, str]:
    """This environment, the repository first on the path (GPUTUI_DEMO=fresh comes from conftest)."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, **extra)


def start(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "gputui", "export", *args],
        cwd=REPO,
        env=env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def served_url(proc: subprocess.Popen[bytes], timeout: float = 120) -> str:
    """The /metrics URL the exporter says it serves (its first stderr line)."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n") and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.2)
        if ready:
            chunk = os.read(proc.stderr.fileno(), 1)
            if not chunk:
                break
            line += chunk
        elif proc.poll() is not None:
            break
    text = line.decode()
    assert text.startswith(SERVING), f"exporter said {text!r} (exit {proc.poll()})"
    return text[len(SERVING) :].strip()


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

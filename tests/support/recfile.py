"""Recordings for the tests, written by gputui's own writer from the replay fixtures (the real sim
probe's records), with a clock the test sets: one sample of each demo host a second."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from gputui.recording.format import RecordingWriter
from tests.support.paths import FIXTURES, REPO

START = 1764554040.0  # 2025-12-01 01:54:00 UTC


def fixture(name: str) -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines() if line.strip()
    ]


class Clock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def demo_recording(
    path: Path,
    seconds: int = 10,
    *,
    hosts: tuple[str, ...] = ("demo-a", "demo-b"),
    sources: dict[str, str] | None = None,
    start: float = START,
    close: bool = True,
    max_bytes: int = 1 << 30,
) -> RecordingWriter:
    """`seconds` samples of each host, one a second from `start` + 1 (their hellos at `start`).
    `sources`: the fixture each host plays (default: its own name's)."""
    clock = Clock(start)
    records = {h: fixture((sources or {}).get(h, h)) for h in hosts}
    writer = RecordingWriter(path, list(hosts), interval=1.0, max_bytes=max_bytes, clock=clock)
    for host in hosts:
        writer.write(host, "status", {"status": "live", "reason": None, "detail": None})
        writer.write(host, "probe", records[host][0])
    for i in range(seconds):
        clock.now = start + 1 + i
        for host in hosts:
            writer.write(host, "probe", records[host][1 + i])
    clock.now = start + seconds + 0.5
    if close:
        writer.close("seconds")
    return writer


def lines_of(path: Path) -> list[bytes]:
    with gzip.open(path, "rb") as f:
        return f.read().splitlines(keepends=True)


def gzip_lines(path: Path, lines: list[bytes]) -> None:
    with gzip.open(path, "wb") as f:
        for line in lines:
            f.write(line)


def gputui(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The real command, from this checkout."""
    environ = dict(env or os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environ,
        stdin=subprocess.DEVNULL,
        check=False,
    )


EVERY = 64 << 10  # bytes of entries between two checkpoints, for these tests
SECONDS = 400


def long_recording(path: Path, seconds: int = SECONDS, every: int | None = EVERY) -> None:
    """Two demo hosts, a sample each a second (the fixtures' samples over and over); demo-b goes down
    at +100 and comes back (a hello, then samples) at +200; demo-a reconnects at +300 and sends no
    sample until +310."""
    clock = Clock(START)
    records = {h: fixture(h) for h in ("demo-a", "demo-b")}
    writer = RecordingWriter(path, ["demo-a", "demo-b"], interval=1.0, clock=clock, checkpoint_every=every)
    for host, rec in records.items():
        writer.write(host, "status", {"status": "live", "reason": None, "detail": None})
        writer.write(host, "probe", rec[0])
    for i in range(seconds):
        clock.now = START + 1 + i
        for host, rec in records.items():
            if host == "demo-b" and i == 100:
                writer.write(host, "status", {"status": "down", "reason": "closed", "detail": "went away"})
            if host == "demo-b" and 100 <= i < 200:
                continue
            if (host == "demo-b" and i == 200) or (host == "demo-a" and i == 300):
                writer.write(host, "probe", rec[0])
            if host == "demo-a" and 300 <= i < 310:
                continue
            writer.write(host, "probe", rec[1 + i % (len(rec) - 1)])
    clock.now = START + seconds + 0.5
    writer.close("seconds")

"""Idle holders on the command line (issue 21): `gputui snapshot --json` gives each process its idle
streak, `--watch` sees it grow into an idle holder, and `gputui wait` names an idle holder as what a
GPU waits on.

Real subprocesses on the demo (demo-a alone, a fresh simulated host per run: its notebook kernel
holds 12 GiB of GPU 2 at 0 % SM from the start, its vLLM server keeps GPUs 0 and 1 at 93 %). A
threshold of 0.02 minutes (1.2 s) makes the test short; nothing asserts how long anything took.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.cli import gputui as run_gputui

REPO = Path(__file__).resolve().parents[2]
IDLE = ("--idle-minutes", "0.02")  # 1.2 s


def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO))


def gputui(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_gputui(*args, timeout=timeout)


def by_name(doc: dict[str, Any], needle: str) -> list[dict[str, Any]]:
    return [p for h in doc["hosts"] for p in h["processes"] if needle in " ".join(p.get("command") or [])]


def test_a_single_snapshot_says_who_is_idle_now_and_since_when() -> None:
    run = gputui("snapshot", "--demo", "demo-a", "--json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["idle_minutes"] == 1.0  # the demo's default: an idle holder within a minute
    (kernel,) = by_name(doc, "notebook_kernel.py")
    sample_time = kernel["idle_since"]
    assert isinstance(sample_time, float) and kernel["idle_seconds"] == 0.0
    assert kernel["idle_holder"] is False  # one sample: idle now, not yet for a minute
    for busy in by_name(doc, "vllm_serve.py"):
        assert (busy["idle_since"], busy["idle_seconds"], busy["idle_holder"]) == (None, None, False)
    # Every process record has the fields (null where they say nothing).
    assert all(
        {"idle_since", "idle_seconds", "idle_holder"} <= p.keys()
        for h in doc["hosts"]
        for p in h["processes"]
    )


def test_snapshot_watch_sees_the_streak_grow_into_an_idle_holder() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputui", "snapshot", "--demo", "demo-a", "--watch", "0.5", "--json", *IDLE],
        cwd=REPO,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    docs: list[dict[str, Any]] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            docs.append(json.loads(line))
            kernels = by_name(docs[-1], "notebook_kernel.py")
            if kernels and kernels[0]["idle_holder"]:
                break
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
    assert docs and docs[-1]["idle_minutes"] == 0.02
    streak = [by_name(d, "notebook_kernel.py")[0] for d in docs]
    assert streak[-1]["idle_holder"] is True and streak[-1]["idle_seconds"] >= 1.2
    # One streak all along: it began once, and its length is measured from there.
    assert len({k["idle_since"] for k in streak}) == 1
    seconds = [k["idle_seconds"] for k in streak]
    assert seconds == sorted(seconds) and seconds[0] < seconds[-1]
    # A server at 93 % is never idle.
    assert not any(p["idle_holder"] for d in docs for p in by_name(d, "vllm_serve.py"))


def test_snapshot_text_names_an_idle_holder() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gputui",
            "snapshot",
            "--demo",
            "demo-a",
            "--watch",
            "0.5",
            "--idle-minutes",
            "0.02",
        ],
        cwd=REPO,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    seen = ""
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "idle holder: 0% SM for" not in seen:
            line = proc.stdout.readline()
            if not line:
                break
            seen += line
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
    line = next(row for row in seen.splitlines() if "idle holder" in row)
    assert "notebook_kern" in line and "12.0 GiB" in line and "(idle holder: 0% SM for " in line, line


def test_wait_names_an_idle_holder_as_what_a_gpu_waits_on() -> None:
    run = gputui(
        "wait", "--demo", "demo-a", "--gpu", "2", "--timeout", "4", "--idle-minutes", "0.02", "--json"
    )
    assert run.returncode == 1, run.stderr  # GPU 2 is held: a timeout
    doc = json.loads(run.stdout)
    (gpu,) = [g for h in doc["hosts"] for g in h["gpus"].values()]
    (processes,) = [u for u in gpu["unready"] if u["condition"] == "processes"]
    assert "notebook_kernel.py -f .../kernel-4f1c.json; idle holder: 0% SM for " in processes["words"], (
        processes
    )
    # The same words for people, on stderr.
    text = gputui("wait", "--demo", "demo-a", "--gpu", "2", "--timeout", "4", "--idle-minutes", "0.02")
    assert text.returncode == 1 and "idle holder: 0% SM for" in text.stderr, text.stderr


def test_a_bad_idle_minutes_is_a_usage_error() -> None:
    for command in ("snapshot", "wait"):
        run = gputui(command, "--demo", "--idle-minutes", "0")
        assert run.returncode == 2 and "out of range" in run.stderr and "Traceback" not in run.stderr, (
            run.stderr
        )

#!/usr/bin/env python3
"""A stopped CUDA job, cleaned by `gputui clean` on a real GPU (issue 17 #11).

    python bench/gpu_bad_day.py [--runs 3] [--gib 2] [--gpu 0] [--term-timeout 3] [--out raw.json]

Each run starts a real CUDA job (tests/support/cudajob.py: PyTorch allocates `--gib` GiB on `--gpu`), stops
it with SIGSTOP (a forgotten Ctrl-Z), then runs `gputui clean local --pid PID --yes --json
--term-timeout 3` as a command and times it. It prints whether the job ended by SIGTERM (the
verdict's exit signal, no SIGKILL sent, and the job's own exit status, read here: it is our child)
and how long the clean took. Before issue 17 the job sat out the whole TERM timeout, stopped, and
died of SIGKILL (3.3 s with a 3 s timeout on an H200); SIGCONT after SIGTERM lets it end at once.
The same is measured on a job that was not stopped, for comparison.

Needs an NVIDIA GPU and PyTorch with CUDA: without them it says so and exits 3 (nothing started).
Only the jobs it starts are signalled (SIGSTOP here; the rest by gputui clean), and each is ended
and reaped at the end of its run.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.cudajob import CudaJob  # noqa: E402  (after the path is set)

EXIT_NO_GPU = 3


def gpu_missing() -> str | None:
    """Why this host cannot run the bench, or None. Runs nothing but `nvidia-smi -L`."""
    if not os.path.exists("/dev/nvidiactl"):
        return "no NVIDIA driver here (/dev/nvidiactl is missing)"
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "nvidia-smi is not on PATH"
    listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60, check=False)
    if listed.returncode != 0 or "GPU " not in listed.stdout:
        return "nvidia-smi lists no GPU: " + (listed.stderr or listed.stdout).strip()[:200]
    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed (the CUDA job needs it)"
    return None


def state(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return raw[raw.rindex(b")") + 2 :].split()[0].decode()


def until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return bool(condition())


def one_run(gib: float, gpu: int, term_timeout: float, stop_first: bool, log: Path) -> dict:
    job = CudaJob(gib=gib, gpu=gpu)
    try:
        if stop_first:
            os.kill(job.pid, signal.SIGSTOP)  # our own child
            if not until(lambda: state(job.pid) == "T", 10.0):
                raise RuntimeError(f"the job did not stop (state {state(job.pid)})")
        command = [
            sys.executable,
            "-m",
            "gputui",
            "clean",
            "local",
            "--pid",
            str(job.pid),
            "--yes",
            "--json",
            "--term-timeout",
            f"{term_timeout:g}",
            "--log",
            str(log),
        ]
        t0 = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=300, check=False)
        took = time.perf_counter() - t0
        try:
            status = job.proc.wait(timeout=10)  # our child: how it really died
        except subprocess.TimeoutExpired:
            status = None
        try:
            doc = json.loads(done.stdout)
            [host] = doc["hosts"]
            verdict = next((p for p in host["processes"] if p["pid"] == job.pid), {})
        except (ValueError, KeyError, TypeError):
            host, verdict = {}, {}
        signals = list(verdict.get("signals") or [])
        return {
            "stopped_first": stop_first,
            "clean_seconds": round(took, 3),
            "exit_code": done.returncode,
            "status": host.get("status"),
            "result": verdict.get("result"),
            "exit_signal": verdict.get("exit_signal"),
            "signals": signals,
            "job_returncode": status,
            "ended_by_term": verdict.get("exit_signal") == "SIGTERM"
            and "SIGKILL" not in signals
            and status == -signal.SIGTERM,
            "stderr_tail": done.stderr[-600:] if done.returncode != 0 else "",
        }
    finally:
        job.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--term-timeout", type=float, default=3.0)
    parser.add_argument("--out", type=Path, default=None, help="write every run as JSON here")
    args = parser.parse_args()
    why = gpu_missing()
    if why is not None:
        print(f"gpu_bad_day: not run: {why}", file=sys.stderr)
        return EXIT_NO_GPU
    runs = []
    with tempfile.TemporaryDirectory(prefix="gpu-bad-day-") as tmp:
        for n in range(args.runs):
            for stop_first in (True, False):
                run = one_run(args.gib, args.gpu, args.term_timeout, stop_first, Path(tmp) / "actions.jsonl")
                runs.append(run)
                what = "stopped (SIGSTOP)" if stop_first else "running"
                print(
                    f"run {n + 1} {what:<17} clean {run['clean_seconds']:.3f} s, exit {run['exit_code']}, "
                    f"{run['status']}; job {run['result']} after {','.join(run['signals']) or '-'} "
                    f"(exit status {run['job_returncode']}): "
                    + ("ended by SIGTERM" if run["ended_by_term"] else "NOT ended by SIGTERM"),
                    flush=True,
                )
                if run["stderr_tail"]:
                    print(run["stderr_tail"], file=sys.stderr)
    stopped = [r for r in runs if r["stopped_first"]]
    by_term = sum(r["ended_by_term"] for r in stopped)
    worst = max(r["clean_seconds"] for r in stopped)
    print(
        f"stopped jobs ended by SIGTERM: {by_term} of {len(stopped)}; slowest clean {worst:.3f} s "
        f"(term timeout {args.term_timeout:g} s)"
    )
    if args.out is not None:
        args.out.write_text(
            json.dumps({"term_timeout": args.term_timeout, "gib": args.gib, "runs": runs}, indent=1)
        )
    return 0 if by_term == len(stopped) else 1


if __name__ == "__main__":
    sys.exit(main())

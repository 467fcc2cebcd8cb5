#!/usr/bin/env python3
"""Holder scan on a busy host: gputui's full and steady-state scans vs `fuser` and `lsof`.

    python bench/holder_scan.py [--procs 2000] [--fds 40] [--holders 20] [--runs 5] [--out raw.json]

Starts `--procs` processes (forked from one parent, so memory is shared) that each keep `--fds` open
files, `--holders` of them also holding fake GPU device files in a private directory; times each
way of finding the holders of those device files; then ends every process it started, by PID, and
reaps it. Prints a table; writes the raw numbers with --out.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui.api import HolderScanner

DEVICES = ("nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl", "nvidia-uvm")


def start_load(procs: int, fds: int, holders: int, tmp: Path) -> tuple[list[int], int]:
    """Fork `procs` children that wait on a pipe; returns (pids, write end of the pipe)."""
    plain = [os.open(tmp / "data", os.O_RDONLY) for _ in range(fds)]
    devices = [str(tmp / "dev" / d) for d in DEVICES]
    r, w = os.pipe()
    pids = []
    every = max(1, procs // max(1, holders)) if holders else 0
    for i in range(procs):
        pid = os.fork()
        if pid == 0:  # the child: hold the files, wait for EOF on the pipe, exit
            os.close(w)
            if every and i % every == 0:
                for d in devices:
                    os.open(d, os.O_RDWR)
            os.read(r, 1)
            os._exit(0)
        pids.append(pid)
    os.close(r)
    for fd in plain:
        os.close(fd)
    return pids, w


def stop_load(pids: list[int], w: int) -> None:
    os.close(w)  # EOF: every child exits by itself
    deadline = time.monotonic() + 30
    for pid in pids:
        while True:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)  # only our own children, by PID
                os.waitpid(pid, 0)
                break
            time.sleep(0.001)


def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(fn, runs: int) -> tuple[list[float], list[float]]:
    cpu, wall = [], []
    for _ in range(runs):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return cpu, wall


def timed_spawn(argv: list[str], runs: int) -> tuple[list[float], list[float]]:
    cpu, wall = [], []
    for _ in range(runs):
        c0, w0 = child_cpu(), time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        wall.append(time.perf_counter() - w0)
        cpu.append(child_cpu() - c0)
    return cpu, wall


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=2000)
    ap.add_argument("--fds", type=int, default=40)
    ap.add_argument("--holders", type=int, default=20)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="gputui-bench-") as d:
        tmp = Path(d)
        (tmp / "dev").mkdir()
        (tmp / "data").write_text("")
        for name in DEVICES:
            (tmp / "dev" / name).write_text("")
        pids, w = start_load(args.procs, args.fds, args.holders, tmp)
        try:
            prefix = str(tmp / "dev" / "nvidia")
            files = [str(tmp / "dev" / n) for n in DEVICES]
            scanner = HolderScanner(prefix)
            expected = len(scanner.scan(full=True).holders)
            rows = {
                "gputui full scan": timed(lambda: scanner.scan(full=True), args.runs),
                "gputui steady-state scan": timed(scanner.scan, args.runs * 6),
            }
            if shutil.which("fuser"):
                rows["fuser FILES (spawn)"] = timed_spawn(["fuser", *files], args.runs)
            if shutil.which("lsof"):
                rows["lsof FILES (spawn)"] = timed_spawn(["lsof", "-n", "-w", *files], args.runs)
        finally:
            stop_load(pids, w)
    nprocs = len(os.listdir("/proc"))
    print(
        f"\nholder scan: {args.procs} extra processes x {args.fds} fds, {expected} holders "
        f"({nprocs} processes in /proc after the load ended), {os.cpu_count()} cores"
    )
    print(f"{'what':<28} {'wall ms (median)':>17} {'wall ms (p95)':>14} {'CPU ms (median)':>16}")
    raw = {}
    for label, (cpu, wall) in rows.items():
        w_ms = sorted(x * 1e3 for x in wall)
        c_ms = sorted(x * 1e3 for x in cpu)
        p95 = w_ms[min(len(w_ms) - 1, int(len(w_ms) * 0.95))]
        print(f"{label:<28} {statistics.median(w_ms):>17.2f} {p95:>14.2f} {statistics.median(c_ms):>16.2f}")
        raw[label] = {"wall_ms": w_ms, "cpu_ms": c_ms}
    full = statistics.median(raw["gputui full scan"]["wall_ms"])
    steady = statistics.median(raw["gputui steady-state scan"]["wall_ms"])
    print(f"steady-state / full = 1/{full / steady:.0f}")
    if args.out:
        args.out.write_text(json.dumps({"procs": args.procs, "fds": args.fds, "rows": raw}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

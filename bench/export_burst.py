#!/usr/bin/env python3
"""`gputui export --listen` under load: a burst of scrapes at once, then slow clients.

    python bench/export_burst.py [--burst 300,1000] [--slow 50] [--src DIR] [--name dev]
                                 [--out-dir bench/results]

The real command (`gputui export --demo --listen 127.0.0.1:0`, a fresh demo of two hosts) in a process
of its own, from the checkout DIR (default: this one; another checkout's commit gives the figures
before a change). For each burst size, that many client threads wait at a barrier, then each opens
its own connection and scrapes /metrics once (a 60 s timeout, as Prometheus' largest usual one):

- answered: 200 with the metrics; failed: anything else (refused, reset, timed out), by kind;
- latency p50 / p99 / max of the answered ones, from the barrier to the last byte;
- the exporter's peak thread count while the burst runs (/proc/PID/status, polled).

Then `--slow` clients each send a request's first line and one byte a second after it (never a whole
request): the exporter's threads while they hang, whether a scrape is answered meanwhile, how long
until the exporter has closed them all, and what it said on stderr (lines, tracebacks, bytes).
Prints a table; writes `<out-dir>/export_burst_<name>.txt` and `.raw.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import select
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVING = b"gputui export: serving "
TIMEOUT = 60.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))] if ordered else 0.0


def threads(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))
    except (OSError, StopIteration):
        return 0


def start(src: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = dict(os.environ, PYTHONPATH=str(src), GPUTUI_DEMO="fresh")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputui", "export", "--demo", "--listen", "127.0.0.1:0", "--interval", "1"],
        cwd=src,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    line = b""
    while not line.endswith(b"\n"):
        ready, _, _ = select.select([proc.stderr], [], [], 120)
        chunk = os.read(proc.stderr.fileno(), 1) if ready else b""
        if not chunk:
            raise SystemExit(f"the exporter said {line!r}")
        line += chunk
    if not line.startswith(SERVING):
        raise SystemExit(f"the exporter said {line!r}")
    url = line[len(SERVING) :].decode().strip()
    ready_url = url.removesuffix("/metrics") + "/-/ready"
    for _ in range(600):
        try:
            with urllib.request.urlopen(ready_url, timeout=TIMEOUT):
                break
        except OSError:
            time.sleep(0.2)
    return proc, url


def scrape(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=TIMEOUT) as answer:
        return answer.read()


def burst(url: str, pid: int, size: int) -> dict[str, Any]:
    gate = threading.Barrier(size + 1)
    times: list[float] = []
    failed: Counter[str] = Counter()
    lock = threading.Lock()

    def client() -> None:
        gate.wait()
        started = time.perf_counter()
        try:
            ok = b"gputui_host_up" in scrape(url)
            problem = "" if ok else "no metrics"
        except Exception as exc:  # every way a scrape fails is counted by its kind
            problem = type(exc).__name__
        with lock:
            if problem:
                failed[problem] += 1
            else:
                times.append((time.perf_counter() - started) * 1000)

    clients = [threading.Thread(target=client) for _ in range(size)]
    for c in clients:
        c.start()
    peak = threads(pid)
    gate.wait()
    while any(c.is_alive() for c in clients):
        peak = max(peak, threads(pid))
        time.sleep(0.01)
    return {
        "burst": size,
        "answered": len(times),
        "failed": dict(failed),
        "ms_p50": statistics.median(times) if times else 0.0,
        "ms_p99": pct(times, 99),
        "ms_max": max(times, default=0.0),
        "peak_threads": peak,
    }


def slow(url: str, pid: int, count: int) -> dict[str, Any]:
    parts = urllib.parse.urlsplit(url)
    before = threads(pid)
    clients = []
    for _ in range(count):
        c = socket.create_connection((parts.hostname, parts.port), timeout=TIMEOUT)
        c.sendall(b"GET /metrics HTTP/1.1\r\n")
        clients.append(c)
    opened = time.monotonic()
    closed_at: list[float | None] = [None] * count
    peak, scrape_ok = before, None
    while None in closed_at and time.monotonic() - opened < 120:
        for i, c in enumerate(clients):
            if closed_at[i] is None:
                try:
                    c.sendall(b"X")
                    c.setblocking(False)
                    try:
                        if c.recv(4096) == b"":
                            closed_at[i] = time.monotonic() - opened
                    except BlockingIOError:
                        pass
                    finally:
                        c.setblocking(True)
                except OSError:
                    closed_at[i] = time.monotonic() - opened
        peak = max(peak, threads(pid))
        if scrape_ok is None:
            try:
                scrape_ok = b"gputui_host_up" in scrape(url)
            except OSError:
                scrape_ok = False
        time.sleep(1)
    for c in clients:
        c.close()
    cut = [t for t in closed_at if t is not None]
    return {
        "slow": count,
        "threads_before": before,
        "peak_threads": peak,
        "scrape_meanwhile": bool(scrape_ok),
        "closed": len(cut),
        "all_closed_s": max(cut, default=0.0) if len(cut) == count else None,
    }


def measure(src: Path, sizes: list[int], slow_count: int) -> dict[str, Any]:
    proc, url = start(src)
    try:
        bursts = [burst(url, proc.pid, size) for size in sizes]
        slow_run = slow(url, proc.pid, slow_count) if slow_count else None
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.stderr is not None
    said = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    return {
        "bursts": bursts,
        "slow": slow_run,
        "stderr_lines": len(said.splitlines()),
        "stderr_tracebacks": said.count("Traceback"),
        "stderr_bytes": len(said.encode()),
        "exit": proc.returncode,
    }


def table(result: dict[str, Any], head: str) -> str:
    lines = [
        head,
        "| scrapes at once | answered | failed | ms p50 | ms p99 | ms max | peak threads |",
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for b in result["bursts"]:
        failed = ", ".join(f"{n} {kind}" for kind, n in b["failed"].items()) or "0"
        lines.append(
            f"| {b['burst']:,} | {b['answered']:,} | {failed} | {b['ms_p50']:.0f} | {b['ms_p99']:.0f} | "
            f"{b['ms_max']:.0f} | {b['peak_threads']} |"
        )
    s = result["slow"]
    if s:
        closed = (
            f"all in {s['all_closed_s']:.0f} s"
            if s["all_closed_s"] is not None
            else f"{s['closed']} in 120 s"
        )
        lines.append(
            f"\n{s['slow']} slow clients (a byte a second): threads {s['threads_before']} -> {s['peak_threads']}, "
            f"a scrape meanwhile {'answered' if s['scrape_meanwhile'] else 'NOT answered'}, closed {closed}"
        )
    lines.append(
        f"stderr: {result['stderr_lines']} lines, {result['stderr_tracebacks']} tracebacks, "
        f"{result['stderr_bytes']:,} bytes; exit {result['exit']}"
    )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--burst", default="300,1000", help="scrapes at once, comma-separated sizes")
    p.add_argument("--slow", type=int, default=50, help="slow clients after the bursts (0: none)")
    p.add_argument("--src", default=str(ROOT), help="the gputui checkout to run")
    p.add_argument("--name", default="dev")
    p.add_argument("--out-dir", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()
    src = Path(args.src).resolve()
    commit = subprocess.run(
        ["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    load_before = os.getloadavg()[0]
    result = measure(src, [int(n) for n in args.burst.split(",")], args.slow)
    machine = (
        f"{platform.node()} ({os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d')}, load {load_before:.1f}-{os.getloadavg()[0]:.1f})"
    )
    text = table(result, f"gputui export --demo --listen, {src} (HEAD {commit}), {machine}")
    print(text)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"export_burst_{args.name}.txt").write_text(text + "\n")
    (out_dir / f"export_burst_{args.name}.raw.json").write_text(
        json.dumps({"machine": machine, "commit": commit, **result}, indent=1)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

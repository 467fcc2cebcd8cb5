#!/usr/bin/env python3
"""The cost of one Prometheus scrape of `gputui export --listen`, for 1, 128 and 1,024 replayed hosts.

    python bench/export_scrape.py [--hosts 1,128,1024] [--scrapes 40] [--gpus 8] [--name dev]
                                  [--out-dir bench/results]

Each host count runs in a process of its own (its RSS and CPU are its own). The exporter is the
real command (gputui.cli.export.run_export, listening on a free loopback port) on a fleet of
ReplayLinks: every host plays a recorded demo host (tests/fixtures/demo-a.jsonl: its hello and last
sample) widened to --gpus GPUs (GPUs 0-3 copied to 4-7 with other UUIDs and PIDs: a DGX-like host
of 8 GPUs and 22 process records), then holds it. A client thread scrapes /metrics with the headers
Prometheus sends (OpenMetrics preferred, gzip accepted; one connection per scrape) and reads the
whole answer; after two warm-up scrapes, --scrapes timed ones.

Measured per scrape:
- scrape ms: from the request to the last byte read (p50, p99): what Prometheus' scrape_duration sees;
- loop ms: the CPU the fleet's event loop spends building the families (gputui.views.metrics, timed alone
  in thread CPU time, median of 10): how long a scrape holds up the fleet's samples at the least;
- CPU ms: the whole process's CPU (loop, HTTP thread, client) over the timed scrapes, per scrape;
- bytes (the OpenMetrics text, and gzipped as sent), series (sample lines);
- RSS of the process at the end; the machine's load average (1 min) before and after each run: wall
  times on a shared machine say more about the others' load than about the exporter, CPU times do not.
Prints a table; writes `<out-dir>/export_scrape_<name>.txt` and `.raw.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gzip
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputui.api import Fleet, ReplayLink, families, load_recording  # noqa: E402
from gputui.cli import export as exportcmd  # noqa: E402

RECORDING = ROOT / "tests" / "fixtures" / "demo-a.jsonl"
HOLD = 3600.0  # the fleet's interval: a replayed host that sent its one sample stays live


def host_records(gpus: int) -> list[dict[str, Any]]:
    """The recorded demo host's hello and last sample, widened to `gpus` GPUs."""
    records = load_recording(RECORDING)
    hello = next(r for r in records if r.get("type") == "hello")
    sample = copy.deepcopy([r for r in records if r.get("type") == "sample"][-1])
    base_gpus, base_procs = list(sample["gpus"]), list(sample["processes"])
    width = len(base_gpus)
    for copy_no in range(1, -(-gpus // width)):
        for g in base_gpus:
            index = g["index"] + width * copy_no
            if index >= gpus:
                continue
            sample["gpus"].append(dict(g, index=index, minor=index, uuid=f"{g['uuid'][:-4]}{index:04d}"))
        for p in base_procs:
            shifted = [i + width * copy_no for i in p.get("gpus", []) if i + width * copy_no < gpus]
            if p.get("gpus") and not shifted:
                continue
            memory = {str(int(k) + width * copy_no): v for k, v in (p.get("gpu_memory") or {}).items()}
            util = {str(int(k) + width * copy_no): v for k, v in (p.get("gpu_util") or {}).items()}
            sample["processes"].append(
                dict(p, pid=p["pid"] + 100_000 * copy_no, gpus=shifted, gpu_memory=memory, gpu_util=util)
            )
    sample["gpus"] = sample["gpus"][:gpus]
    for g in sample["gpus"]:  # as a probe of today sends it (the recording predates the field)
        g["pci_bus_id"] = "00000000:%02X:00.0" % (0x18 + 0x10 * g["index"])
    return [hello, sample]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


# What Prometheus 2.x sends with a scrape: OpenMetrics preferred, gzip accepted.
PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip",
}


def fetch(url: str, headers: dict[str, str] | None = None) -> bytes:
    """The answer's body as sent (still compressed where it was)."""
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=300) as answer:
        return answer.read()


async def measure(hosts: int, gpus: int, scrapes: int) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    records = host_records(gpus)
    fleet = Fleet()
    for i in range(hosts):
        fleet.add(f"node{i:04d}", lambda: ReplayLink(records), read_only=True, interval=HOLD)
    # On a loaded machine a 1,024-host build can take the loop past the 10 s a scrape waits for
    # it (the server answers 503); the measurement waits as long as it takes.
    exportcmd.ON_LOOP_TIMEOUT = 300.0
    said: list[str] = []
    exportcmd.say = said.append  # the line that names the URL (the command prints it on stderr)
    args = argparse.Namespace(
        listen=("127.0.0.1", 0),
        once=False,
        textfile=None,
        interval=HOLD,
        timeout=300.0,
        connections=exportcmd.CONNECTIONS,
    )
    task = asyncio.ensure_future(exportcmd.run_export(args, fleet))
    while not said and not task.done():
        await asyncio.sleep(0.05)
    if task.done():
        raise SystemExit(f"the exporter ended: {task.result()} {said}")
    url = said[0].removeprefix("gputui export: serving ").strip()
    ready = url.removesuffix("/metrics") + "/-/ready"
    while True:
        try:
            await asyncio.to_thread(fetch, ready)
            break
        except OSError:
            await asyncio.sleep(0.2)
    # The families alone, on the loop, as a scrape has them built.
    builds = []
    for _ in range(10):
        started = time.thread_time()  # the loop's CPU: the machine's other load does not count
        built = families(fleet.hosts)
        builds.append((time.thread_time() - started) * 1000)
    series = sum(len(f.samples) for f in built)
    result: dict[str, Any] = {}

    def client() -> None:
        for _ in range(2):
            fetch(url, PROMETHEUS_HEADERS)
        times, sizes = [], []
        cpu = time.process_time()
        for _ in range(scrapes):
            started = time.perf_counter()
            body = fetch(url, PROMETHEUS_HEADERS)
            times.append((time.perf_counter() - started) * 1000)
            sizes.append(len(body))
        result["cpu_ms"] = (time.process_time() - cpu) * 1000 / scrapes
        result["times"], result["gzip_bytes"] = times, sizes[-1]
        text = gzip.decompress(body)
        result["bytes"] = len(text)
        result["lines"] = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))

    thread = threading.Thread(target=client)
    thread.start()
    while thread.is_alive():
        await asyncio.sleep(0.05)
    os.kill(os.getpid(), signal.SIGINT)  # the command's own orderly stop
    code = await task
    times = result["times"]
    return {
        "hosts": hosts,
        "gpus": hosts * gpus,
        "series": series,
        "lines": result["lines"],
        "bytes": result["bytes"],
        "gzip_bytes": result["gzip_bytes"],
        "loop_ms_p50": statistics.median(builds),
        "scrape_ms_p50": statistics.median(times),
        "scrape_ms_p99": pct(times, 99),
        "cpu_ms": result["cpu_ms"],
        "rss_mib": rss_mib(),
        "load": [load_before, os.getloadavg()[0]],
        "scrapes": len(times),
        "scrape_ms": times,
        "exit": code,
    }


HEAD = (
    "| hosts | GPUs | series | bytes (OpenMetrics) | gzip bytes | loop ms (p50) | scrape ms p50 | scrape ms p99 "
    "| CPU ms / scrape | RSS MiB | load avg |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
)


def row(r: dict[str, Any]) -> str:
    return (
        f"| {r['hosts']:,} | {r['gpus']:,} | {r['series']:,} | {r['bytes']:,} | {r['gzip_bytes']:,} | "
        f"{r['loop_ms_p50']:.1f} | {r['scrape_ms_p50']:.0f} | {r['scrape_ms_p99']:.0f} | {r['cpu_ms']:.0f} | "
        f"{r['rss_mib']:.0f} | {r['load'][0]:.0f}-{r['load'][1]:.0f} |"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", default="1,128,1024")
    p.add_argument("--scrapes", type=int, default=40)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--name", default="dev")
    p.add_argument("--out-dir", default=str(ROOT / "bench" / "results"))
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a run of its own: one host count
    args = p.parse_args()
    if args.one is not None:
        print(json.dumps(asyncio.run(measure(args.one, args.gpus, args.scrapes))))
        return 0
    runs = []
    for hosts in [int(h) for h in args.hosts.split(",")]:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                str(hosts),
                "--gpus",
                str(args.gpus),
                "--scrapes",
                str(args.scrapes),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            print(out.stderr[-3000:], file=sys.stderr)
            return 1
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    machine = f"{platform.node()} ({os.cpu_count()} CPUs, Python {platform.python_version()}, {time.strftime('%Y-%m-%d')})"
    table = "\n".join(
        [f"gputui export --listen, {args.scrapes} scrapes each, {machine}", HEAD, *map(row, runs)]
    )
    print(table)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"export_scrape_{args.name}.txt").write_text(table + "\n")
    (out_dir / f"export_scrape_{args.name}.raw.json").write_text(
        json.dumps({"machine": machine, "runs": runs}, indent=1)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

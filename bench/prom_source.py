#!/usr/bin/env python3
"""Prometheus as a source at size: 1,250 hosts of 8 GPUs (10,000 GPUs) in ONE real Prometheus, read by
a fleet of `@prometheus:` hosts at its interval.

    python bench/prom_source.py [--hosts 1250] [--gpus 8] [--scrape 5] [--interval 5]
                                [--seconds 60] [--fill 3]

A dcgm-exporter exposition of that many GPUs (its names and labels, the pod labels on half the GPUs,
tests/prom/servers.py) is written once and served by `python -m http.server`; Debian's `prometheus`
scrapes it every `--scrape` seconds (it holds 9 series a GPU: 90,000 at the default size). Once it has
every GPU and `--fill` scrapes more, the fleet is built as `gputui @prometheus:URL` builds it (the
source's query, one PromLink a host, one poller for all) and started in this process; when every host
is live, the window runs for `--seconds`.

Measured over the window: the poller's rounds (each two instant queries: wall time of the queries,
the CPU of decoding both answers and of handing the hosts their samples, by thread time around those
synchronous parts), the fleet process' CPU (user + system, % of one core) and its RSS, Prometheus'
own CPU, and the hosts live at the end. Every process started is ended by its PID.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gputui import api
from gputui.config import promql
from gputui.config.file import Config
from gputui.fleet.session import LIVE
from gputui.inventory.specs import host_specs
from gputui.transport import prometheus as link_module
from tests.prom.servers import StaticTarget, dcgm_gpu, exposition
from tests.support.exporter import wait_for
from tests.support.prometheus import Prometheus

TICKS = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    """User + system seconds of process `pid` (from /proc)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rpartition(b")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def fleet_exposition(hosts: int, gpus: int) -> str:
    made = []
    for h in range(hosts):
        name = f"gpu{h:04d}"
        for i in range(gpus):
            pod = ("ml", f"train-{h}", "trainer") if i % 2 == 0 else None
            made.append(dcgm_gpu(name, i, 1000 * (i + 1), (h + i) % 100, pod))
    return exposition(made)


class Timings:
    """Thread time and wall time of the poller's parts, each round."""

    def __init__(self) -> None:
        self.query_wall: list[float] = []  # one round's two queries, gathered
        self.decode_cpu: list[float] = []
        self.hand_out_cpu: list[float] = []
        self.rounds = 0

    def clear(self) -> None:
        self.query_wall, self.decode_cpu, self.hand_out_cpu, self.rounds = [], [], [], 0

    def install(self) -> None:
        decode, hand_out, round_ = promql.decode, link_module.Poller._hand_out, link_module.Poller._round
        timings = self

        def timed_decode(body: bytes, status: int, where: str) -> list[promql.Point]:
            began = time.thread_time()
            try:
                return decode(body, status, where)
            finally:
                timings.decode_cpu.append(time.thread_time() - began)

        def timed_hand_out(self: Any, series: Any, times: Any) -> None:
            began = time.thread_time()
            hand_out(self, series, times)
            timings.hand_out_cpu.append(time.thread_time() - began)

        async def timed_round(self: Any) -> None:
            began = time.monotonic()
            await round_(self)
            timings.query_wall.append(time.monotonic() - began)
            timings.rounds += 1

        promql.decode = timed_decode  # type: ignore[assignment]
        link_module.Poller._hand_out = timed_hand_out  # type: ignore[method-assign]
        link_module.Poller._round = timed_round  # type: ignore[method-assign]


async def measure(base: str, args: argparse.Namespace, prom_pid: int, timings: Timings) -> dict[str, Any]:
    specs = host_specs([f"@prometheus:{base}"], Config())
    fleet = api.fleet(specs, interval=args.interval)
    fleet.start()
    try:
        began = time.monotonic()
        while sum(v.status == LIVE for v in fleet.hosts) < len(specs) and time.monotonic() - began < 600:
            await asyncio.sleep(0.5)
        to_live = time.monotonic() - began
        timings.clear()
        cpu0, prom0, wall0 = time.process_time(), proc_cpu(prom_pid), time.monotonic()
        await asyncio.sleep(args.seconds)
        cpu1, prom1, wall1 = time.process_time(), proc_cpu(prom_pid), time.monotonic()
        live = sum(v.status == LIVE for v in fleet.hosts)
        gpus = sum(len(v.sample.gpus) for v in fleet.hosts if v.sample is not None)
    finally:
        await fleet.stop()
    wall = wall1 - wall0
    rounds = max(1, timings.rounds)
    decode_per_round = sum(timings.decode_cpu) / rounds
    hand_out_per_round = sum(timings.hand_out_cpu) / rounds
    return {
        "hosts": len(specs),
        "live": live,
        "gpus": gpus,
        "to_live_s": to_live,
        "rounds": timings.rounds,
        "query_wall_p50": statistics.median(timings.query_wall) if timings.query_wall else None,
        "query_wall_max": max(timings.query_wall, default=None),
        "poller_cpu_round": decode_per_round + hand_out_per_round,
        "decode_cpu_round": decode_per_round,
        "hand_out_cpu_round": hand_out_per_round,
        "fleet_cpu_pct": 100 * (cpu1 - cpu0) / wall,
        "prom_cpu_pct": 100 * (prom1 - prom0) / wall,
        "rss_mib": rss_mib(),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def table(r: dict[str, Any], args: argparse.Namespace) -> str:
    def ms(x: float | None) -> str:
        return "-" if x is None else f"{1000 * x:.0f} ms"

    rows = [
        ("hosts live / listed", f"{r['live']} / {r['hosts']}"),
        ("GPUs in the fleet's samples", f"{r['gpus']:,}"),
        ("interval / scrape", f"{args.interval:g} s / {args.scrape:g} s"),
        ("all hosts live after start", f"{r['to_live_s']:.1f} s"),
        ("rounds in the window", f"{r['rounds']} in {args.seconds:g} s"),
        ("round's two queries (wall), p50 / max", f"{ms(r['query_wall_p50'])} / {ms(r['query_wall_max'])}"),
        ("poller CPU a round (decode + hand out)", ms(r["poller_cpu_round"])),
        ("  decoding both answers", ms(r["decode_cpu_round"])),
        ("  hosts' samples built and handed out", ms(r["hand_out_cpu_round"])),
        ("fleet process CPU (% of one core)", f"{r['fleet_cpu_pct']:.1f} %"),
        ("Prometheus CPU (% of one core)", f"{r['prom_cpu_pct']:.1f} %"),
        ("fleet RSS / peak", f"{r['rss_mib']:.0f} MiB / {r['peak_rss_mib']:.0f} MiB"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=1250)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--scrape", type=float, default=5.0, help="Prometheus' scrape interval, s")
    parser.add_argument("--interval", type=float, default=5.0, help="the fleet's interval, s")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--fill", type=int, default=3, help="scrapes to wait after every GPU is there")
    args = parser.parse_args()
    if shutil.which("prometheus") is None:
        print("prometheus is not installed (Debian package `prometheus`)", file=sys.stderr)
        return 2
    timings = Timings()
    timings.install()
    with tempfile.TemporaryDirectory(prefix="gputui-prom-bench-") as tmp:
        directory = Path(tmp)
        text = fleet_exposition(args.hosts, args.gpus)
        print(f"exposition: {len(text) / 1e6:.1f} MB, {text.count(chr(10)):,} lines", file=sys.stderr)
        target = StaticTarget(directory / "dcgm", text)
        server = Prometheus(directory, {"dcgm": target.target}, scrape=args.scrape)
        try:
            server.start()
            gpus = args.hosts * args.gpus
            assert server.proc is not None
            if not wait_for(lambda: server.has("DCGM_FI_DEV_FB_USED", gpus), timeout=600):
                print("Prometheus never held every GPU: " + server.logs(), file=sys.stderr)
                return 1
            time.sleep(args.fill * args.scrape)
            result = asyncio.run(measure(server.base, args, server.proc.pid, timings))
        finally:
            server.stop()
            target.stop()
    print(table(result, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())

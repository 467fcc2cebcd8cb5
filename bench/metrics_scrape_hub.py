#!/usr/bin/env python3
"""The CPU of one /metrics scrape of `gputui serve` (the hub's text, gputui/serve/metrics.py) at 1,024
hosts, with every host changed since the last scrape.

    python bench/metrics_scrape_hub.py [--hosts 1024] [--gpus 8] [--scrapes 10] [--name dev]
                                       [--out-dir bench/results]

The fleet: --hosts ReplayLinks, each the recorded demo host (tests/fixtures/demo-a.jsonl) widened to
--gpus GPUs as bench/export_scrape.py does (8 GPUs, 22 process records), brought live and then held
(the fleet is stopped: nothing moves but what the bench changes). Before each timed scrape every host
gets a new sample, decoded from the wire (new objects, as the fleet's decode path makes them) and
recorded as the fleet records one, its version moved as the hub's feed moves it:
- `changed`: a new seq and time, and every GPU's utilization, temperature and power changed, and one
  process's memory (and its GPU's used memory): a busy fleet, every second;
- `same readings`: a new seq and time (and elapsed), the readings as they were: an idle fleet;
- `unchanged`: no new sample since the last scrape (only the sample ages are read again).
Timed: the thread CPU of `MetricsCache.text` (what the route answers with; median and p90 of
--scrapes), and of gzip at level 1 and 6 over the text. The first scrape (every host new) is timed
apart. Each text is checked line for line against prometheus_client's writer over the same fleet
(`gputui export`'s families), the sample ages left out (a clock read at another time).
Prints a table; writes `<out-dir>/metrics_scrape_hub_<name>.txt` and `.raw.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gzip
import json
import logging
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from export_scrape import host_records  # noqa: E402
from prometheus_client.exposition import generate_latest  # noqa: E402

from gputui.api import Fleet, HostView, ReplayLink  # noqa: E402
from gputui.model import Sample  # noqa: E402
from gputui.serve.metrics import MetricsCache  # noqa: E402
from gputui.views.metrics import FleetCollector, registry  # noqa: E402

HOLD = 3600.0  # the fleet's interval: a replayed host that sent its one sample stays live
AGE = b"gputui_host_sample_age_seconds{"


async def live_fleet(hosts: int, records: list[dict[str, Any]]) -> Fleet:
    fleet = Fleet()
    for i in range(hosts):
        fleet.add(f"node{i:04d}", lambda: ReplayLink(records), read_only=True, interval=HOLD)
    fleet.start()
    while not all(v.sample is not None for v in fleet.hosts):
        await asyncio.sleep(0.1)
    await fleet.stop()  # the hosts' state stays as it is: only the bench changes it now
    return fleet


def next_wire(wire: dict[str, Any], rng: random.Random, readings: bool) -> dict[str, Any]:
    """The host's next sample: a new seq and time; with `readings`, new utilization, temperature and
    power on every GPU and one process's memory moved (its GPU's used memory with it)."""
    out = copy.deepcopy(wire)
    out["seq"] = wire["seq"] + 1
    out["time"] = wire["time"] + 1.0
    for p in out["processes"]:
        if p.get("elapsed") is not None:
            p["elapsed"] = p["elapsed"] + 1.0
    if not readings:
        return out
    for g in out["gpus"]:
        g["util_gpu"] = rng.randrange(101)
        g["temperature"] = rng.randrange(30, 85)
        g["power_draw"] = round(rng.uniform(60.0, 700.0), 2)
    holders = [p for p in out["processes"] if p.get("gpu_memory")]
    p = rng.choice(holders)
    index = next(iter(p["gpu_memory"]))
    step = rng.choice((-1, 1)) * (64 << 20)
    if (p["gpu_memory"][index] or 0) > (1 << 30):
        p["gpu_memory"][index] += step
        for g in out["gpus"]:
            if str(g["index"]) == index and g.get("memory_used") is not None:
                g["memory_used"] += step
    return out


def advance(
    views: list[HostView], wires: dict[str, dict[str, Any]], rng: random.Random, readings: bool
) -> None:
    """Every host's next sample, decoded and recorded as the fleet does."""
    for view in views:
        wire = wires[view.name] = next_wire(wires[view.name], rng, readings)
        view.raw_sample = wire
        view.record(Sample.from_wire(copy.deepcopy(wire)))


def timed(cache: MetricsCache, views: list[HostView], versions: dict[str, int]) -> tuple[float, bytes]:
    started = time.thread_time()
    body = cache.text(views, versions)
    return (time.thread_time() - started) * 1000, body


def check(body: bytes, views: list[HostView]) -> None:
    """The hub's text is prometheus_client's for the same fleet, line for line (but the ages)."""
    expected = generate_latest(registry(FleetCollector(lambda: views)))
    got = [line for line in body.splitlines() if not line.startswith(AGE)]
    want = [line for line in expected.splitlines() if not line.startswith(AGE)]
    if got != want:
        bad = next(i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b)
        raise SystemExit(f"the hub's text differs at line {bad}: {got[bad]!r} != {want[bad]!r}")


def gzip_ms(body: bytes, level: int) -> tuple[float, int]:
    started = time.thread_time()
    packed = gzip.compress(body, compresslevel=level, mtime=0)
    return (time.thread_time() - started) * 1000, len(packed)


def scenario(
    cache: MetricsCache,
    views: list[HostView],
    wires: dict[str, dict[str, Any]],
    versions: dict[str, int],
    scrapes: int,
    mode: str,
) -> dict[str, Any]:
    rng = random.Random(mode)
    times: list[float] = []
    body = b""
    for k in range(scrapes):
        if mode != "unchanged" or k == 0:
            advance(views, wires, rng, readings=mode != "same readings")
            for name in versions:
                versions[name] += 1  # as the hub's feed moves it at a new sample
        if mode == "unchanged" and k == 0:
            timed(cache, views, versions)  # the change is the scenario's start, not a scrape of it
        ms, body = timed(cache, views, versions)
        times.append(ms)
        if k in (0, scrapes - 1):
            check(body, views)
    return {"mode": mode, "times": times, "bytes": len(body), "body": body}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def measure(hosts: int, gpus: int, scrapes: int) -> dict[str, Any]:
    records = host_records(gpus)
    fleet = await live_fleet(hosts, records)
    views = fleet.hosts
    wires = {v.name: copy.deepcopy(records[1]) for v in views}
    cache = MetricsCache()
    versions = {v.name: 1 for v in views}
    first, body = timed(cache, views, versions)
    check(body, views)
    runs = [
        scenario(cache, views, wires, versions, scrapes, mode)
        for mode in ("changed", "same readings", "unchanged")
    ]
    text = runs[0]["body"]
    packed = {level: [gzip_ms(text, level) for _ in range(3)] for level in (1, 6)}
    lines = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
    return {
        "hosts": hosts,
        "gpus": hosts * gpus,
        "lines": lines,
        "bytes": len(text),
        "first_ms": first,
        "scenarios": [
            {
                "mode": r["mode"],
                "ms_p50": statistics.median(r["times"]),
                "ms_p90": pct(r["times"], 90),
                "times": r["times"],
            }
            for r in runs
        ],
        "gzip": {
            str(level): {"ms": statistics.median(ms for ms, _ in got), "bytes": got[0][1]}
            for level, got in packed.items()
        },
        "load": os.getloadavg()[0],
    }


def table(r: dict[str, Any], machine: str, label: str) -> str:
    head = (
        f"/metrics of the hub ({label}): {r['hosts']:,} hosts, {r['gpus']:,} GPUs, {r['lines']:,} sample lines, "
        f"{r['bytes'] / 1e6:.1f} MB; {machine}, load {r['load']:.1f}\n"
        "| scrape after | CPU ms p50 | CPU ms p90 |\n| --- | ---: | ---: |\n"
        f"| every host new (first scrape) | {r['first_ms']:.0f} | |\n"
    )
    rows = [f"| {s['mode']} | {s['ms_p50']:.0f} | {s['ms_p90']:.0f} |" for s in r["scenarios"]]
    rows += [
        f"| gzip level {level} of the text (CPU ms, bytes) | {g['ms']:.0f} | {g['bytes']:,} B |"
        for level, g in r["gzip"].items()
    ]
    return head + "\n".join(rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=1024)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--scrapes", type=int, default=10)
    p.add_argument("--name", default="dev")
    p.add_argument("--out-dir", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()
    # The replayed links' idle readers are left pending when the loop closes: not the bench's news.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    result = asyncio.run(measure(args.hosts, args.gpus, args.scrapes))
    machine = f"{platform.node()} ({os.cpu_count()} CPUs, Python {platform.python_version()}, {time.strftime('%Y-%m-%d')})"
    text = table(result, machine, args.name)
    print(text)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"metrics_scrape_hub_{args.name}.txt").write_text(text + "\n")
    (out_dir / f"metrics_scrape_hub_{args.name}.raw.json").write_text(
        json.dumps({"machine": machine, "run": result}, indent=1)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

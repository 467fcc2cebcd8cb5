#!/usr/bin/env python3
"""Memory over time: 36,000 samples (an hour of one host at 10 Hz) through the app (issue 6, item 5).

    python bench/memory_soak.py [--samples 36000] [--every 1000] [--redraw 0.02] [--name dev]
                                [--out-dir bench/results]

The real app runs headless (`run_test(headless=True, size=(160, 50))`) on a real Fleet of two hosts
whose links replay the demo recordings (tests/fixtures/demo-a.jsonl, demo-b.jsonl), faster than real
time: each redraw of the app lets every host send its next sample, so every sample is drawn. Each
sample is a recorded one made new: seq and time bumped, GPU utilization, memory, temperature and
power varied, process CPU, RSS and age varied, and every 50th sample of a host one of its processes
restarts (a new PID and start time: rows come and go), all through a JSON round trip as a real
transport decodes it. The app's redraw timer runs every `--redraw` s instead of 0.2 s, so that the
hour takes minutes. Every 3,000 samples the view moves on (fleet, demo-a, demo-b, fleet, ...: `]`).

Every `--every` samples: the app's RSS (/proc/self/statm), the number of objects the garbage
collector tracks, then, after a full collection, the number still alive (garbage waiting for the
collector is not a leak), and the tables' and caches' sizes. Prints a table of RSS against samples
and whether it is flat after the warm-up (the first 5,000 samples, or a fifth): RSS within 2 MiB of
its value then and live objects within 2 %. With --trace, tracemalloc says what grew after the
warm-up and where it was allocated. Writes `<out-dir>/memory_soak_<name>.txt` and `.raw.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import os
import platform
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputui.api import Fleet, load_recording  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
FIXTURES = ROOT / "tests" / "fixtures"
HOSTS = ("demo-a", "demo-b")
RESTART_EVERY = 50  # samples of a host between two process restarts
SWITCH_EVERY = 3000  # samples between two view changes
MiB = 1 << 20


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class SoakLink:
    """The Link protocol over a recording: a new sample each time `turn` is set (once per redraw)."""

    def __init__(self, records: list[dict[str, Any]], counter: Counter) -> None:
        self.hello: dict[str, Any] | None = next(r for r in records if r["type"] == "hello")
        self.samples = [r for r in records if r["type"] == "sample"]
        self.failure = None
        self.counter = counter
        self.turn = asyncio.Event()
        self.turn.set()
        self.n = 0
        self.restarts: dict[tuple[int, int | None], tuple[int, int]] = {}  # original key -> new key
        self._closed = False

    async def open(self) -> None:
        pass

    async def recv(self) -> dict[str, Any] | None:
        while not self._closed:
            if self.counter.done:
                await asyncio.sleep(3600)  # hold the last state; the bench ends the app
            await self.turn.wait()
            self.turn.clear()
            if self._closed:
                break
            self.n += 1
            record = self.make(self.n)
            self.counter.add()
            return json.loads(json.dumps(record))
        return None

    def make(self, n: int) -> dict[str, Any]:
        base = self.samples[n % len(self.samples)]
        record = copy.deepcopy(base)
        record["seq"] = n
        record["time"] = time.time()
        for g in record["gpus"]:
            i = g["index"]
            if g.get("memory_total"):
                g["memory_used"] = int(g["memory_total"] * (((n * 7 + i * 31) % 90) / 100))
            g["util_gpu"] = (n * 13 + i * 17) % 101
            g["util_mem"] = (n * 5 + i) % 101
            g["temperature"] = 30 + (n + i * 3) % 50
            g["power_draw"] = round(75.0 + (n * 11 + i) % 600 + 0.5, 1)
        if n % RESTART_EVERY == 0:  # one process restarts: a new PID and start time from now on
            procs = [p for p in base["processes"] if p.get("pid") and p.get("start_time")]
            if procs:
                p = procs[(n // RESTART_EVERY) % len(procs)]
                self.restarts[(p["pid"], p["start_time"])] = (
                    400000 + (n * 7919) % 3_000_000,
                    p["start_time"] + n,
                )
        for p in record["processes"]:
            new = self.restarts.get((p.get("pid"), p.get("start_time")))
            if new is not None:
                p["pid"], p["start_time"] = new
            if p.get("cpu_percent") is not None:
                p["cpu_percent"] = float((n * 3 + p["pid"]) % 400)
            if p.get("rss") is not None:
                p["rss"] = p["rss"] + (n % 97) * 4096
            if p.get("elapsed") is not None:
                p["elapsed"] = p["elapsed"] + n * 0.1
        return record

    async def send(self, message: dict[str, Any]) -> None:
        pass

    async def close(self) -> None:
        self._closed = True
        self.turn.set()


class Counter:
    def __init__(self, target: int, every: int, on_point: Any) -> None:
        self.count = 0
        self.target = target
        self.every = every
        self.on_point = on_point

    @property
    def done(self) -> bool:
        return self.count >= self.target

    def add(self) -> None:
        self.count += 1
        if self.count % self.every == 0 or self.count == self.target:
            self.on_point(self.count)


def table_sizes(app: Any) -> dict[str, int]:
    """Sizes of what the app keeps per row or per sample (to find what grows, if anything does)."""
    main = app._main
    out: dict[str, int] = {}
    for name in ("fleet_table", "gpu_table", "proc_table", "host_list"):
        table = getattr(main, name, None)
        if table is None:
            continue
        out[f"{name}.rows"] = table.row_count
        for cache in ("_row_render_cache", "_cell_render_cache", "_line_cache"):
            c = getattr(table, cache, None)
            if c is not None:
                out[f"{name}.{cache}"] = len(c)
    out["fleet.history_points"] = sum(
        len(h.util) + len(h.memory) for v in app.fleet.hosts for h in v.history.values()
    )
    out["app.received"] = len(app.received)
    return out


async def soak(
    samples: int, every: int, redraw: float, python_gc: bool = False, trace: bool = False
) -> dict[str, Any]:
    import gputui.ui.intake as app_module
    from gputui.cli.dashboard import tune_gc
    from gputui.ui import make_app

    app_module.REDRAW_GAP = redraw  # read at each redraw
    points: list[dict[str, Any]] = []
    snapshots: list[tuple[int, Any]] = []
    if trace:
        tracemalloc.start(12)
    started = time.monotonic()
    app: Any = None

    def on_point(count: int) -> None:
        rss = rss_bytes() / MiB  # first: as the app has it now
        tracked = len(gc.get_objects())
        gc.collect()  # then what is alive: garbage waiting for the collector is not a leak
        live = len(gc.get_objects())
        points.append(
            {
                "samples": count,
                "rss_mib": rss,
                "gc_objects": tracked,
                "live_objects": live,
                "seconds": time.monotonic() - started,
                "sizes": table_sizes(app) if app is not None and app._main is not None else {},
            }
        )
        print(
            f"{count} samples, {points[-1]['seconds']:.0f} s, RSS {rss:.1f} MiB", file=sys.stderr, flush=True
        )
        if trace:
            snapshots.append((count, tracemalloc.take_snapshot()))

    counter = Counter(samples, every, on_point)
    links: list[SoakLink] = []
    fleet = Fleet()
    for host in HOSTS:
        records = load_recording(FIXTURES / f"{host}.jsonl")

        def make(records: list[dict[str, Any]] = records) -> SoakLink:
            link = SoakLink(records, counter)
            links.append(link)
            return link

        fleet.add(host, make, interval=1.0)
    app = make_app(fleet, interval=1.0)
    original = app._redraw

    def redraw_then_release() -> None:
        original()
        for link in links:
            link.turn.set()

    app._redraw = redraw_then_release  # before mount: the timer takes this one
    if not python_gc:
        tune_gc()  # as `gputui` does before it runs the app (cli.run_ui)
    async with app.run_test(headless=True, size=(160, 50)) as pilot:
        on_point(0)
        switched = 0
        while not counter.done:
            await pilot.pause(0.05)
            if counter.count // SWITCH_EVERY > switched:
                switched += 1
                await pilot.press("right_square_bracket")  # the next host (or the fleet)
                await pilot.press("j", "j", "k")
        await pilot.pause(0.5)
        views = len(app.fleet.hosts)
    result = {"samples": samples, "every": every, "redraw": redraw, "hosts": views, "points": points}
    if trace and len(snapshots) >= 3:
        # What grew between the end of the warm-up and the end, by where it was allocated.
        warm = min(5000, max(1, samples // 5))
        start = next(s for c, s in snapshots if c >= warm)
        stats = snapshots[-1][1].compare_to(start, "traceback")[:15]
        result["growth_by_traceback"] = [
            {
                "kib": st.size_diff / 1024,
                "count": st.count_diff,
                "where": [f"{Path(f.filename).name}:{f.lineno}" for f in st.traceback],  # oldest first
            }
            for st in stats
        ]
    return result


def verdict(points: list[dict[str, Any]], samples: int) -> tuple[dict[str, Any], str]:
    warm = min(5000, max(1, samples // 5))
    after = [p for p in points if p["samples"] >= warm]
    first, last = after[0], after[-1]
    growth = last["rss_mib"] - first["rss_mib"]
    span = max(1, last["samples"] - first["samples"])
    per_10k = growth / span * 10000
    peak = max(p["rss_mib"] for p in after)
    objects = last["live_objects"] - first["live_objects"]
    flat = growth < 2.0 and peak - first["rss_mib"] < 4.0 and objects < 0.02 * first["live_objects"]
    summary = {
        "warm_up_samples": first["samples"],
        "rss_after_warm_up_mib": first["rss_mib"],
        "rss_end_mib": last["rss_mib"],
        "rss_peak_after_warm_up_mib": peak,
        "growth_mib": growth,
        "growth_mib_per_10k_samples": per_10k,
        "live_objects_growth": objects,
        "flat": flat,
    }
    words = (
        f"after warm-up ({first['samples']} samples, {first['rss_mib']:.1f} MiB): "
        f"{growth:+.1f} MiB to the end ({per_10k:+.2f} MiB per 10,000 samples), peak "
        f"{peak:.1f} MiB, live objects {objects:+d}: "
        + ("FLAT (bounded)" if flat else "GROWING: something keeps what it should drop")
    )
    return summary, words


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=36000, help="samples in all (both hosts)")
    ap.add_argument("--every", type=int, default=1000, help="measure every this many samples")
    ap.add_argument("--redraw", type=float, default=0.02, help="the app's redraw interval (0.2 in use)")
    ap.add_argument("--python-gc", action="store_true", help="keep CPython's GC settings (gputui tunes them)")
    ap.add_argument(
        "--trace", action="store_true", help="tracemalloc: what grew after the warm-up, and where"
    )
    ap.add_argument("--name", default="dev", help="results file suffix")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    result = asyncio.run(soak(args.samples, args.every, args.redraw, args.python_gc, args.trace))
    points = result["points"]
    summary, words = verdict(points, args.samples)
    result["summary"] = summary
    import textual

    header = (
        f"memory soak: {platform.node()} ({os.cpu_count()} cores), {time.strftime('%Y-%m-%d')}, "
        f"Linux {platform.release()}, CPython {platform.python_version()}, textual {textual.__version__}; "
        f"{args.samples} samples over {len(HOSTS)} replayed demo hosts, every one drawn "
        f"(redraw every {args.redraw:g} s), view changed every {SWITCH_EVERY} samples, GC "
        f"{'as CPython sets it' if args.python_gc else 'tuned (cli.tune_gc)'}"
    )
    lines = [
        header,
        "",
        "| samples | seconds | RSS MiB | vs. first | GC-tracked objects | live objects | proc rows "
        "| fleet history points |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in points:
        sizes = p["sizes"]
        lines.append(
            f"| {p['samples']} | {p['seconds']:.0f} | {p['rss_mib']:.1f} | "
            f"{p['rss_mib'] - points[0]['rss_mib']:+.1f} | {p['gc_objects']} | {p['live_objects']} | "
            f"{sizes.get('proc_table.rows', '-')} | {sizes.get('fleet.history_points', '-')} |"
        )
    lines += ["", words]
    for item in result.get("growth_by_traceback", [])[:8]:
        where = " <- ".join(reversed(item["where"][-5:]))
        lines.append(f"  {item['kib']:+.0f} KiB in {item['count']:+d} blocks at {where}")
    text = "\n".join(lines)
    print(text)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    stem = args.out_dir / f"memory_soak_{args.name}"
    stem.with_suffix(".txt").write_text(text + "\n")
    stem.with_suffix(".raw.json").write_text(json.dumps({"header": header, **result}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

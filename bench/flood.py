"""One hostile host among 16 normal ones: the app's memory and key latency under each flood.

    python bench/flood.py [--seconds 30] [--keys 120] [--out results.json]

The dashboard runs headless (Textual's run_test) with 16 replayed demo hosts looping at 1 Hz and one
hostile probe (tests/hostile.py, through the real bootstrap and local transport) in each mode:
`flood` (error lines as fast as it can write them), `events` (stray plan events as fast as it can),
`huge` (15,000 small process records a sample), and `none` (the 16 normal hosts alone, the
baseline). While it runs, the process table gets `j`/`k` presses; the latency of one is the time
from the key's arrival to the cursor having moved (polled every 2 ms). RSS is read once a second.

Bounds (issue 13): RSS < 300 MB and p99 key latency < 200 ms with one flooding host among 16.
Prints a table; --out writes the raw figures. Every process it starts (the hostile probe, through
the fleet) ends with the app.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputui.fleet import Fleet  # noqa: E402
from gputui.transport.replay import ReplayLink  # noqa: E402
from gputui.ui import make_app  # noqa: E402
from tests.hostile import HostileLink  # noqa: E402
from tests.ui.conftest import recording, scratch_log  # noqa: E402

NORMAL = 16
MODES = {
    "none": None,
    "flood": dict(mode="flood"),
    "events": dict(mode="flood", variant=1),
    "huge": dict(mode="huge", compact=True, interval=1.0),
}


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def fleet_for(mode: str) -> Fleet:
    fleet = Fleet()
    names = ("demo-a", "demo-b")
    for i in range(NORMAL):
        recs = list(recording(names[i % 2]))
        fleet.add(f"host-{i:02d}", lambda recs=recs: ReplayLink(recs, loop=True, rate=1.0), interval=1.0)
    options = MODES[mode]
    if options is not None:
        kw = dict(options)
        kind = kw.pop("mode")
        fleet.add("hostile", lambda: HostileLink(kind, "hostile", **kw), interval=1.0)
    return fleet


async def run(mode: str, seconds: float, keys: int) -> dict[str, Any]:
    app = make_app(fleet_for(mode), interval=1.0, log_path=scratch_log())
    latencies: list[float] = []
    rss: list[float] = []
    async with app.run_test(size=(160, 48)) as pilot:
        start = time.monotonic()
        while time.monotonic() - start < 3:  # the hosts connect, the hostile one starts
            await pilot.pause(0.1)
        main = app._main
        assert main is not None
        main.select_host("host-00")
        main.proc_table.focus()
        await pilot.pause(0.5)
        end = time.monotonic() + seconds
        pressed = 0
        next_rss = 0.0
        while time.monotonic() < end:
            if time.monotonic() >= next_rss:
                rss.append(rss_mib())
                next_rss = time.monotonic() + 1.0
            if pressed < keys:
                before = main.proc_table.cursor_row
                key = "j" if before == 0 else "k"
                t0 = time.perf_counter()
                await pilot.press(key)
                while main.proc_table.cursor_row == before and time.perf_counter() - t0 < 5:
                    await asyncio.sleep(0.002)
                latencies.append((time.perf_counter() - t0) * 1e3)
                pressed += 1
            await pilot.pause(max(0.0, seconds / max(keys, 1) - 0.01))
        hostile = app.fleet.view("hostile") if "hostile" in app.fleet.sessions else None
        state = (hostile.status, hostile.reason) if hostile is not None else None
        await pilot.press("q")
    # Every link closed and its process reaped before this loop ends (a flooding probe may still be
    # blocked on a write when the app quits; its transport must not outlive the loop).
    await app.fleet.stop()
    lat = sorted(latencies)
    return {
        "mode": mode,
        "rss_max_mib": max(rss),
        "rss_end_mib": rss[-1],
        "keys": len(lat),
        "p50_ms": statistics.median(lat) if lat else None,
        "p99_ms": lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))] if lat else None,
        "max_ms": lat[-1] if lat else None,
        "hostile": state,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--keys", type=int, default=120)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = [asyncio.run(run(mode, args.seconds, args.keys)) for mode in args.modes.split(",")]
    print(
        f"one hostile host among {NORMAL} replayed ones at 1 Hz, {args.seconds:g} s each, {platform.node()}"
    )
    print(
        f"{'flood':<8} {'RSS max MiB':>11} {'RSS end':>8} {'keys':>5} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}  hostile host"
    )
    for r in rows:
        print(
            f"{r['mode']:<8} {r['rss_max_mib']:>11.1f} {r['rss_end_mib']:>8.1f} {r['keys']:>5} "
            f"{r['p50_ms']:>7.1f} {r['p99_ms']:>7.1f} {r['max_ms']:>7.1f}  {r['hostile']}"
        )
    ok = all(r["rss_max_mib"] < 300 and (r["p99_ms"] or 0) < 200 for r in rows)
    print("bounds (RSS < 300 MiB, p99 key < 200 ms):", "met" if ok else "MISSED")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

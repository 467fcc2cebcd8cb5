#!/usr/bin/env python3
"""Memory against view switches: what the app keeps as the operator moves around (issue 6, item 5).

    python bench/switch_soak.py [--switches 400] [--every 50] [--name dev] [--out-dir bench/results]

The memory soak (bench/memory_soak.py) switches the view only every 3,000 samples, so an hour holds
a dozen switches. Here the real app (headless, 160x50, on the two demo recordings, which have
finished playing: no samples arrive) switches view `--switches` times (`]`: fleet, demo-a, demo-b,
fleet, ...; each switch moves the focus and recomposes the footer) and moves the cursor (`j`, `k`).
Every `--every` switches, after a full collection: RSS and the number of live objects, and which
kinds of object grew most since the last point. Prints a table; writes
`<out-dir>/switch_soak_<name>.txt` and `.raw.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


async def soak(switches: int, every: int) -> list[dict[str, Any]]:
    from gputui.cli.dashboard import tune_gc
    from tests.support.apps import build_app

    app = build_app()
    tune_gc()
    points: list[dict[str, Any]] = []
    previous: collections.Counter[str] | None = None
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause(1.0)
        for i in range(switches + 1):
            if i % every == 0:
                gc.collect()
                objects = gc.get_objects()
                kinds = collections.Counter(type(o).__qualname__ for o in objects)
                grew = {} if previous is None else {k: kinds[k] - previous[k] for k in kinds}
                points.append(
                    {
                        "switches": i,
                        "rss_mib": rss_mib(),
                        "live_objects": len(objects),
                        "grew_most": sorted(grew.items(), key=lambda kv: -kv[1])[:5],
                    }
                )
                previous = kinds
                del objects
            await pilot.press("right_square_bracket")
            await pilot.pause()
            await pilot.press("j", "k")
    return points


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--switches", type=int, default=400)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--name", default="dev", help="results file suffix")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    import textual

    points = asyncio.run(soak(args.switches, args.every))
    header = (
        f"switch soak: {platform.node()} ({os.cpu_count()} cores), {time.strftime('%Y-%m-%d')}, "
        f"CPython {platform.python_version()}, textual {textual.__version__}; {args.switches} view "
        f"switches, no samples arriving"
    )
    lines = [header, "", "| switches | RSS MiB | live objects | grew most since the last point |",
             "| ---: | ---: | ---: | --- |"]  # fmt: skip
    for p in points:
        grew = ", ".join(f"{k} {v:+d}" for k, v in p["grew_most"] if v > 0) or "-"
        lines.append(f"| {p['switches']} | {p['rss_mib']:.1f} | {p['live_objects']} | {grew} |")
    text = "\n".join(lines)
    print(text)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    stem = args.out_dir / f"switch_soak_{args.name}"
    stem.with_suffix(".txt").write_text(text + "\n")
    stem.with_suffix(".raw.json").write_text(
        json.dumps({"header": header, "points": points}, indent=1) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

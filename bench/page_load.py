#!/usr/bin/env python3
"""The web page at a large fleet: how long Chromium takes to show a hub of N hosts, what a second of
updates costs the page's main thread, and how soon the filter box answers.

    python bench/page_load.py [--hosts 1024] [--seconds 10] [--name dev] [--out-dir bench/results]

The hub is bench/serve_load.py's (`--role hub`: the real aiohttp app and Hub over `--hosts`
PlaybackLinks playing bench/fleet_scale.py's recordings through the decode path, 1 Hz each), in a
process of its own. The page is gputui/serve/page as it ships, in the system Chromium (Playwright,
/usr/bin/chromium, headless, 1280x900), with a PerformanceObserver for long tasks (> 50 ms) set up
before the page's own script runs (the page's CSP bypassed: Playwright's waits evaluate strings).

Measured:
- load: from navigation to the first host card drawn (its GPUs shown), to every host's card in the
  page (the count says N and the list holds N cards: a card far off screen is its host's name until
  it is scrolled near), the long tasks (count, longest, total) until then;
- steady: CDP `Performance.getMetrics` over `--seconds` with the page open and the hub streaming:
  main-thread task time (TaskDuration) and its script, layout and style parts, per second of wall
  time; the long tasks in that window;
- the filter: a query typed a key at a time into the box (`host:h0001`), then cleared: for each
  key, the time from the input event to the end of the frame that shows its result (the page draws
  in requestAnimationFrame: measured to a task posted from the frame after it); p50 and max.
Prints a table; writes `<out-dir>/page_load_<name>.txt` and `.raw.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from fleet_scale import make_recordings  # noqa: E402
from serve_load import CLOCKS, SAMPLES, TEMPLATES, wait_ready  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
TYPED = "host:h0001"

# Before the page's script: every long task from the start, kept where the bench can read it.
LONG_TASKS = """
window.__long = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__long.push([e.startTime, e.duration]);
}).observe({ type: "longtask", buffered: true });
"""

# One key into the filter box: the time to the end of the frame that draws what it matches.
ONE_KEY = """
async (text) => {
  const box = document.getElementById("filter");
  const t0 = performance.now();
  box.value = text;
  box.dispatchEvent(new Event("input", { bubbles: true }));
  await new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)));
  return performance.now() - t0;
}
"""


def start_hub(hosts: int, recordings: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "serve_load.py"), "--role", "hub", "--hosts", str(hosts),
         "--recordings", str(recordings)],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
    )  # fmt: skip
    assert proc.stdout is not None
    port = json.loads(proc.stdout.readline())["port"]
    return proc, f"http://127.0.0.1:{port}/"


def long_tasks(page: Page, since: float = 0.0, until: float = float("inf")) -> list[float]:
    spans = page.evaluate("window.__long")
    return [d for t, d in spans if since <= t < until]


def cards(page: Page) -> int:
    return int(page.evaluate("document.querySelectorAll('#host-list article.host').length"))


def load(page: Page, url: str, hosts: int) -> dict[str, Any]:
    page.goto(url, wait_until="commit")
    page.wait_for_function(
        "document.querySelector('#host-list article.host div.gpu')", polling=10, timeout=120_000
    )
    first = page.evaluate("performance.now()")
    page.wait_for_function(
        f"document.querySelectorAll('#host-list article.host').length >= {hosts} &&"
        f" document.getElementById('host-count').textContent === '{hosts}'",
        polling=10,
        timeout=120_000,
    )
    every = page.evaluate("performance.now()")
    spans = long_tasks(page, 0.0, every)
    return {
        "first_card_ms": round(first),
        "all_cards_ms": round(every),
        "load_long_tasks": len(spans),
        "load_longest_ms": round(max(spans, default=0.0)),
        "load_long_total_ms": round(sum(spans)),
    }


def metrics(cdp: Any) -> dict[str, float]:
    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}


def steady(page: Page, cdp: Any, seconds: float) -> dict[str, Any]:
    t0 = page.evaluate("performance.now()")
    m0, w0 = metrics(cdp), time.monotonic()
    time.sleep(seconds)
    m1, w1 = metrics(cdp), time.monotonic()
    t1 = page.evaluate("performance.now()")
    wall = w1 - w0

    def per_s(key: str) -> float:
        return round(1e3 * (m1.get(key, 0.0) - m0.get(key, 0.0)) / wall, 1)

    spans = long_tasks(page, t0, t1)
    return {
        "task_ms_s": per_s("TaskDuration"),
        "script_ms_s": per_s("ScriptDuration"),
        "layout_ms_s": per_s("LayoutDuration"),
        "style_ms_s": per_s("RecalcStyleDuration"),
        "steady_long_tasks": len(spans),
        "steady_longest_ms": round(max(spans, default=0.0)),
        "nodes": int(m1.get("Nodes", 0)),
        "heap_mb": round(m1.get("JSHeapUsedSize", 0.0) / 2**20),
    }


def typing(page: Page) -> dict[str, Any]:
    keys = [page.evaluate(ONE_KEY, TYPED[: k + 1]) for k in range(len(TYPED))]
    shown = page.evaluate("document.querySelectorAll('#host-list article.host:not([hidden])').length")
    cleared = page.evaluate(ONE_KEY, "")
    return {
        "key_p50_ms": round(statistics.median(keys), 1),
        "key_max_ms": round(max(keys), 1),
        "typed_shows": shown,
        "clear_ms": round(cleared, 1),
    }


def measure(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    recordings = scratch / "recordings"
    make_recordings(recordings, TEMPLATES, SAMPLES, "delta")
    hub, url = start_hub(args.hosts, recordings)
    try:
        wait_ready(url, time.monotonic() + 300)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = browser.new_context(
                    viewport={"width": 1280, "height": 900}, bypass_csp=True
                ).new_page()
                page.add_init_script(LONG_TASKS)
                cdp = page.context.new_cdp_session(page)
                cdp.send("Performance.enable")
                result = {"hosts": args.hosts, **load(page, url, args.hosts + CLOCKS)}
                page.wait_for_timeout(2000)  # the first whole state drawn; then the updates alone
                result.update(steady(page, cdp, args.seconds))
                result.update(typing(page))
                result["version"] = browser.version
            finally:
                browser.close()
    finally:
        hub.send_signal(signal.SIGTERM)
        try:
            hub.wait(timeout=30)
        except subprocess.TimeoutExpired:
            hub.kill()
            hub.wait()
    return result


def table(r: dict[str, Any], header: str) -> str:
    rows = [
        ("hosts (+ the hub's clock hosts)", f"{r['hosts']} (+{CLOCKS})"),
        ("first card drawn / every card placed", f"{r['first_card_ms']} ms / {r['all_cards_ms']} ms"),
        (
            "long tasks while loading: n, longest, total",
            f"{r['load_long_tasks']}, {r['load_longest_ms']} ms, {r['load_long_total_ms']} ms",
        ),
        ("main thread a second of updates", f"{r['task_ms_s']} ms/s"),
        ("  script / layout / style", f"{r['script_ms_s']} / {r['layout_ms_s']} / {r['style_ms_s']} ms/s"),
        ("long tasks while streaming: n, longest", f"{r['steady_long_tasks']}, {r['steady_longest_ms']} ms"),
        ("DOM nodes, JS heap", f"{r['nodes']}, {r['heap_mb']} MB"),
        (f"filter: a key of {TYPED!r} p50 / max", f"{r['key_p50_ms']} ms / {r['key_max_ms']} ms"),
        ("filter: cleared (every host again)", f"{r['clear_ms']} ms"),
        ("Chromium", str(r["version"])),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join([header, *(f"{k:<{width}}  {v}" for k, v in rows)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--name", default="dev")
    parser.add_argument("--out-dir", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gputui-page-load-") as scratch:
        result = measure(args, Path(scratch))
    header = (
        f"page_load {args.name}: {platform.node()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')}, load {os.getloadavg()[0]:.2f}"
    )
    text = table(result, header)
    print(text)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"page_load_{args.name}.txt").write_text(text + "\n")
    (out / f"page_load_{args.name}.raw.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

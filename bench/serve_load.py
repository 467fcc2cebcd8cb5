#!/usr/bin/env python3
"""The hub under load: `gputui serve` with 1,024 hosts, 50 event-stream viewers and 5 attached fleets.

    python bench/serve_load.py [--hosts 1024] [--viewers 50] [--attached 5] [--seconds 30]
                               [--warmup 10] [--hub-cpus 0,1] [--client-cpus 2-15] [--name dev]
                               [--out-dir bench/results]

The hub is the real one (gputui.serve: the aiohttp app, the Hub's fan-out, /metrics' cache) on a
fleet of `--hosts` PlaybackLinks: every host plays a recording of probe output (bench/fleet_scale.py
`make_recordings`: demo hosts of 4 GPUs whose readings change every 5th sample and whose processes come
and go, as deltas the way a probe sends them), its lines read, split and decoded by the fleet as a
local or SSH probe's are ("the decode path"), at 1 Hz from a phase of its own. Beside them, CLOCKS
hosts send whole samples stamped with the wall clock when they are sent: the event delay is, for
their samples, the time from that stamp to the moment a client has read the frame (same machine,
same clock).

The clients run in processes of their own (their CPU is not the hub's):
- `--viewers` event-stream readers (aiohttp), split over VIEWER_PROCESSES processes: each reads
  every frame of /api/v1/events (as the web page does) and times the clock hosts' samples;
- `--attached` fleets attached through `gputui.transport.hub` (what `gputui --hub URL` runs, without
  drawing: the hub's cost of an attached dashboard is its stream), each in a process, timing the
  clock hosts' samples as their fleet takes them (frame read, delta merged, sample decoded).

Measured over the window (after every host is live and a warm-up): the hub's CPU (/proc: user + system
of its process, per second of wall time, in % of one core), its RSS at the end and its peak (VmHWM),
the event delay (p50, p99, max) at the viewers and at the attached fleets, frames and bytes a viewer
read a second, the resets (clients sent back to a whole state). Then /metrics of the whole fleet:
the CPU of one scrape in the hub (thread time of building its text: once after every host changed,
"cold", and the median of scrapes one second apart, where only the hosts that changed are encoded
again), and the wall time of a scrape from a client.
With --hub-cpus / --client-cpus the hub and the clients are pinned (sched_setaffinity) to those
cores: on the 16-core GPU machine the hub gets two cores of its own, as the issue asks; on a 2-core
machine everything shares the two.
Prints a table; writes `<out-dir>/serve_load_<name>.txt` and `.raw.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

CLOCKS = 8  # hosts whose samples carry the wall clock: the event delay is timed on them
VIEWER_PROCESSES = 5  # the viewers are spread over this many processes
TEMPLATES = 64  # recordings the hosts play (each host one of them, from a phase of its own)
SAMPLES = 120  # samples a recording holds before it starts again
SCRAPES = 10  # timed /metrics scrapes, one a second


def cpus(text: str | None) -> set[int] | None:
    """`0,1` or `2-15` (or both, comma-separated) as a set of cores; None for none given."""
    if not text:
        return None
    out: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        out.update(range(int(low), int(high or low) + 1))
    return out & os.sched_getaffinity(0) or None


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of process `pid` (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of process `pid`, bytes."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) * 1024
    return found.get("VmRSS", 0), found.get("VmHWM", 0)


# -- the hub ---------------------------------------------------------------------------------------


class ClockLink:
    """A host whose whole samples are stamped with the wall clock as they are sent (Link protocol)."""

    failure = None

    def __init__(self, hello: dict[str, Any], sample: dict[str, Any], name: str) -> None:
        self.hello = dict(hello, host=dict(hello.get("host") or {}, hostname=name))
        self.sample = sample
        self.seq = 0
        self.next_at = time.monotonic() + random.random()

    async def open(self) -> None:
        return None

    async def recv(self) -> dict[str, Any] | None:
        await asyncio.sleep(max(0.0, self.next_at - time.monotonic()))
        self.next_at += 1.0
        self.seq += 1
        return dict(self.sample, seq=self.seq, time=time.time())

    async def send(self, message: dict[str, Any]) -> None:
        return None

    async def close(self) -> None:
        return None


def clock_records() -> tuple[dict[str, Any], dict[str, Any]]:
    from gputui.api import load_recording

    records = load_recording(ROOT / "tests" / "fixtures" / "demo-a.jsonl")
    hello = next(r for r in records if r.get("type") == "hello")
    sample = copy.deepcopy([r for r in records if r.get("type") == "sample"][-1])
    return hello, sample


async def hub_main(args: argparse.Namespace) -> int:
    from aiohttp import web

    from gputui.api import Fleet, PlaybackLink, Recording
    from gputui.cli.dashboard import tune_gc
    from gputui.serve.app import METRICS, Settings, make_app
    from gputui.serve.stream import Hub

    played = [Recording(p) for p in sorted(Path(args.recordings).glob("*.jsonl"))]
    rng = random.Random(0)
    fleet = Fleet()
    for i in range(args.hosts):
        name, recording, phase = f"h{i:04d}", played[i % len(played)], rng.random()
        fleet.add(name, lambda r=recording, p=phase, n=name: PlaybackLink(r, phase=p, label=n), interval=1.0)
    hello, sample = clock_records()
    for k in range(CLOCKS):
        name = f"clk{k}"
        fleet.add(name, lambda n=name: ClockLink(hello, sample, n), interval=1.0)
    hub = Hub(fleet, 1.0, 60.0)
    app = make_app(Settings(connections=4096), hub)

    async def cost(request: web.Request) -> web.Response:
        """The CPU of building /metrics' text in the hub: cold (after every host changed), then warm."""
        cache = request.app[METRICS]
        times = []
        for k in range(int(request.query.get("n", "1"))):
            if k:
                await asyncio.sleep(1.0)
            t0 = time.thread_time()
            body = cache.text(hub.fleet.hosts, hub.versions())
            times.append(time.thread_time() - t0)
        return web.json_response({"cpu_s": times, "bytes": len(body), "resets": hub.resets})

    app.router.add_get("/bench/metrics-cost", cost)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    port = runner.addresses[0][1]
    tune_gc(fleet)  # as `gputui serve` would with a thousand hosts (cli/dashboard.py says why)
    fleet.start()
    hub.start()
    print(json.dumps({"port": port}), flush=True)
    stopped = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopped.set)
    await stopped.wait()
    await runner.cleanup()
    await hub.stop()
    await fleet.stop()
    return 0


# -- the clients -----------------------------------------------------------------------------------


async def one_viewer(url: str, until: float, start: float, out: dict[str, Any]) -> None:
    import aiohttp

    delays: list[float] = out["delays"]
    timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        response = await session.get(url + "api/v1/events")
        buffer = b""
        try:
            async for chunk in response.content.iter_any():
                now = time.time()
                if time.monotonic() >= until:
                    break
                buffer += chunk
                *frames, buffer = buffer.split(b"\n\n")
                counting = time.monotonic() >= start
                for frame in frames:
                    if counting:
                        out["frames"] += 1
                        out["bytes"] += len(frame) + 2
                    if frame.startswith(b"event: reset"):
                        out["resets"] += 1
                    elif frame.startswith(b'event: sample\ndata: ["clk') and counting:
                        record = json.loads(frame.split(b"\ndata: ", 1)[1])[1]
                        delays.append(now - record["time"])
        finally:
            response.close()  # not released: an events stream never ends of itself


async def viewers_main(args: argparse.Namespace) -> int:
    start = time.monotonic() + args.warmup
    until = start + args.seconds
    outs = [{"delays": [], "frames": 0, "bytes": 0, "resets": 0} for _ in range(args.count)]
    await asyncio.gather(*(one_viewer(args.url, until, start, o) for o in outs))
    print(json.dumps(outs))
    return 0


async def attached_main(args: argparse.Namespace) -> int:
    from gputui.api import Fleet, SampleArrived, make_link
    from gputui.config.file import HostSpec
    from gputui.transport.hub import read_hub

    info = await read_hub(args.url.rstrip("/"))
    fleet = Fleet()
    for name in info.hosts:
        spec = HostSpec(name=name, address=name, read_only=True, feed="hub:" + args.url.rstrip("/"))
        fleet.add(name, lambda s=spec: make_link(s, 1.0), read_only=True, interval=1.0)
    delays: list[float] = []
    start = time.monotonic() + args.warmup
    until = start + args.seconds

    def on_fleet(change: Any) -> None:
        if isinstance(change, SampleArrived) and change.view.name.startswith("clk"):
            sample = change.view.sample
            if sample is not None and time.monotonic() >= start:
                delays.append(time.time() - sample.time)

    fleet.listen(on_fleet)
    fleet.start()
    await asyncio.sleep(max(0.0, until - time.monotonic()))
    live = sum(1 for v in fleet.hosts if v.status == "live")
    await fleet.stop()
    print(json.dumps({"delays": delays, "hosts": len(info.hosts), "live": live}))
    return 0


# -- the run ---------------------------------------------------------------------------------------


def pinned(cores: set[int] | None) -> Any:
    return (lambda: os.sched_setaffinity(0, cores)) if cores else None


def spawn(role: list[str], cores: set[int] | None) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.Popen(
        [sys.executable, __file__, *role],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=pinned(cores),
    )


def wait_ready(url: str, deadline: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "-/ready", timeout=5) as answer:
                if answer.status == 200:
                    return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError("the hub's hosts did not all come live")


def scrape_wall(url: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url + "metrics", timeout=60) as answer:
        body = answer.read()
    return time.perf_counter() - t0, len(body)


def measure(args: argparse.Namespace, recordings: Path) -> dict[str, Any]:
    from fleet_scale import make_recordings

    make_recordings(recordings, TEMPLATES, SAMPLES, "delta")
    hub_cores, client_cores = cpus(args.hub_cpus), cpus(args.client_cpus)
    hub = spawn(["--role", "hub", "--hosts", str(args.hosts), "--recordings", str(recordings)], hub_cores)
    clients: list[subprocess.Popen[str]] = []
    try:
        assert hub.stdout is not None
        port = json.loads(hub.stdout.readline())["port"]
        url = f"http://127.0.0.1:{port}/"
        live_s = wait_ready(url, time.monotonic() + 300)
        window = ["--url", url, "--seconds", str(args.seconds), "--warmup", str(args.warmup)]
        per = [
            args.viewers // VIEWER_PROCESSES + (k < args.viewers % VIEWER_PROCESSES)
            for k in range(VIEWER_PROCESSES)
        ]
        for count in (c for c in per if c):
            clients.append(spawn(["--role", "viewers", "--count", str(count), *window], client_cores))
        attached = [spawn(["--role", "attached", *window], client_cores) for _ in range(args.attached)]
        time.sleep(args.warmup)
        cpu0, t0 = proc_cpu(hub.pid), time.monotonic()
        time.sleep(args.seconds)
        cpu1, t1 = proc_cpu(hub.pid), time.monotonic()
        rss, hwm = proc_memory(hub.pid)
        viewer_outs = [o for c in clients for o in json.loads(c.communicate(timeout=120)[0])]
        attached_outs = [json.loads(a.communicate(timeout=120)[0]) for a in attached]
        with urllib.request.urlopen(url + f"bench/metrics-cost?n={SCRAPES}", timeout=120) as answer:
            cost = json.loads(answer.read())
        walls = [scrape_wall(url) for _ in range(3)]
    finally:
        for process in [*clients, hub]:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in [*clients, hub]:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    seen = [d for o in viewer_outs for d in o["delays"]]
    attached_seen = [d for o in attached_outs for d in o["delays"]]
    return {
        "hosts": args.hosts,
        "clock_hosts": CLOCKS,
        "viewers": args.viewers,
        "attached": args.attached,
        "live_s": round(live_s, 1),
        "hub_cpu_pct": round(100 * (cpu1 - cpu0) / (t1 - t0), 1),
        "hub_rss_mb": round(rss / 2**20),
        "hub_peak_mb": round(hwm / 2**20),
        "viewer_delay_ms": [round(1e3 * pct(seen, q), 1) for q in (50, 99, 100)],
        "attached_delay_ms": [round(1e3 * pct(attached_seen, q), 1) for q in (50, 99, 100)],
        "viewer_frames_s": round(statistics.mean(o["frames"] for o in viewer_outs) / args.seconds),
        "viewer_kb_s": round(statistics.mean(o["bytes"] for o in viewer_outs) / args.seconds / 1024),
        "resets": sum(o["resets"] for o in viewer_outs),
        "attached_live": [o["live"] for o in attached_outs],
        "metrics_cold_ms": round(1e3 * cost["cpu_s"][0], 1),
        "metrics_warm_ms": round(1e3 * statistics.median(cost["cpu_s"][1:]), 1),
        "metrics_kb": round(cost["bytes"] / 1024),
        "scrape_wall_ms": round(1e3 * statistics.median(w for w, _ in walls), 1),
        "hub_cores": sorted(hub_cores) if hub_cores else "all",
        "client_cores": sorted(client_cores) if client_cores else "all",
    }


def table(r: dict[str, Any], header: str) -> str:
    rows = [
        ("hosts (+ clock hosts)", f"{r['hosts']} (+{r['clock_hosts']})"),
        ("viewers / attached fleets", f"{r['viewers']} / {r['attached']}"),
        ("all live after", f"{r['live_s']} s"),
        ("hub CPU (% of one core)", f"{r['hub_cpu_pct']} %"),
        ("hub RSS, end / peak", f"{r['hub_rss_mb']} MB / {r['hub_peak_mb']} MB"),
        ("event delay at viewers p50 / p99 / max", " / ".join(f"{v} ms" for v in r["viewer_delay_ms"])),
        ("event delay at attached p50 / p99 / max", " / ".join(f"{v} ms" for v in r["attached_delay_ms"])),
        ("a viewer reads", f"{r['viewer_frames_s']} frames/s, {r['viewer_kb_s']} KiB/s"),
        ("resets (clients behind)", str(r["resets"])),
        ("attached fleets: hosts live", ", ".join(map(str, r["attached_live"]))),
        ("/metrics CPU in the hub, cold / warm", f"{r['metrics_cold_ms']} ms / {r['metrics_warm_ms']} ms"),
        ("/metrics size, scrape wall", f"{r['metrics_kb']} KiB, {r['scrape_wall_ms']} ms"),
        ("cores: hub / clients", f"{r['hub_cores']} / {r['client_cores']}"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join([header, *(f"{k:<{width}}  {v}" for k, v in rows)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--role", choices=("main", "hub", "viewers", "attached"), default="main")
    parser.add_argument("--hosts", type=int, default=1024)
    parser.add_argument("--viewers", type=int, default=50)
    parser.add_argument("--attached", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--hub-cpus")
    parser.add_argument("--client-cpus")
    parser.add_argument("--name", default="dev")
    parser.add_argument("--out-dir", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--recordings")
    parser.add_argument("--url")
    parser.add_argument("--count", type=int, default=1)
    args = parser.parse_args()
    if args.role == "hub":
        return asyncio.run(hub_main(args))
    if args.role == "viewers":
        return asyncio.run(viewers_main(args))
    if args.role == "attached":
        return asyncio.run(attached_main(args))
    with tempfile.TemporaryDirectory(prefix="gputui-serve-load-") as scratch:
        result = measure(args, Path(scratch) / "recordings")
    header = (
        f"serve_load {args.name}: {platform.node()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')}, load {os.getloadavg()[0]:.2f}"
    )
    text = table(result, header)
    print(text)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"serve_load_{args.name}.txt").write_text(text + "\n")
    (out / f"serve_load_{args.name}.raw.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

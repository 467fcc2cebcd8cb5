#!/usr/bin/env python3
"""A busy host must not make a clean slow (issue 11): time to a verified clean, idle vs busy, and what
the steady-state holder scan costs there.

    python bench/busy_clean.py [--procs 2000] [--fds 40] [--runs 7] [--cli-runs 3] [--scans 700]
                               [--gib 1] [--name NAME] [--out-dir DIR]

Two phases, idle (nothing added) then busy (`--procs` processes keeping `--fds` files open, 20 of them
holding fake device files: the load generator of bench/holder_scan.py). In each:
- probe: a cooperative job on a simulated GPU (readers/sim/, scenario "empty", SimReader.spawn),
  planned "free GPU 0" from a full sample and executed by the probe's engine (bench/clean_time.py's
  run_gputui); the time is the probe's own elapsed to its `done` event, and "after release" is that
  less the moment NVML first showed the GPU idle. Runs alternate between the targeted rescans (as
  built) and full ones (run/state.RESCAN_LOOK = FULL: every rescan and the confirmation a full scan,
  the way before issue 11);
- cli: the whole `gputui clean --demo demo-a:0 --yes` command (own demo probes, its full-scan sample,
  the plan, the audit log): wall time, and the probe's elapsed it reports;
- scan: the steady-state holder scan every sample does, over `--scans` scans after a full one (enough
  to include the unconditional full reads), on the load's fake device files, and the staleness the
  scanner reports (its turn period and worst case, in scans).
Prints a table; writes `<name>.txt` (the table) and `<name>.raw.json` under --out-dir. Run from an
older checkout (copy bench/ there) it times that code: without RESCAN_LOOK the engine is as built.
Every process is started and ended here: the load by EOF on its pipe, the sim's jobs through the sim.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from clean_time import SimJobs, run_gputui, settle  # noqa: E402
from holder_scan import DEVICES, start_load, stop_load  # noqa: E402

from gputui.api import HolderScanner, Probe, SimReader  # noqa: E402
from gputui.probe.run import state as looks  # noqa: E402  (the rescans' knob, RESCAN_LOOK)

MODES = ("targeted", "full")


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def pct(values: list[float], q: float) -> float:
    xs = sorted(values)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def probe_runs(runs: int, gib: float) -> dict[str, list[dict]]:
    """Alternating targeted / full runs on one sim GPU; {mode: [run_gputui's dict]}."""
    reader = SimReader(gpus=1, scenario="empty")
    probe = Probe(reader)
    hello = probe.start()
    assert hello["error"] is None, hello["error"]
    jobs = SimJobs(reader, gib)
    knob = hasattr(looks, "RESCAN_LOOK")
    modes = MODES if knob else ("as built",)
    out: dict[str, list[dict]] = {m: [] for m in modes}
    try:
        for _ in range(runs):
            for mode in modes:
                if knob:
                    looks.RESCAN_LOOK = looks.FULL if mode == "full" else looks.TARGETED
                settle(probe)
                for _ in range(3):  # the probe samples between plans, as it does every interval
                    probe.sample()
                out[mode].append(run_gputui(probe, jobs, "cooperative", term_timeout=5.0))
    finally:
        if knob:
            looks.RESCAN_LOOK = looks.TARGETED
        jobs.cleanup()
        probe.close()
    return out


def cli_runs(runs: int, log: Path) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), GPUTUI_DEMO="fresh")  # every run on the same fresh demo
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user runs it: bytecode cached
    argv = [
        sys.executable,
        "-m",
        "gputui",
        "clean",
        "--demo",
        "demo-a:0",
        "--yes",
        "--json",
        "--log",
        str(log),
    ]
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run(
            argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False
        )
        wall = time.perf_counter() - t0
        try:
            host = json.loads(done.stdout)["hosts"][0]
        except (ValueError, KeyError, IndexError):
            host = {}
        out.append(
            {
                "wall_s": wall,
                "probe_ms": host.get("elapsed_ms"),
                "ok": bool(host.get("ok")),
                "rc": done.returncode,
            }
        )
    return out


def scan_costs(prefix: str, scans: int) -> dict:
    scanner = HolderScanner(prefix)
    scanner.scan(full=True)
    ms, cpu = [], []
    for _ in range(scans):
        t0, c0 = time.perf_counter(), time.process_time()
        scanner.scan()
        ms.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    check, worst = scanner.staleness()
    return {"ms": ms, "cpu_ms": cpu, "check_every": check, "worst": worst}


def phase(label: str, args: argparse.Namespace, tmp: Path) -> dict:
    print(f"[{label}] load average {loadavg()}", file=sys.stderr)
    result = {"loadavg_before": loadavg(), "processes": sum(1 for n in os.listdir("/proc") if n.isdigit())}
    result["probe"] = probe_runs(args.runs, args.gib)
    result["cli"] = cli_runs(args.cli_runs, tmp / f"actions-{label}.jsonl")
    result["scan"] = scan_costs(str(tmp / "dev" / "nvidia"), args.scans)
    result["loadavg_after"] = loadavg()
    return result


def table(raw: dict, args: argparse.Namespace) -> str:
    idle, busy = raw["idle"], raw["busy"]
    lines = [
        f"busy host: {args.procs} extra processes x {args.fds} fds ({busy['processes']} in /proc; idle: "
        f"{idle['processes']}); {raw['machine']}; {raw['date']}",
        f"load average idle {idle['loadavg_before']} -> {idle['loadavg_after']}, "
        f"busy {busy['loadavg_before']} -> {busy['loadavg_after']}",
        "",
        "| what | idle | busy |",
        "| --- | ---: | ---: |",
    ]

    def ms(rows: list[dict], key: str) -> str:
        xs = [r[key] for r in rows if r.get(key) is not None]
        return f"{statistics.median(xs):.0f} / {pct(xs, 0.95):.0f}" if xs else "-"

    def after(rows: list[dict]) -> list[dict]:
        return [{"a": r["probe_ms"] - r["idle_ms"]} for r in rows if r.get("idle_ms") is not None]

    for mode in idle["probe"]:
        i, b = idle["probe"][mode], busy["probe"][mode]
        name = {"targeted": "targeted rescans", "full": "full rescans (before)"}.get(mode, mode)
        clean = f"{sum(r['clean'] for r in i)}/{len(i)}, {sum(r['clean'] for r in b)}/{len(b)}"
        lines.append(
            f"| probe: plan to verified clean, {name}, ms median / p95 (clean {clean}) | {ms(i, 'probe_ms')} | {ms(b, 'probe_ms')} |"
        )
        lines.append(
            f"| probe: verified after the release, {name}, ms median / p95 | {ms(after(i), 'a')} | {ms(after(b), 'a')} |"
        )
    ci, cb = idle["cli"], busy["cli"]
    ok = f"{sum(r['ok'] for r in ci)}/{len(ci)}, {sum(r['ok'] for r in cb)}/{len(cb)}"
    wall = lambda rows: f"{statistics.median([r['wall_s'] for r in rows]):.2f}"  # noqa: E731
    lines.append(
        f"| `gputui clean --demo demo-a:0 --yes`: wall s, median (CLEAN {ok}) | {wall(ci)} | {wall(cb)} |"
    )
    lines.append(
        f"| ... its probe's elapsed to done, ms median / p95 | {ms(ci, 'probe_ms')} | {ms(cb, 'probe_ms')} |"
    )
    si, sb = idle["scan"], busy["scan"]
    stat = lambda s, k: f"{statistics.median(s[k]):.2f} / {pct(s[k], 0.95):.2f}"  # noqa: E731
    lines.append(
        f"| steady holder scan per sample, wall ms median / p95 ({args.scans} scans) | {stat(si, 'ms')} | "
        f"{stat(sb, 'ms')} |"
    )
    lines.append(f"| ... CPU ms median / p95 | {stat(si, 'cpu_ms')} | {stat(sb, 'cpu_ms')} |")
    lines.append(
        f"| ... staleness it reports: turn period / worst case, scans | {si['check_every']} / {si['worst']} | "
        f"{sb['check_every']} / {sb['worst']} |"
    )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=2000)
    ap.add_argument("--fds", type=int, default=40)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--cli-runs", type=int, default=3)
    ap.add_argument("--scans", type=int, default=700)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--name", default="dev")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    raw: dict = {
        "args": vars(args) | {"out_dir": str(args.out_dir)},
        "machine": f"{os.cpu_count()} cores, Linux {platform.release()}, CPython {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    with tempfile.TemporaryDirectory(prefix="gputui-busy-") as d:
        tmp = Path(d)
        (tmp / "dev").mkdir()
        (tmp / "data").write_text("")
        for name in DEVICES:
            (tmp / "dev" / name).write_text("")
        raw["idle"] = phase("idle", args, tmp)
        pids, w = start_load(args.procs, args.fds, 20, tmp)
        try:
            raw["busy"] = phase("busy", args, tmp)
        finally:
            stop_load(pids, w)
    text = table(raw, args)
    print(text)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"busy_clean_{args.name}.txt").write_text(text + "\n")
    (args.out_dir / f"busy_clean_{args.name}.raw.json").write_text(json.dumps(raw, indent=1))
    ok = all(r["clean"] for p in ("idle", "busy") for rows in raw[p]["probe"].values() for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

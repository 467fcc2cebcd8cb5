#!/usr/bin/env python3
"""`gputui snapshot --replay FILE --at TIME` on a large recording: what `--at` reads, and how long.

    python bench/replay_at.py [--expanded 6GiB] [--hosts 2] [--path /tmp/replay_at.gz] [--keep]
                              [--full-scan] [--name dev] [--out-dir bench/results]

Writes a recording with gputui's own writer (gputui.recording.format.RecordingWriter, default checkpoint
spacing): --hosts demo hosts, one sample each a second (the replay fixtures' samples over and over,
the real sim probe's records), until the entries come to --expanded bytes. Then, for moments at 1 %,
50 %, 90 % and 99.9 % of the recording and past its end, `state_at` as `--at` runs it: wall time, bytes
expanded, bytes of the file read looking for checkpoints. `--full-scan` also reads the 99.9 % moment
from the start with no bound (what `--at` did before checkpoints: a format-1 file) and checks both
give the same state. Last, the real command near the end (`gputui snapshot --replay FILE --at +S --json`),
its wall time from start to exit. Prints a table; writes `<out-dir>/replay_at_<name>.txt` and
`.raw.json`; the recording is removed unless --keep.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputui.api import RecordingReader, RecordingWriter, size_words, state_at  # noqa: E402
from gputui.cli.argtypes import size  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
START = 1764554040.0


def fixture(name: str) -> list[dict[str, Any]]:
    lines = (FIXTURES / f"{name}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def write(path: Path, hosts: int, expanded: int) -> dict[str, Any]:
    names = [f"node{i:02d}" for i in range(hosts)]
    sources = [fixture("demo-a" if i % 2 == 0 else "demo-b") for i in range(hosts)]
    now = [START]
    writer = RecordingWriter(path, names, interval=1.0, max_bytes=1 << 40, clock=lambda: now[0])
    written = 0
    started = time.perf_counter()
    for name, records in zip(names, sources, strict=True):
        writer.write(name, "status", {"status": "live", "reason": None, "detail": None})
        writer.write(name, "probe", records[0])
    second = 0
    while written < expanded:
        second += 1
        now[0] = START + second
        for name, records in zip(names, sources, strict=True):
            record = records[1 + second % (len(records) - 1)]
            writer.write(name, "probe", record)
            written += len(json.dumps(record, separators=(",", ":"))) + 60
    now[0] = START + second + 0.5
    writer.close("seconds")
    return {
        "hosts": hosts,
        "seconds": second,
        "entries": writer.entries,
        "file_bytes": path.stat().st_size,
        "write_s": time.perf_counter() - started,
    }


def at_moment(path: Path, at: float, seek: bool) -> dict[str, Any]:
    started = time.perf_counter()
    with RecordingReader(path) as reader:
        state = state_at(reader, at, seek=seek, max_read=1 << 62)
    return {
        "s": time.perf_counter() - started,
        "expanded": reader.expanded,
        "scanned": reader.scanned,
        "state": {
            name: (h.sample_t, h.sample.get("seq") if h.sample else None) for name, h in state.hosts.items()
        },
        "last": state.last_t,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--expanded", type=size, default=6 << 30)
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--path", default="/tmp/gputui-replay-at.gz")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--full-scan", action="store_true")
    p.add_argument("--name", default="dev")
    p.add_argument("--out-dir", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()
    path = Path(args.path)
    if path.exists():
        path.unlink()
    made = write(path, args.hosts, args.expanded)
    seconds = made["seconds"]
    runs = []
    try:
        for share in (0.01, 0.5, 0.9, 0.999, 2.0):
            at = START + seconds * share
            run: dict[str, Any] = {"share": share, "at": at, "seek": at_moment(path, at, True)}
            if args.full_scan and share == 0.999:  # minutes on a large file: once
                run["full"] = at_moment(path, at, False)
                run["same"] = run["full"]["state"] == run["seek"]["state"]
            runs.append(run)
        offset = math.floor(seconds * 0.999)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        started = time.perf_counter()
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "gputui",
                "snapshot",
                "--replay",
                str(path),
                "--at",
                f"+{offset}",
                "--json",
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        cli_s = time.perf_counter() - started
    finally:
        if not args.keep:
            path.unlink()
    machine = f"{platform.node()} ({os.cpu_count()} CPUs, Python {platform.python_version()}, {time.strftime('%Y-%m-%d')})"
    lines = [
        f"replay --at on a recording of {made['hosts']} hosts, {seconds:,} s, {made['entries']:,} entries: "
        f"{size_words(args.expanded)} of entries, {size_words(made['file_bytes'])} on disk "
        f"(written in {made['write_s']:.0f} s); {machine}",
        "| --at | seek: s | seek: expanded | seek: file read | full scan: s | full scan: expanded | same state |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for run in runs:
        seek, full = run["seek"], run.get("full")
        label = "past the end" if run["share"] > 1 else f"{run['share'] * 100:g} %"
        lines.append(
            f"| {label} | {seek['s']:.2f} | {size_words(seek['expanded'])} | {size_words(seek['scanned'])} | "
            + (
                f"{full['s']:.1f} | {size_words(full['expanded'])} | {run['same']} |"
                if full
                else "- | - | - |"
            )
        )
    lines.append(
        f"`gputui snapshot --replay FILE --at +{offset} --json`: exit {cli.returncode}, {cli_s:.2f} s wall"
    )
    text = "\n".join(lines)
    print(text)
    if cli.returncode != 0:
        print(cli.stderr[-2000:], file=sys.stderr)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"replay_at_{args.name}.txt").write_text(text + "\n")
    for run in runs:
        for how in ("seek", "full"):
            if how in run:
                run[how].pop("state")
    raw = {"machine": machine, "recording": made, "runs": runs, "cli_s": cli_s, "cli_exit": cli.returncode}
    (out_dir / f"replay_at_{args.name}.raw.json").write_text(json.dumps(raw, indent=1))
    return 0 if cli.returncode == 0 and all(r.get("same", True) for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())

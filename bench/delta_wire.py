#!/usr/bin/env python3
"""Delta samples on a real probe: bytes on the wire and the app's cost per sample, whole vs delta.

Starts `python -m gputui.probe` (the NVML reader on a GPU host, else `--reader sim`) as a child,
reads N whole samples, then asks for deltas (`configure deltas: K`, as the app does) and reads N
more. Each sample goes through what a link does with it (wire.decode) and the app's intake
(gputui.fleet.deltas.SampleIntake); every delta merged is checked against the probe's own merge
(probe.delta.apply, the same rules) and parsed the general way (Sample.from_wire of the merged
record): the sample the intake made must be the same. Prints a table: bytes per line, decode and
intake microseconds per sample (median), samples whole among the deltas. The child is ended by
its own `quit` and reaped; nothing else is signalled.

    python bench/delta_wire.py [--reader nvml|sim] [--samples 60] [--interval 0.2]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputui.api import DELTAS_EVERY, PROBE_TYPES, Sample, SampleIntake, apply, decode  # noqa: E402


def samples(proc: subprocess.Popen[bytes], n: int) -> list[bytes]:
    assert proc.stdout is not None
    out = []
    while len(out) < n:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("the probe ended early")
        if b'"type":"sample"' in line:
            out.append(line)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reader", choices=("nvml", "sim"), default=None, help="default: nvml if pynvml loads")
    ap.add_argument("--samples", type=int, default=60)
    ap.add_argument("--interval", type=float, default=0.2)
    args = ap.parse_args()
    reader = args.reader
    if reader is None:
        try:
            import pynvml

            pynvml.nvmlInit()
            reader = "nvml"
        except Exception:
            reader = "sim"
    argv = [sys.executable, "-m", "gputui.probe", "--reader", reader, "--interval", str(args.interval)]
    if reader == "sim":
        argv += ["--sim-scenario", "demo"]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        hello = json.loads(proc.stdout.readline())
        whole = samples(proc, args.samples)
        proc.stdin.write(b'{"type":"configure","v":1,"deltas":%d}\n' % DELTAS_EVERY)
        proc.stdin.flush()
        mixed = samples(proc, args.samples)
        proc.stdin.write(b'{"type":"quit","v":1}\n')
        proc.stdin.flush()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()  # our own child, by its PID
            proc.wait()
    rows = []
    intake: SampleIntake = SampleIntake()  # one link's: the deltas follow its whole samples
    held: dict[str, Any] | None = None
    for name, lines in (("whole", whole), ("delta", mixed)):
        decode_us, take_us, deltas = [], [], 0
        for line in lines:
            t0 = time.perf_counter()
            record, problem = decode(line, PROBE_TYPES)
            t1 = time.perf_counter()
            assert record is not None, problem
            sample = intake.take(record)
            t2 = time.perf_counter()
            decode_us.append((t1 - t0) * 1e6)
            take_us.append((t2 - t1) * 1e6)
            if "delta" in record:
                deltas += 1
                assert held is not None
                held = apply(held, record)
            else:
                held = record
            if sample != Sample.from_wire(held):
                raise SystemExit(
                    f"seq {record.get('seq')}: the intake's sample differs from the merged record's"
                )
        rows.append((name, len(lines), deltas, statistics.median(len(x) for x in lines),
                     max(len(x) for x in lines), statistics.median(decode_us), statistics.median(take_us)))  # fmt: skip
    print(
        f"delta wire: {platform.node()}, {time.strftime('%Y-%m-%d')}, reader {reader} "
        f"({len(json.loads(whole[0]).get('gpus') or [])} GPUs, driver {hello.get('host', {}).get('driver_version')}), "
        f"CPython {platform.python_version()}, {args.samples} samples each at {args.interval:g} s"
    )
    print()
    print("| samples | lines | deltas | bytes/line median | max | decode us median | intake us median |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, n, d, med, top, dec, take in rows:
        print(f"| {name} | {n} | {d} | {med:.0f} | {top} | {dec:.0f} | {take:.0f} |")
    print()
    print("every delta merged by the intake equals the probe's merge parsed whole: yes")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""One exec per sample over SSH (the pattern of gpustat-web and all-smi's agentless mode) vs one
long-lived channel (gputui), on loopback OpenSSH.

    python bench/ssh_exec_cost.py [--runs 30]

Starts a loopback sshd (tests/support/sshd.py: generated keys, temp known_hosts), then measures, per sample:
- `ssh HOST CMD`: a new connection and exec every sample (CMD: `true`, and `python3 -c` reading
  /proc like a tiny probe), as the exec-per-sample tools do (they run nvidia-smi, which adds the
  20-30 ms spawn measured in section 1 on a GPU host);
- gputui: one SSH connection and one channel for the session; a sample is one protocol line.
CPU is the whole machine's (client, sshd and the remote command all run here), from /proc/stat in
clock ticks: meaningful only on an otherwise idle machine, and too coarse for one protocol line.
Prints a table; writes raw numbers with --out. Stops the sshd it started.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputui.api import HostSpec, SshLink  # noqa: E402
from tests.support.sshd import SshEnv  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def machine_cpu() -> float:
    """Seconds of CPU used by the whole machine so far (user + nice + system + irq + softirq)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:8]]
    return (fields[0] + fields[1] + fields[2] + fields[5] + fields[6]) / TICK


def exec_costs(env: SshEnv, alias: str, argv: list[str], runs: int) -> tuple[list[float], list[float]]:
    cpu, wall = [], []
    base = [
        "ssh",
        "-F",
        str(env.ssh_config),
        "-o",
        f"UserKnownHostsFile={env.known_hosts}",
        "-o",
        "BatchMode=yes",
    ]
    for _ in range(runs):
        c0, w0 = machine_cpu(), time.perf_counter()
        subprocess.run(
            [*base, alias, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True
        )
        wall.append(time.perf_counter() - w0)
        cpu.append(machine_cpu() - c0)
    return cpu, wall


async def channel_costs(env: SshEnv, alias: str, runs: int) -> tuple[list[float], list[float]]:
    spec = HostSpec(name=alias, address=alias, reader="sim", sim_scenario="empty")
    link = SshLink(spec, known_hosts=str(env.known_hosts), ssh_config=str(env.ssh_config), interval=60)
    await link.open()
    cpu, wall = [], []
    try:
        await link.recv()  # the first sample
        for _ in range(runs):
            c0, w0 = machine_cpu(), time.perf_counter()
            await link.send({"type": "sample", "v": 1})
            while (await link.recv())["type"] != "sample":
                pass
            wall.append(time.perf_counter() - w0)
            cpu.append(machine_cpu() - c0)
    finally:
        await link.close()
    return cpu, wall


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    tiny_probe = ["python3", "-c", "'import os; print(len(os.listdir(\"/proc\")))'"]
    with tempfile.TemporaryDirectory(prefix="gputui-ssh-exec-") as d:
        env = SshEnv(Path(d))
        try:
            env.add("h1")
            rows = {
                "ssh HOST true (exec per sample)": exec_costs(env, "h1", ["true"], args.runs),
                "ssh HOST python3 -c ... (exec per sample)": exec_costs(env, "h1", tiny_probe, args.runs),
                "gputui: one channel, a sample per line": asyncio.run(channel_costs(env, "h1", args.runs)),
            }
        finally:
            env.close()
    print(f"\nper-sample cost over loopback SSH ({os.cpu_count()} cores; CPU = whole machine)")
    print(f"{'what':<44} {'wall ms (median)':>17} {'CPU ms (median)':>16}")
    raw = {}
    for label, (cpu, wall) in rows.items():
        w = statistics.median(wall) * 1e3
        c = statistics.median(cpu) * 1e3
        print(f"{label:<44} {w:>17.1f} {c:>16.1f}")
        raw[label] = {"wall_ms": [x * 1e3 for x in wall], "cpu_ms": [x * 1e3 for x in cpu]}
    if args.out:
        args.out.write_text(json.dumps(raw, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

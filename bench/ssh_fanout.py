#!/usr/bin/env python3
"""Time until every host is live, for N real loopback SSH hosts (aliases of one or a few sshd), with
sshd's default MaxStartups (10:30:100) and a tight one (3:30:10), through gputui's dialer
(gputui/transport/dial.py) and, for comparison, without it (every handshake at once, none retried:
what gputui did before; the fleet's own reconnect backoff, 0.5 s doubling to 30 s, is all that is left).

    python bench/ssh_fanout.py [--hosts 64,128,256] [--servers 1] [--mode probe|connect]
                               [--per-host-blocks] [--tight-only] [--no-baseline] [--out FILE]

--mode probe (default): the real fleet, each host its own SSH connection and remote probe (simulated
GPUs, scenario "empty"), live at its first sample: what the dashboard does. --mode connect: each host
an authenticated connection with a session channel running `cat` (no remote Python: for counts whose
probes would not fit in memory). Prints a table: seconds until all live, the handshakes the server
dropped (retried by the dialer), the connections the fleet had to make again, the hosts not live at
the deadline, and the most handshakes at once. Starts and stops its own sshd servers (tests/sshd.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import asyncssh  # noqa: E402

from gputui.api import DOWN, LIVE, Fleet, FleetEvent, HostSpec, StatusChanged  # noqa: E402
from gputui.transport import dial  # noqa: E402  (the dialer's knob: a benchmark swaps it)
from tests.support.sshcluster import NO_BASHRC, SshCluster  # noqa: E402

TIGHT = "3:30:10"
DEADLINE = 300.0


def ungated() -> dial.Dialer:
    """What gputui did before the dialer: every handshake at once, a drop not retried."""
    return dial.Dialer(per_host=1 << 20, total=1 << 20, max_tries=1)


async def run_probe(cluster: SshCluster, names: list[str], dialer: dial.Dialer) -> dict[str, float]:
    dial.use(dialer)
    fleet = Fleet()
    for name in names:
        spec = HostSpec(name=name, address=name, reader="sim", sim_scenario="empty")
        fleet.add(name, lambda spec=spec: cluster.link(spec, 1.0, connect_timeout=60.0), interval=1.0)
    failures = 0
    last: dict[str, str] = {}

    def listen(change: FleetEvent) -> None:
        nonlocal failures
        view = change.view
        if isinstance(change, StatusChanged) and view.status != last.get(view.name):
            failures += view.status == DOWN  # a link that failed: the fleet backs off, tries again
            last[view.name] = view.status

    fleet.listen(listen)
    start = time.monotonic()
    fleet.start()
    try:
        while time.monotonic() - start < DEADLINE:
            if all(v.status == LIVE for v in fleet.hosts):
                break
            await asyncio.sleep(0.05)
        took = time.monotonic() - start
        lost = sum(1 for v in fleet.hosts if v.status != LIVE)
    finally:
        await fleet.stop()
        cluster.links.clear()
    return {"seconds": took, "lost": lost, "reconnects": failures}


async def run_connect(cluster: SshCluster, names: list[str], dialer: dial.Dialer) -> dict[str, float]:
    dial.use(dialer)
    env = cluster.env
    keys = [str(s.user_key) for s in env.servers.values()]
    failures = 0

    async def one(name: str) -> asyncssh.SSHClientConnection | None:
        nonlocal failures
        server = cluster.server_of[name]
        delay = 0.5
        while True:
            try:
                conn = await dialer.dial(
                    f"127.0.0.1:{server.port}",
                    lambda: asyncssh.connect(
                        name,
                        known_hosts=str(env.known_hosts),
                        config=[str(env.ssh_config)],
                        client_keys=keys,
                        agent_path=None,
                        connect_timeout=60,
                        login_timeout=60,
                    ),
                )
                await conn.create_process("exec cat")
                return conn
            except (OSError, asyncssh.Error):
                failures += 1  # as the fleet does: back off (0.5 s doubling to 30 s), try again
                if time.monotonic() - start > DEADLINE:
                    return None
                await asyncio.sleep(delay)
                delay = min(30.0, delay * 2)

    start = time.monotonic()
    conns = await asyncio.gather(*(one(n) for n in names))
    took = time.monotonic() - start
    for conn in conns:
        if conn is not None:
            conn.close()
    await asyncio.gather(*(c.wait_closed() for c in conns if c is not None), return_exceptions=True)
    return {"seconds": took, "lost": sum(c is None for c in conns), "reconnects": failures}


def compact_config(cluster: SshCluster, servers: int) -> None:
    """One wildcard block per server (`Host h*-s0`), as a cluster's ssh config names its nodes: a
    block per host makes every connection parse them all (asyncssh re-reads the file per hop)."""
    blocks = []
    for s in range(servers):
        server = cluster.env.servers[f"sshd-{s}"]
        blocks.append(server.config_block(f"h*-s{s}"))
    cluster.env.ssh_config.write_text("".join(blocks))


def measure(
    n: int, servers: int, tight: bool, gated: bool, mode: str, per_host_blocks: bool
) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="gputui-fanout-") as tmp:
        names = [f"h{i:04d}-s{i % servers}" for i in range(n)]
        layout = {f"sshd-{s}": [x for x in names if x.endswith(f"-s{s}")] for s in range(servers)}
        # Sessions skip the user's ~/.bashrc: what a dev machine's rc file does per shell (pyenv's
        # rehash and its lock) is no part of connecting, and hundreds of them at once stall it.
        extra = (NO_BASHRC, f"MaxStartups {TIGHT}") if tight else (NO_BASHRC,)
        cluster = SshCluster(Path(tmp), layout, sshd_config=extra)
        if not per_host_blocks:
            compact_config(cluster, servers)
        try:
            dialer = dial.Dialer() if gated else ungated()
            runner = run_probe if mode == "probe" else run_connect
            result = asyncio.run(runner(cluster, names, dialer))
        finally:
            cluster.close()
    return {
        "hosts": n,
        "servers": servers,
        "maxstartups": TIGHT if tight else "10:30:100 (default)",
        "dialer": "gputui" if gated else "none (before)",
        "mode": mode,
        "ssh_config": "a block per host" if per_host_blocks else "a block per server",
        **result,
        "dropped": dialer.stats.dropped,
        "peak_handshakes": dialer.stats.peak,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", default="64,128,256", help="comma-separated host counts")
    parser.add_argument("--servers", type=int, default=1, help="sshd servers the hosts are aliases of")
    parser.add_argument("--mode", choices=("probe", "connect"), default="probe")
    parser.add_argument("--no-baseline", action="store_true", help="skip the runs without the dialer")
    parser.add_argument("--tight-only", action="store_true", help="only the tight MaxStartups")
    parser.add_argument(
        "--per-host-blocks",
        action="store_true",
        help="an ssh config block per host (default: one wildcard block per server)",
    )
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args()
    dial.raise_fd_limit()
    blocks = "a block per host" if args.per_host_blocks else "a block per server"
    print(f"# {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}, "
          f"mode {args.mode}, {args.servers} sshd, ssh config: {blocks}, "
          f"open files {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    head = f"{'hosts':>5}  {'MaxStartups':<20} {'dialer':<14} {'all live':>9} {'dropped':>7} {'again':>6} {'lost':>5} {'peak':>5}"
    print(head)
    rows = []
    for n in (int(x) for x in args.hosts.split(",")):
        for tight in (True,) if args.tight_only else (False, True):
            for gated in (True, False) if not args.no_baseline else (True,):
                row = measure(n, args.servers, tight, gated, args.mode, args.per_host_blocks)
                rows.append(row)
                print(
                    f"{n:>5}  {row['maxstartups']!s:<20} {row['dialer']!s:<14} {row['seconds']:>8.1f}s "
                    f"{row['dropped']:>7} {row['reconnects']:>6} {row['lost']:>5} {row['peak_handshakes']:>5}",
                    flush=True,
                )
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

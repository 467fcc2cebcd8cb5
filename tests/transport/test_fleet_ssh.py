"""The fleet and the app over real SSH: three hosts behind two loopback sshd servers (issue 5).

Hosts gpu-a and gpu-b are served by sshd-1, gpu-c by sshd-2, so sshd-2 can die while the others keep
streaming. Each host is its own SSH connection and its own remote probe with simulated GPUs. Every
test checks that each remote probe it started ended by itself (found by PID through the private
TMPDIR the servers give their sessions) and that every sim directory is gone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import gputui.fleet.session as fleet_mod
from gputui.config.file import HostSpec
from gputui.fleet.fleet import Fleet
from gputui.fleet.session import DOWN, LIVE, STALE, StatusChanged
from gputui.ui import make_app
from tests.support.sshcluster import SshCluster, freeze, kill_sshd, running_cluster

pytestmark = pytest.mark.ssh

INTERVAL = 0.3
LAYOUT = {"sshd-1": ["gpu-a", "gpu-b"], "sshd-2": ["gpu-c"]}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SshCluster]:
    yield from running_cluster(tmp_path / "cluster", LAYOUT)


def sim(name: str, scenario: str = "empty", **fields: object) -> HostSpec:
    return HostSpec(name=name, address=name, reader="sim", sim_scenario=scenario, **fields)  # type: ignore[arg-type]


def ssh_fleet(cluster: SshCluster, specs: list[HostSpec], interval: float = INTERVAL) -> Fleet:
    fleet = Fleet()
    for spec in specs:
        fleet.add(
            spec.name,
            lambda spec=spec: cluster.link(spec, interval, keepalive_interval=1.0, keepalive_count_max=2),
            read_only=spec.read_only,
            interval=interval,
        )
    return fleet


async def until(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.02)


def probe_pids(cluster: SshCluster) -> list[int]:
    return [link.hello["pid"] for link in cluster.links if link.hello is not None]


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] == "Z"
    except OSError:
        return True


# ------------------------------------------------------------------------- streaming


async def test_three_hosts_stream_at_once_over_two_sshd(cluster):
    fleet = ssh_fleet(cluster, [sim("gpu-a", "demo"), sim("gpu-b"), sim("gpu-c")])
    fleet.start()
    try:
        await fleet.wait_first_samples(60)
        views = fleet.hosts
        assert [v.status for v in views] == [LIVE] * 3, [(v.name, v.status, v.detail) for v in views]
        assert all(len(v.sample.gpus) == 4 for v in views)
        assert {p.kind for p in fleet.view("gpu-a").sample.processes} >= {"user", "ghost", "hidden"}
        # Each host is its own connection and its own remote probe.
        assert len({link.hello["pid"] for link in cluster.links if link.hello}) == 3
        assert {link.route[0] for link in cluster.links} == {"gpu-a", "gpu-b", "gpu-c"}
        # (and the cleanup check below sees them: the probes, gpu-a's sim jobs, one sim dir each)
        assert set(probe_pids(cluster)) < set(cluster.remote_processes())
        assert len(cluster.sim_dirs()) == 3
        seqs = {v.name: v.sample.seq for v in views}
        await until(lambda: all(v.sample.seq >= seqs[v.name] + 3 for v in views), 15, "3 more samples each")
    finally:
        await fleet.stop()


# ------------------------------------------------------------------------- a host dies and comes back


def rendered(app, host: str) -> str:  # type: ignore[no-untyped-def]
    """The host list's status column for `host`, as drawn: an age while live, else the state."""
    return app._main.host_list.rows_data()[host]["age"].plain


def status_line(app) -> str:  # type: ignore[no-untyped-def]
    return app._main.status_line.render().plain


async def test_sshd_killed_mid_stream_host_goes_stale_down_and_live_again_in_the_app(cluster, monkeypatch):
    # Reconnects as soon as the host is back: the backoff is short (the policy is tested elsewhere).
    monkeypatch.setattr(fleet_mod, "BACKOFF_FIRST", 0.2)
    monkeypatch.setattr(fleet_mod, "BACKOFF_CAP", 0.5)
    fleet = ssh_fleet(cluster, [sim("gpu-a"), sim("gpu-b"), sim("gpu-c")])
    a, b, c = (fleet.view(n) for n in ("gpu-a", "gpu-b", "gpu-c"))
    seen: list[tuple[str, str | None]] = []  # gpu-c's (status, reason) as the fleet reported them
    fleet.listen(
        lambda e: (
            seen.append((e.view.status, e.view.reason))
            if e.view is c and isinstance(e, StatusChanged)
            else None
        )
    )
    app = make_app(fleet, interval=INTERVAL)
    async with app.run_test(headless=True, size=(160, 50)) as pilot:

        async def shown(host: str, want: set[str] | None, timeout: float) -> None:
            """Until the host list draws `host` with a word in `want` (None: live, an age)."""
            deadline = time.monotonic() + timeout
            words = {"stale", "down", "conn…", "-"}
            while True:
                word = rendered(app, host) if host in app._main.host_list.rows_data() else "-"
                if (word in want) if want is not None else (word not in words):
                    return
                if time.monotonic() > deadline:
                    raise AssertionError(f"{host} is drawn as {word!r}, not {want or 'live'}: {seen}")
                await pilot.pause(0.02)

        for host in ("gpu-a", "gpu-b", "gpu-c"):
            await shown(host, None, 60)
        assert "3 live" in status_line(app)
        assert {link.label for link in cluster.links} == {"gpu-a", "gpu-b", "gpu-c"}
        # gpu-c's live link (on a busy machine an attempt before it may have failed, with no hello).
        old_probe = next(
            link.hello["pid"] for link in reversed(cluster.links) if link.label == "gpu-c" and link.hello
        )
        server = cluster.server_of["gpu-c"]

        # sshd-2 hangs (SIGSTOP: no data, no FIN): gpu-c is drawn stale...
        freeze(server)
        await shown("gpu-c", {"stale"}, 60)
        assert "1 stale" in status_line(app)  # drawn by the same redraw as the host list
        # ...then sshd-2 is killed (listener and session): the connection breaks, gpu-c is down.
        kill_sshd(server)
        await shown("gpu-c", {"down"}, 60)
        assert "1 down" in status_line(app)
        # (it is retried at once: its state flips between down and connecting from now on)
        after_stale = seen[seen.index((STALE, "silent")) :]
        assert (DOWN, "unreachable") in after_stale, seen
        # Its probe saw the channel end and exited by itself.
        await until(lambda: gone(old_probe), 60, f"the remote probe {old_probe} to exit")

        # While gpu-c is down (and retried in the background), the others keep streaming and keys
        # are handled: each moves the fleet table's cursor, over gpu-a's GPUs. (How long a key takes
        # is bench/flood.py's business: Pilot's press() waits for the whole process to go idle, so
        # timing it measures the machine's load, not the key.)
        seq_a, seq_b = a.sample.seq, b.sample.seq
        table = app._main.fleet_table
        table.focus()
        table.move_cursor(row=0)
        await pilot.pause()
        first = table.cursor_key
        rows = []
        for key in ["j"] * 3 + ["k"] * 3:
            await pilot.press(key)
            rows.append(table.cursor_row)
            await pilot.pause(0.15)
        assert rows == [1, 2, 3, 2, 1, 0] and table.cursor_key == first, rows
        await until(lambda: a.sample.seq >= seq_a + 3 and b.sample.seq >= seq_b + 3, 60, "a and b streaming")
        assert a.status == LIVE and b.status == LIVE
        assert rendered(app, "gpu-a") not in ("stale", "down") and rendered(app, "gpu-b") not in (
            "stale",
            "down",
        )
        assert c.status in (DOWN, "connecting") and c.connects == 1

        # sshd-2 comes back on the same port: gpu-c is live again, nobody pressed anything.
        server.start()
        await shown("gpu-c", None, 60)
        assert c.status == LIVE and c.connects == 2 and "3 live" in status_line(app)
        seq_c = c.sample.seq
        await until(lambda: c.sample.seq >= seq_c + 2, 60, "gpu-c streaming again")
    statuses = [status for status, _ in seen]
    assert statuses.index(STALE) < statuses.index(DOWN) < len(statuses) - 1 - statuses[::-1].index(LIVE)
    assert statuses[-1] == LIVE


# ------------------------------------------------------------------------- a read-only probe


async def test_a_read_only_remote_probe_refuses_a_plan_sent_through_the_fleet(cluster):
    # The CLI and the app refuse before sending (tests/cli/test_ssh.py); a plan sent anyway, through
    # the fleet and SSH, is refused by the remote probe itself, and nothing is signalled.
    fleet = ssh_fleet(cluster, [sim("gpu-c", "demo", read_only=True)], interval=1.0)
    view = fleet.view("gpu-c")
    fleet.start()
    try:
        await fleet.wait_first_samples(60)
        assert view.facts is not None and view.facts.read_only and not view.can_kill
        user = next(p for p in view.sample.processes if p.kind == "user")
        target = {"pid": user.pid, "start_time": user.start_time, "reason": "test", "gpus": list(user.gpus)}
        plan = {"targets": [target], "gpus": list(user.gpus), "term_timeout": 1.0, "verify_timeout": 1.0}
        events = [e async for e in fleet.execute("gpu-c", plan)]
        assert [(e.stage, e.result) for e in events] == [("done", "refused")]
        assert events[0].data == {"ok": False, "error": "read-only"}
        assert not gone(user.pid)  # still running: nothing was signalled
    finally:
        await fleet.stop()

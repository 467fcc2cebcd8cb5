"""Connections that do not storm (gputui/transport/dial.py): the handshake gates on their own, then
against a real loopback sshd whose MaxStartups drops what comes too fast, then a fleet of SSH hosts
that shows each host queued while it waits for a slot."""

from __future__ import annotations

import asyncio
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from gputui.config.file import HostSpec
from gputui.fleet.fleet import Fleet
from gputui.fleet.session import LIVE, FleetEvent, StatusChanged
from gputui.transport import dial
from gputui.transport.dial import BACKING_OFF, CONNECTING, QUEUED, Dialer, Dropped, Gate
from tests.support.pilot import wait_for
from tests.support.sshcluster import NO_BASHRC, SshCluster, running_cluster
from tests.support.sshd import SshEnv, SshServer

# -- the gate on its own -------------------------------------------------------------------------


async def test_a_gate_lets_no_more_than_its_window_in_at_once() -> None:
    gate = Gate(3)
    inside = peak = 0

    async def one() -> None:
        nonlocal inside, peak
        taken = await gate.acquire()
        inside += 1
        peak = max(peak, inside)
        await asyncio.sleep(0.01)
        inside -= 1
        gate.release(taken, ok=True)

    await asyncio.gather(*(one() for _ in range(20)))
    assert peak == 3 and gate.active == 0 and not gate.waiting


async def test_drops_halve_the_window_once_a_round_and_successes_widen_it() -> None:
    gate = Gate(8)
    taken = [await gate.acquire() for _ in range(8)]
    for t in taken[:4]:  # four drops of one round: one halving
        gate.release(t, dropped=True)
    assert gate.window == 4.0
    for t in taken[4:]:
        gate.release(t, ok=True)
    assert gate.window == 6.0  # four successes, a half each
    again = await gate.acquire()
    gate.release(again, dropped=True)  # a handshake begun after the halving: halves again
    assert gate.window == 3.0
    for _ in range(20):
        gate.release(await gate.acquire(), ok=True)
    assert gate.window == 8.0  # never past its ceiling


async def test_a_waiter_cancelled_as_it_gets_a_slot_passes_it_on() -> None:
    gate = Gate(1)
    first = await gate.acquire()
    second = asyncio.ensure_future(gate.acquire())
    third = asyncio.ensure_future(gate.acquire())
    await asyncio.sleep(0)
    gate.release(first)  # the slot goes to `second`...
    second.cancel()  # ...which is cancelled before it runs
    await asyncio.gather(second, return_exceptions=True)
    await asyncio.wait_for(third, 60)  # a hang, not a time: the slot is passed on at once
    assert gate.active == 1


async def test_only_dropped_handshakes_are_retried_and_each_phase_is_said() -> None:
    dialer = Dialer(per_host=2, retry_first=0.01, retry_cap=0.02, max_tries=3)
    phases: list[str] = []
    tries = 0

    async def flaky() -> str:
        nonlocal tries
        tries += 1
        if tries < 3:
            raise asyncssh.ConnectionLost("Connection lost")
        return "up"

    assert await dialer.dial("h:22", flaky, lambda p, d: phases.append(p)) == "up"
    assert phases == [CONNECTING, BACKING_OFF] * 2 + [CONNECTING]  # never queued: a slot was free
    assert (dialer.stats.handshakes, dialer.stats.dropped, dialer.stats.given_up) == (3, 2, 0)

    async def refused() -> str:
        raise ConnectionRefusedError("refused")

    with pytest.raises(ConnectionRefusedError):
        await dialer.dial("h:22", refused)
    assert dialer.stats.handshakes == 4  # tried once: a refusal is not a drop

    async def always_dropped() -> str:
        raise ConnectionResetError("reset")

    with pytest.raises(Dropped, match="dropped the handshake 3 times"):
        await dialer.dial("h:22", always_dropped)
    assert dialer.stats.given_up == 1


def test_the_open_files_limit_is_raised_toward_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        if soft > 256:
            resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        dial._fd_raised = False
        now = dial.raise_fd_limit(wanted=1024)
        assert now is not None
        assert now[0] == min(1024, hard) and resource.getrlimit(resource.RLIMIT_NOFILE)[0] == now[0]
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# -- against a real sshd -------------------------------------------------------------------------


@pytest.fixture
def tight_sshd(tmp_path: Path) -> Iterator[tuple[SshEnv, SshServer]]:
    from tests.support.sshd import have_sshd

    if not have_sshd():
        pytest.skip("OpenSSH sshd is not installed (.ci/run installs it)")
    env = SshEnv(tmp_path / "ssh")
    try:
        # From 3 unauthenticated connections at once, 30 % of new ones dropped; all from 10.
        server = env.add("tight", extra_config=("MaxStartups 3:30:10",))
        yield env, server
    finally:
        env.close()


async def test_40_handshakes_to_one_tight_sshd_all_connect_none_lost(
    tight_sshd: tuple[SshEnv, SshServer],
) -> None:
    env, server = tight_sshd
    dialer = Dialer()  # the defaults: 8 at once to one destination
    destination = f"127.0.0.1:{server.port}"
    tries: list[int] = []

    async def one() -> asyncssh.SSHClientConnection:
        count = 0

        def connect() -> asyncssh.SSHClientConnection:
            nonlocal count
            count += 1
            return asyncssh.connect(  # type: ignore[return-value]
                "127.0.0.1",
                server.port,
                known_hosts=str(env.known_hosts),
                client_keys=[str(server.user_key)],
                agent_path=None,
                config=[],
                connect_timeout=30,
                login_timeout=30,
            )

        conn = await dialer.dial(destination, connect)
        tries.append(count)
        return conn

    conns = await asyncio.gather(*(one() for _ in range(40)))
    try:
        assert len(conns) == 40 and dialer.stats.given_up == 0
        assert dialer.stats.peak_by_destination[destination] <= dial.PER_HOST
        assert max(tries) <= dial.MAX_TRIES
        assert dialer.stats.handshakes == 40 + dialer.stats.dropped  # every retry was a drop
    finally:
        for conn in conns:
            conn.close()
        await asyncio.gather(*(c.wait_closed() for c in conns), return_exceptions=True)


# -- a fleet -------------------------------------------------------------------------------------

HOSTS = [f"node{i:02d}" for i in range(12)]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SshCluster]:
    yield from running_cluster(
        tmp_path / "cluster", {"sshd-1": HOSTS}, sshd_config=(NO_BASHRC, "MaxStartups 3:30:10")
    )


async def test_a_fleet_shows_hosts_queued_then_every_one_live(cluster: SshCluster) -> None:
    dialer = Dialer(per_host=2)  # two handshakes at once: ten of the twelve hosts must wait
    fleet = Fleet()
    for name in HOSTS:
        spec = HostSpec(name=name, address=name, reader="sim", sim_scenario="empty")
        fleet.add(name, lambda spec=spec: cluster.link(spec, 0.5, connect_timeout=30.0), interval=0.5)
    seen: dict[str, list[str | None]] = {name: [] for name in HOSTS}

    def listen(e: FleetEvent) -> None:
        view = e.view
        if isinstance(e, StatusChanged) and (not seen[view.name] or seen[view.name][-1] != view.phase):
            seen[view.name].append(view.phase)

    fleet.listen(listen)
    dial.use(dialer)
    fleet.start()
    try:
        deadline = time.monotonic() + 90
        while not all(v.status == LIVE for v in fleet.hosts):
            assert time.monotonic() < deadline, [(v.name, v.status, v.phase, v.detail) for v in fleet.hosts]
            await asyncio.sleep(0.05)
        assert sum(QUEUED in phases for phases in seen.values()) >= len(HOSTS) - 2
        assert max(dialer.stats.peak_by_destination.values()) <= 2
        assert all(v.phase is None for v in fleet.hosts)  # live: no phase left over
        assert all(v.connects == 1 for v in fleet.hosts)  # none lost and connected again
    finally:
        await fleet.stop()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[SshCluster]:
    yield from running_cluster(tmp_path / "pair", {"sshd-1": ["left", "right"]}, sshd_config=(NO_BASHRC,))


async def test_the_host_list_says_queued_while_a_host_waits_for_a_slot(pair: SshCluster) -> None:
    """The test holds the server's only handshake slot: both hosts are drawn `queued` (the status
    line says so too), then live once it lets go."""
    from gputui.ui import make_app

    dialer = dial.use(Dialer(per_host=1))
    server = pair.server_of["left"]
    gate = dialer.gate(f"127.0.0.1:{server.port}")
    held = await gate.acquire()
    fleet = Fleet()
    for name in ("left", "right"):
        spec = HostSpec(name=name, address=name, reader="sim", sim_scenario="empty")
        fleet.add(name, lambda spec=spec: pair.link(spec, 0.5, connect_timeout=30.0), interval=0.5)
    app = make_app(fleet, interval=0.5)
    async with app.run_test(headless=True, size=(160, 50)) as pilot:
        main = app._main
        assert main is not None

        async def drawn(want: set[str], timeout: float) -> None:
            deadline = time.monotonic() + timeout
            while True:
                rows = main.host_list.rows_data()
                words = {h: rows[h]["age"].plain if h in rows else "-" for h in ("left", "right")}
                if all(w in want for w in words.values()):
                    return
                assert time.monotonic() < deadline, words
                await pilot.pause(0.02)

        await drawn({"queued"}, 30)
        assert fleet.view("left").phase == QUEUED
        assert "waiting for a handshake" in (fleet.view("left").phase_detail or "")
        main.host_list.move_cursor(row=main.host_list.get_row_index("left"))
        # The host chosen, then the status line redrawn for it.
        await wait_for(pilot, lambda: "queued…" in main.status_line.render().plain)
        gate.release(held)
        deadline = time.monotonic() + 60
        while not all(v.status == LIVE for v in fleet.hosts):
            assert time.monotonic() < deadline, [(v.name, v.status, v.phase) for v in fleet.hosts]
            await pilot.pause(0.05)
        assert all(v.phase is None for v in fleet.hosts)

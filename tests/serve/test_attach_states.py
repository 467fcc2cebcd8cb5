"""What a terminal attached to a hub shows as the hub's hosts change state (gputui/transport/hub.py): a
real hub (the serve package in this test's loop, or `gputui serve` in a process of its own) read by
an attached fleet or dashboard.

A host stale at the hub is stale in the viewer with the hub's reason, and live again with it; a host
down at the hub comes back when the hub's does; a hub that restarts takes the viewer's hosts down
and back on their own; a viewer that fell behind (`reset`) holds what the hub holds; signals and GPU
resets are refused with words that say where to run them.

The hub's host `gpu-p` is a puppet: the demo's recorded samples of demo-b, which the test pauses
(the hub finds it silent: stale) or cuts (its link fails and every new one too: down).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gputui import api
from gputui.config.file import HostSpec
from gputui.fleet.fleet import Fleet
from gputui.fleet.session import DOWN, LIVE, STALE, FleetEvent, StatusChanged
from gputui.recording.player import ReplayLink
from gputui.serve.app import Settings, make_app
from gputui.serve.stream import Hub, Log
from gputui.transport import hub as hubs
from gputui.transport.base import TransportError
from gputui.transport.local import LocalLink
from gputui.views.report import as_json
from tests.support.apps import recording

pytestmark = pytest.mark.timeout(240)  # real sim probes and hubs on a busy machine

INTERVAL = 0.3  # the viewer's, and the sim host's at the hub
PUPPET_INTERVAL = 2.0  # the puppet's at the hub: silent 5 s, it is stale; 6 s more, down
CUT = "puppet: the cable was pulled"


@dataclass
class Switch:
    """What the puppet host does now: samples flow, stop (`paused`), or it cannot be reached (`cut`)."""

    paused: bool = False
    cut: bool = False
    links: list[Puppet] = field(default_factory=list)


class Puppet(ReplayLink):
    """demo-b's recording, looped a sample every 0.2 s, under the test's `Switch`."""

    def __init__(self, switch: Switch) -> None:
        super().__init__(recording("demo-b"), loop=True, rate=5.0)
        self.switch = switch
        switch.links.append(self)

    async def open(self) -> None:
        if self.switch.cut:
            raise TransportError("unreachable", CUT)
        await super().open()

    async def recv(self) -> dict[str, Any] | None:
        while self.switch.paused or self.switch.cut:
            if self.switch.cut:
                self.failure = TransportError("unreachable", CUT)
                return None
            await asyncio.sleep(0.05)
        return await super().recv()


@contextlib.asynccontextmanager
async def hub_over(fleet: Fleet, log: Log | None = None) -> AsyncIterator[tuple[str, Hub]]:
    """A hub over `fleet` on a free loopback port until the block ends: its URL and its Hub."""
    hub = Hub(fleet, INTERVAL, 60.0, log=log)
    runner = web.AppRunner(make_app(Settings(), hub), access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    fleet.start()
    hub.start()
    try:
        await fleet.wait_first_samples(60)
        yield f"http://{host}:{port}", hub
    finally:
        await runner.cleanup()
        await hub.stop()
        await fleet.stop()


def puppet_fleet(switch: Switch) -> Fleet:
    """The hub's fleet: demo-a (a real sim probe) and gpu-p (the puppet)."""
    fleet = Fleet()
    spec = HostSpec(name="demo-a", reader="sim", sim_scenario="demo", sim_variant=0, sim_seed=1)
    fleet.add("demo-a", lambda: LocalLink(spec, interval=INTERVAL), read_only=True, interval=INTERVAL)
    fleet.add("gpu-p", lambda: Puppet(switch), read_only=True, interval=PUPPET_INTERVAL)
    return fleet


def attached(url: str, names: list[str]) -> Fleet:
    """The fleet `gputui --hub URL` builds on the hub's hosts."""
    return api.fleet([HostSpec(name=n, address=n, feed=f"hub:{url}") for n in names], INTERVAL)


async def until(check: Any, timeout: float = 60.0, what: str = "") -> None:
    """Until `check()` is true; fails (saying `what`) when it is not within `timeout` seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not check():
        if loop.time() > end:
            pytest.fail(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.05)


class Statuses:
    """Every status each host of a fleet was shown in, in order."""

    def __init__(self, fleet: Fleet) -> None:
        self.seen: dict[str, list[str]] = {v.name: [v.shown_status] for v in fleet.hosts}
        fleet.listen(self.on_fleet)

    def on_fleet(self, event: FleetEvent) -> None:
        if isinstance(event, StatusChanged):
            seen = self.seen[event.view.name]
            if seen[-1] != event.view.shown_status:
                seen.append(event.view.shown_status)


async def test_stale_at_the_hub_is_stale_here_with_its_reason() -> None:
    switch = Switch()
    async with hub_over(puppet_fleet(switch)) as (url, hub):
        fleet = attached(url, ["demo-a", "gpu-p"])
        fleet.start()
        try:
            await until(lambda: all(v.status == LIVE for v in fleet.hosts), what="both hosts live")
            statuses = Statuses(fleet)
            there, here = hub.fleet.view("gpu-p"), fleet.view("gpu-p")
            for _ in range(2):  # stale, live, and stale and live again
                switch.paused = True
                await until(lambda: there.status == STALE, what="gpu-p stale at the hub")
                await until(lambda: here.status == STALE, what="gpu-p stale in the viewer")
                assert (here.reason, here.detail) == (there.reason, there.detail)
                assert here.reason == "silent" and here.detail and "no sample" in here.detail
                switch.paused = False
                await until(lambda: there.status == LIVE, what="gpu-p live at the hub")
                await until(lambda: here.status == LIVE, what="gpu-p live again in the viewer")
                assert here.reason is None and here.detail is None
            # Nothing else went stale (nor down) meanwhile; the puppet's link was never dropped.
            assert statuses.seen["demo-a"] == [LIVE], statuses.seen
            assert statuses.seen["gpu-p"] == [LIVE, STALE, LIVE, STALE, LIVE], statuses.seen
            assert here.connects == 1
        finally:
            await fleet.stop()


async def test_down_at_the_hub_comes_back_when_the_hubs_does() -> None:
    switch = Switch()
    async with hub_over(puppet_fleet(switch)) as (url, hub):
        fleet = attached(url, ["demo-a", "gpu-p"])
        fleet.start()
        try:
            await until(lambda: all(v.status == LIVE for v in fleet.hosts), what="both hosts live")
            statuses = Statuses(fleet)
            there, here = hub.fleet.view("gpu-p"), fleet.view("gpu-p")
            for _ in range(2):
                switch.cut = True
                await until(lambda: there.shown_status == DOWN, what="gpu-p down at the hub")
                await until(lambda: here.shown_status == DOWN, what="gpu-p down in the viewer")
                # Down here as long as it is down there, with the hub's reason and its words.
                await asyncio.sleep(PUPPET_INTERVAL)
                assert here.shown_status == DOWN and here.down_why == "unreachable"
                assert here.phase == hubs.WAITING and CUT in (here.phase_detail or ""), here.phase_detail
                connects = here.connects
                switch.cut = False
                await until(lambda: there.status == LIVE, what="gpu-p live at the hub again")
                await until(lambda: here.status == LIVE, what="gpu-p live in the viewer again")
                assert here.connects == connects + 1 and here.sample is not None
                # A whole sample: what the hub holds, not a delta of something from before.
                assert here.raw_sample is not None and there.raw_sample is not None
                await until(
                    lambda: _same_sample(hub.fleet, fleet, "gpu-p"), what="the viewer's sample the hub's"
                )
            assert statuses.seen["demo-a"] == [LIVE], statuses.seen
        finally:
            await fleet.stop()


def _same_sample(hub: Fleet, viewer: Fleet, name: str) -> bool:
    there, here = hub.view(name).raw_sample, viewer.view(name).raw_sample
    return there is not None and here is not None and there.get("seq") == here.get("seq")


def _hosts(document: dict[str, Any]) -> dict[str, Any]:
    """The snapshot document's hosts, each its GPUs and processes (what a viewer must hold right).
    Since when a process idles is each fleet's own watch over the samples it saw (a viewer reset
    skipped some): not compared."""
    out: dict[str, Any] = {}
    for host in document["hosts"]:
        procs = [{k: v for k, v in p.items() if not k.startswith("idle_")} for p in host.get("processes")]
        out[host["name"]] = {"status": host["status"], "gpus": host.get("gpus"), "procs": procs}
    return out


async def test_a_reset_viewer_holds_what_the_hub_holds() -> None:
    """A hub whose log keeps two frames: every viewer falls behind and is reset, again and again, while
    hosts replay their recordings as fast as they are read; once they hold their last state the
    viewer's snapshot is the hub's /api/v1/snapshot, host for host."""
    fleet = Fleet()
    for name in ("demo-a", "demo-b"):
        fleet.add(name, lambda n=name: ReplayLink(recording(n), rate=40.0), interval=60.0)
    async with hub_over(fleet, log=Log(frames=2)) as (url, hub):
        viewer = attached(url, ["demo-a", "demo-b"])
        viewer.start()
        try:
            await until(lambda: hub.resets > 3, what="the viewer reset")
            last = {
                n: max(r["seq"] for r in recording(n) if r["type"] == "sample") for n in ("demo-a", "demo-b")
            }
            await until(
                lambda: all(hub.fleet.view(n).raw_sample["seq"] == last[n] for n in last),  # type: ignore[index]
                what="the hub's hosts at their last sample",
            )
            async with aiohttp.ClientSession() as session, session.get(url + "/api/v1/snapshot") as answer:
                document = await answer.json()
            await until(
                lambda: all(_same_sample(hub.fleet, viewer, n) for n in last), what="the viewer caught up"
            )
            assert _hosts(as_json(viewer.hosts, idle_after=60.0)) == _hosts(document)
            for name in last:  # one point a sample: a sample the hub sends again is not one more
                times = viewer.view(name).history[0].times
                assert all(b - a > hubs.SAME_TIME for a, b in itertools.pairwise(times)), name
        finally:
            await viewer.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _serve(port: int) -> asyncio.subprocess.Process:
    """`gputui serve --demo` on `port` in a process of its own (this test's), once it is ready."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gputui", "serve", "--demo", "--listen", f"127.0.0.1:{port}",
        "--interval", str(INTERVAL), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with aiohttp.ClientSession() as session:
        for _ in range(600):
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(f"http://127.0.0.1:{port}/-/ready") as answer:
                    if answer.status == 200:
                        return process
            await asyncio.sleep(0.1)
    process.kill()
    await process.wait()
    pytest.fail("the hub did not get ready")


async def _stop(process: asyncio.subprocess.Process) -> str:
    """End a hub this test started (SIGTERM, as systemd does); its stderr."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(process.communicate(), 60)
    return err.decode()


async def test_a_hub_that_restarts_takes_the_viewers_hosts_down_and_back() -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    problems: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: problems.append(context))
    hub = await _serve(port)
    fleet: Fleet | None = None
    try:
        names = (await hubs.read_hub(url)).hosts
        fleet = attached(url, names)
        fleet.start()
        await until(lambda: all(v.status == LIVE for v in fleet.hosts), what="every host live")
        assert "Traceback" not in await _stop(hub)
        await until(lambda: all(v.shown_status == DOWN for v in fleet.hosts), what="every host down")
        for view in fleet.hosts:  # the reason says it is the hub that is gone
            assert view.last_down in ("closed", "unreachable"), view
            assert url in (view.detail or view.phase_detail or ""), view
        hub = await _serve(port)
        await until(lambda: all(v.status == LIVE for v in fleet.hosts), what="every host live again")
        assert [v.name for v in fleet.hosts] == names and len(set(names)) == len(names)
        assert all(v.connects == 2 for v in fleet.hosts), [v.connects for v in fleet.hosts]
        assert not problems, problems
    finally:
        if fleet is not None:
            await fleet.stop()
        assert "Traceback" not in await _stop(hub)

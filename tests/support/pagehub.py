"""A real hub for the web page's tests: demo-a's recording replayed for as many hosts as a test
names, served by the aiohttp app on 127.0.0.1 from a thread of its own, and the patient waits the
page's tests share."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from gputui import api
from gputui.fleet.fleet import Fleet
from gputui.serve.app import Settings, make_app
from gputui.serve.stream import Hub as FleetHub
from tests.support.waiting import wait_until

PATIENCE = 90.0  # seconds: a busy 2-core CI machine; nothing here asserts a duration


def wait_for(what: Callable[[], Any], message: str) -> Any:
    wait_until(what, PATIENCE, step=0.2)
    got = what()
    assert got, message
    return got


DEMO_A = Path(__file__).resolve().parents[1] / "fixtures" / "demo-a.jsonl"


def demo_records() -> list[dict[str, Any]]:
    """demo-a's recorded hello and samples (whole: the recording's first sample, then the rest)."""
    return [r for r in api.load_recording(DEMO_A) if r["type"] in ("hello", "sample")]


@contextmanager
def replay_hub(hosts: dict[str, list[dict[str, Any]]], rate: float = 2.0) -> Iterator[str]:
    """A real hub (aiohttp app, Hub, Fleet) over ReplayLinks playing `hosts`' records over and over
    at `rate` records a second, on 127.0.0.1 and a free port, its loop in a thread; its URL."""
    ready: list[str] = []
    started = threading.Event()
    stop: list[asyncio.Event] = []

    async def serve() -> None:
        fleet = Fleet()
        for name, records in hosts.items():
            fleet.add(name, lambda r=records: api.ReplayLink(r, loop=True, rate=rate), interval=1.0)
        hub = FleetHub(fleet, 1.0, 60.0)
        runner = web.AppRunner(make_app(Settings(connections=64), hub), access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        fleet.start()
        hub.start()
        stop.append(asyncio.Event())
        host, port = runner.addresses[0][:2]
        ready.append(f"http://{host}:{port}")
        started.set()
        try:
            await stop[0].wait()
        finally:
            await runner.cleanup()
            await hub.stop()
            await fleet.stop()

    def run() -> None:
        try:
            loop.run_until_complete(serve())
        finally:
            started.set()  # a hub that failed to start is not waited for

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        assert started.wait(PATIENCE) and ready, "the hub did not start"
        yield ready[0]
    finally:
        if stop:
            loop.call_soon_threadsafe(stop[0].set)
        thread.join(PATIENCE)
        loop.close()

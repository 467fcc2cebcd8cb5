"""A hub (gputui.serve) over a fleet the test built, served by aiohttp on a free loopback port of this
loop until the block ends; then the server, the hub and the fleet (with its probes) are stopped."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from gputui.fleet.fleet import Fleet
from gputui.serve.actions import add_routes as add_action_routes
from gputui.serve.app import Settings, make_app
from gputui.serve.listen import HubRunner
from gputui.serve.stream import Hub, Log


@contextlib.asynccontextmanager
async def hub_on_loopback(
    fleet: Fleet,
    interval: float,
    settings: Settings | None = None,
    log: Log | None = None,
    actions_log: Path | None = None,
) -> AsyncIterator[tuple[str, Hub]]:
    """(its http:// URL, the hub). `actions_log`: POST /api/v1/actions too, its audit log there."""
    hub = Hub(fleet, interval, 60.0, log)
    app = make_app(settings or Settings(), hub)
    if actions_log is not None:
        add_action_routes(app, actions_log)
    runner = HubRunner(app, 0.5)  # as `gputui serve` runs it: its bounds on clients
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    fleet.start()
    hub.start()
    try:
        yield f"http://{host}:{port}", hub
    finally:
        await runner.cleanup()
        await hub.stop()
        await fleet.stop()

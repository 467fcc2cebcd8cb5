"""128 hosts at 1 Hz: the app must stay below half a core (issue 5).

Every host replays a recording at one sample a second, through a JSON round trip so the cost of
decoding is paid as with a real transport. The app runs headless (compositing included, no terminal).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from gputui.fleet import Fleet
from gputui.transport.replay import ReplayLink
from gputui.ui import make_app

from .conftest import recording, wait_for

HOSTS = 128
BUDGET = 0.5  # of one core
MEASURE = 5.0  # seconds


class JsonReplay(ReplayLink):
    async def recv(self) -> dict[str, Any] | None:
        record = await super().recv()
        return None if record is None else json.loads(json.dumps(record))


@pytest.mark.parametrize("view", ["fleet", "host"])
async def test_128_hosts_at_1_hz_stay_below_half_a_core(view: str) -> None:
    fleet = Fleet()
    recordings = [list(recording("demo-a")), list(recording("demo-b"))]
    for i in range(HOSTS):
        records = recordings[i % 2]
        fleet.add(f"gpu-{i:03d}", lambda r=records: JsonReplay(r, loop=True, rate=1.0), interval=1.0)
    app = make_app(fleet, interval=1.0)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for(pilot, lambda: all(v.sample is not None for v in fleet.hosts), 30)
        main = app._main
        assert main is not None
        if view == "host":
            main.select_host("gpu-005")
        await pilot.pause(1.5)
        cpu, wall = time.process_time(), time.monotonic()
        await asyncio.sleep(MEASURE)
        share = (time.process_time() - cpu) / (time.monotonic() - wall)
        if view == "fleet":
            assert main.fleet_table.row_count == HOSTS * 4
        assert share < BUDGET, f"{share:.0%} of a core"

"""Snapshot tests of the fleet view at size (issue 21): 1,024 generated hosts (tests/support/fleet1024.py)
at 80x24 and 200x50, the users view, an idle holder in its host's process table, and a filter that
cannot be read. A frozen clock; nothing depends on timing (the scenes wait for the data).

After a deliberate change to the look: `pytest tests/ui/test_fleet_snapshots.py --snapshot-update`,
then look at the SVGs (rsvg-convert makes PNGs) before committing them.
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from gputui.ui import GpuTuiApp, make_app
from gputui.ui.screens.users import UsersScreen
from tests.support.apps import FROZEN, OPERATOR, scratch_log
from tests.support.fleet1024 import SLOW, drawn, fleet_1024, name, played
from tests.support.pilot import redrawn, wait_for


def _app(hosts: int = 1024) -> GpuTuiApp:
    return make_app(
        fleet_1024(hosts), interval=3600.0, clock=lambda: FROZEN, log_path=scratch_log(), operator=OPERATOR
    )


async def _fleet(pilot: Pilot[Any]) -> None:
    app: GpuTuiApp = pilot.app  # type: ignore[assignment]
    await wait_for(pilot, lambda: played(app.fleet), 300)
    await drawn(pilot)


async def _users(pilot: Pilot[Any]) -> None:
    await _fleet(pilot)
    await pilot.press("U")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, UsersScreen))
    await redrawn(pilot)


async def _idle_host(pilot: Pilot[Any]) -> None:
    await _fleet(pilot)
    app: GpuTuiApp = pilot.app  # type: ignore[assignment]
    assert app._main is not None
    app._main.select_host(name(17))  # its GPU 5: a notebook kernel at 0 % SM for 15 minutes
    await redrawn(pilot)
    await pilot.press("down", "down", "down", "down", "down", "down")
    await redrawn(pilot)


async def _bad_filter(pilot: Pilot[Any]) -> None:
    await _fleet(pilot)
    await pilot.press("slash", *"state:idle-held")
    await redrawn(pilot)
    await pilot.press("space", *"mem>4X")  # on the way to mem>4G: the idle holder stays listed
    await redrawn(pilot)


@pytest.mark.timeout(SLOW)
@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_a_thousand_hosts(snap_compare: Any, size: tuple[int, int]) -> None:
    """Problems first (down, ECC, ghosts, orphaned memory, idle holders, throttling, a GPU and a
    driver that differ), then sixteen racks of healthy hosts, one line each."""
    assert snap_compare(_app(), terminal_size=size, run_before=_fleet)


@pytest.mark.timeout(SLOW)
@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_users_of_a_thousand_hosts(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(_app(), terminal_size=size, run_before=_users)


def test_an_idle_holder_in_its_hosts_process_table(snap_compare: Any) -> None:
    assert snap_compare(_app(130), terminal_size=(120, 36), run_before=_idle_host)


def test_a_filter_that_cannot_be_read(snap_compare: Any) -> None:
    assert snap_compare(_app(130), terminal_size=(120, 36), run_before=_bad_filter)

"""Jobs in the dashboard (issue 18), on the real thing: a sim probe as a real subprocess through the
local transport, its GPU memory owned by real processes.

The "jobs" scenario: a torchrun-like launcher (no GPU) with two CUDA ranks, a supervisor that
restarts its worker, two single-process jobs of one user. The "neighbour" scenario: memory used by
processes outside the probe's PID namespace (another guest's job, seen from inside an LXC guest).
Every process signalled here was started by the test's own sim probe, which ends them all when the
app stops the fleet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gputui.config import HostSpec
from gputui.fleet import Fleet
from gputui.model import MemoryAccount
from gputui.transport.local import LocalLink
from gputui.ui import GpuTuiApp, make_app
from gputui.ui.screens.gpu_detail import PART_LABEL, PART_STYLE, GpuDetailScreen
from gputui.ui.screens.main import MainScreen

from .conftest import redrawn, screen_text, wait_for

HOST = "node"
INTERVAL = 0.2


def sim_app(tmp_path: Path, scenario: str, **kwargs: Any) -> GpuTuiApp:
    fleet = Fleet()
    spec = HostSpec(name=HOST, reader="sim", sim_scenario=scenario, sim_seed=3)
    fleet.add(spec.name, lambda: LocalLink(spec, interval=INTERVAL), interval=INTERVAL)
    kwargs.setdefault("operator", "root")
    return make_app(fleet, interval=INTERVAL, log_path=tmp_path / "actions.jsonl", **kwargs)


def main_of(app: GpuTuiApp) -> MainScreen:
    assert app._main is not None
    return app._main


def words(app: GpuTuiApp) -> str:
    return " ".join(screen_text(app).split())


async def ready(pilot: Any, jobs: int = 0) -> MainScreen:
    """The host's dashboard once a sample with `jobs` jobs at least has been drawn."""
    app: GpuTuiApp = pilot.app
    view = app.fleet.view(HOST)
    await wait_for(
        pilot,
        lambda: view.sample is not None and bool(view.sample.gpus) and len(view.sample.jobs) >= jobs,
        60,
    )
    await redrawn(pilot)
    return main_of(app)


# -- neighbour: memory used outside this container -------------------------------------------------


async def test_neighbour_gpu_table_and_gpu_view_say_outside_never_orphaned(tmp_path: Path) -> None:
    app = sim_app(tmp_path, "neighbour")
    async with app.run_test(size=(160, 40)) as pilot:
        main = await ready(pilot)
        text = words(app)
        assert "◌ 4.6 GiB outside" in text  # GPU 1: only a neighbour's memory
        assert "orphaned" not in text
        main.gpu_table.focus()
        await pilot.press("down", "down", "i")  # "all", GPU 0, GPU 1
        await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
        await pilot.pause(0.3)
        screen = app.screen
        assert isinstance(screen, GpuDetailScreen) and screen.gpu == 1
        text = words(app)
        assert "outside this container 4.6 GiB" in text  # the bar's legend
        assert "! 4.6 GiB used outside this container: another container or the host" in text
        assert "orphaned" not in text and "reset" not in text.casefold()  # no reset offered from inside
        await pilot.press("right_square_bracket")  # GPU 2: a job here and a neighbour's
        await pilot.pause(0.3)
        assert screen.gpu == 2 and "outside this container 30.0 GiB" in words(app)


def test_every_part_of_a_memory_account_has_a_style_and_a_label() -> None:
    """The GPU view draws each part of the account: a part added to the model (as `outside` was)
    must not open the view onto a KeyError."""
    for part in ("baseline", "processes", *MemoryAccount.UNACCOUNTED):
        assert part in PART_STYLE and part in PART_LABEL, part

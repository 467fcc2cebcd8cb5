"""Fixed screens for the snapshot tests and scripts/screenshots: the same app, data and keys.

Each scene is an app built from the replayed recordings with a frozen clock, a terminal size and a
`run_before` that drives the app into the state to capture. Nothing here depends on timing: the
scenes wait for the data, not for a duration.

The snapshot tests build them with the fixture's hostile process (a name that is Rich markup, a
command line with ESC and BEL bytes: they must render literally); scripts/screenshots, for the
README, with `hostile=False`: the demo as a user sees it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from textual.pilot import Pilot

from gputui.fleet import Fleet
from gputui.transport.replay import ReplayLink
from gputui.ui import GpuTuiApp, make_app
from gputui.ui.screens.gpu_detail import GpuDetailScreen
from gputui.ui.screens.plan import PlanScreen

from .conftest import FROZEN, QUIET, build_app, recording, redrawn, settle

THEMES = ("gputui-dark", "gputui-light", "gputui-contrast")


HOSTILE_PID = 66666  # tests/fixtures/record.py adds it to demo-a's last samples


class Build(Protocol):
    def __call__(self, theme: str, hostile: bool = True) -> GpuTuiApp: ...


@dataclass(frozen=True)
class Scene:
    name: str
    size: tuple[int, int]
    build: Build  # theme -> app (hostile=False: without the fixture's hostile process)
    run_before: Callable[[Pilot[Any]], Awaitable[None]]


def demo_records(name: str) -> list[dict[str, Any]]:
    """The recording of `name` as the demo shows it: without the fixture's hostile process."""
    records = []
    for record in recording(name):
        if record["type"] == "sample":
            processes = [p for p in record["processes"] if p["pid"] != HOSTILE_PID]
            record = dict(record, processes=processes)
        records.append(record)
    return records


def _records(hostile: bool) -> dict[str, list[dict[str, Any]]] | None:
    return None if hostile else {name: demo_records(name) for name in ("demo-a", "demo-b")}


def _demo(theme: str, hostile: bool = True) -> GpuTuiApp:
    return build_app(theme=theme, records=_records(hostile))


async def _fleet(pilot: Pilot[Any]) -> None:
    await settle(pilot)


async def _host(pilot: Pilot[Any]) -> None:
    await settle(pilot)
    await pilot.press("right_square_bracket")  # the next host after "All hosts": demo-a
    await redrawn(pilot)


async def _ghost_gpu(pilot: Pilot[Any]) -> None:
    await _host(pilot)
    await pilot.press("down", "down", "down")  # GPU 2: a user, a ghost and its hidden holder
    await redrawn(pilot)


async def _help(pilot: Pilot[Any]) -> None:
    await _host(pilot)
    await pilot.press("question_mark")
    await pilot.pause()


async def _filter(pilot: Pilot[Any]) -> None:
    await _host(pilot)
    await pilot.press("tab", "slash", *"serve")
    await redrawn(pilot)


def _demo_plans(theme: str, hostile: bool = True) -> GpuTuiApp:
    app = build_app(theme=theme, records=_records(hostile))
    app.fresh_timeout = 0  # plan on the replayed sample: a recording answers no full-scan request
    return app


async def _dialog(pilot: Pilot[Any]) -> None:
    app: GpuTuiApp = pilot.app  # type: ignore[assignment]
    while not isinstance(app.screen, PlanScreen):
        await pilot.pause(0.02)
    body = app.screen.query_one("#plan-body")
    while body.styles.max_height is None:  # fitted to the terminal after its first layout
        await pilot.pause(0.02)
    await pilot.pause()


async def _plan_gpu(pilot: Pilot[Any]) -> None:
    await _ghost_gpu(pilot)
    await pilot.press("f")  # free GPU 2: its user, the ghost's hidden holder; the ghost left alone
    await _dialog(pilot)


async def _plan_host(pilot: Pilot[Any]) -> None:
    await _host(pilot)
    await pilot.press("F")  # every GPU of demo-a: monitors left alone, the sweep listed apart
    await _dialog(pilot)


def _no_driver(theme: str, hostile: bool = True) -> GpuTuiApp:
    hello = dict(recording("demo-a")[0])
    hello["host"] = dict(hello["host"], hostname="workstation", driver_version=None, cuda_driver_version=None)
    hello["error"] = {"code": "no-driver", "message": "NVML Shared Library Not Found"}
    sample = dict(recording("demo-a")[1], gpus=[], processes=[])
    fleet = Fleet()
    fleet.add("workstation", lambda: ReplayLink([hello, sample]), interval=QUIET)
    return make_app(fleet, interval=QUIET, clock=lambda: FROZEN, theme=theme)


async def _no_driver_ready(pilot: Pilot[Any]) -> None:
    app: GpuTuiApp = pilot.app  # type: ignore[assignment]
    while app.fleet.view("workstation").sample is None:
        await pilot.pause(0.02)
    await redrawn(pilot)


def _preflight(theme: str, hostile: bool = True) -> GpuTuiApp:
    """Host "p" of the "preflight" sim scenario (tests/fixtures/preflight.jsonl)."""
    return build_app(("p",), theme=theme, records={"p": list(recording("preflight"))})


def _gpu_view(gpu_row: int, host: bool = False) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """Open the GPU view on the GPU table's row `gpu_row` ("all" is row 0), of the first host when
    `host` (the demo starts on "All hosts")."""

    async def run(pilot: Pilot[Any]) -> None:
        app: GpuTuiApp = pilot.app  # type: ignore[assignment]
        await (_host(pilot) if host else settle(pilot))
        assert app._main is not None
        app._main.gpu_table.focus()
        await pilot.press(*["down"] * gpu_row, "i")
        while not isinstance(app.screen, GpuDetailScreen):
            await pilot.pause(0.02)
        await pilot.pause()
        app.screen.redraw()  # at its final size
        await pilot.pause()

    return run


SCENES = {
    scene.name: scene
    for scene in (
        Scene("fleet", (120, 36), _demo, _fleet),
        Scene("main", (120, 36), _demo, _host),
        Scene("ghost", (120, 36), _demo, _ghost_gpu),
        Scene("help", (120, 36), _demo, _help),
        Scene("filter", (120, 36), _demo, _filter),
        Scene("narrow", (80, 24), _demo, _host),
        Scene("narrow-fleet", (80, 24), _demo, _fleet),
        Scene("no-driver", (100, 24), _no_driver, _no_driver_ready),
        Scene("plan", (120, 36), _demo_plans, _plan_gpu),
        Scene("plan-host", (120, 36), _demo_plans, _plan_host),
        Scene("plan-narrow", (80, 24), _demo_plans, _plan_gpu),
        Scene("preflight", (120, 36), _preflight, _fleet),
        Scene("gpu-view", (120, 40), _preflight, _gpu_view(2)),  # GPU 1: orphaned memory
        Scene("ghost-view", (120, 40), _demo, _gpu_view(3, host=True)),  # demo-a's GPU 2: a ghost
        Scene("gpu-view-narrow", (80, 24), _preflight, _gpu_view(3)),  # GPU 2: throttling, cooling
        Scene("gpu-view-wide", (200, 50), _preflight, _gpu_view(4)),  # GPU 3: persistence off, ECC
    )
}

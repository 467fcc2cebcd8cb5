"""Driving an app under Textual's pilot: waiting for data and redraws, what the screen shows, and the
steps the UI tests share (a host's dashboard ready, the plan dialog, the command palette)."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from typing import Any

from textual.command import CommandPalette
from textual.pilot import Pilot

from gputui.model import Sample
from gputui.ui import GpuTuiApp
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.plan import PlanScreen
from tests.support.apps import last_seq

# Long enough for a busy machine (a CI box shared with other runs played a demo's recording in more
# than 10 s); only a hang waits that long, and pytest's own timeout (120 s) is behind it.
WAIT = 60.0


async def wait_for(pilot: Pilot[Any], predicate: Callable[[], bool], timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {getattr(predicate, '__name__', predicate)}")
        await pilot.pause(0.02)


async def settle(pilot: Pilot[Any]) -> None:
    """Until every host has played its whole recording and the screen has drawn it."""
    app: GpuTuiApp = pilot.app  # type: ignore[assignment]

    def all_played() -> bool:
        return all(v.sample is not None and v.sample.seq >= last_seq(v.name) for v in app.fleet.hosts) or any(
            v.status == "down" for v in app.fleet.hosts
        )

    await wait_for(pilot, all_played)
    await redrawn(pilot)


async def sampled(pilot: Pilot[Any]) -> None:
    """Until every host has sent a sample and the screen has drawn it."""
    app: GpuTuiApp = pilot.app  # type: ignore[assignment]
    await wait_for(pilot, lambda: all(v.sample is not None for v in app.fleet.hosts))
    await redrawn(pilot)


async def redrawn(pilot: Pilot[Any]) -> None:
    """Until the redraw timer has drawn everything that has arrived."""
    app: GpuTuiApp = pilot.app  # type: ignore[assignment]
    await pilot.pause()  # let what was just set (a theme, a key) post its messages first
    await wait_for(pilot, lambda: not app._changed and not app._restyle)
    await asyncio.sleep(0)
    await pilot.pause()


def screen_text(app: GpuTuiApp) -> str:
    """What the terminal shows of the current screen, as plain text, one line per row."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def main_of(app: GpuTuiApp) -> MainScreen:
    assert app._main is not None
    return app._main


async def ready(pilot: Any, gpu_row: int) -> MainScreen:
    """The host's dashboard with the GPU cursor `gpu_row` rows below "all"."""
    app: GpuTuiApp = pilot.app
    view = app.fleet.view("demo-a")
    await wait_for(pilot, lambda: view.sample is not None and bool(view.sample.gpus), 60)
    await redrawn(pilot)
    main = main_of(app)
    main.gpu_table.focus()
    await pilot.press(*["down"] * gpu_row)
    await redrawn(pilot)
    return main


async def dialog(pilot: Any) -> PlanScreen:
    app: GpuTuiApp = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))
    await pilot.pause()
    assert isinstance(app.screen, PlanScreen)
    return app.screen


def dialog_text(app: GpuTuiApp) -> str:
    """The screen's words with borders and line breaks gone, so a wrapped cell reads as one."""
    return " ".join(re.sub(r"[┃│╭╮╰╯─━┏┓┗┛]", " ", screen_text(app)).split())


def log_text(main: MainScreen) -> str:
    return "\n".join(e.plain() for e in main.action_log.entries)


async def palette(pilot: Any, words: str) -> None:
    app: GpuTuiApp = pilot.app
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
    await pilot.press(*words)
    await pilot.pause(0.3)
    await pilot.press("enter")
    await wait_for(pilot, lambda: not isinstance(app.screen, CommandPalette))
    await pilot.pause()


async def procs_of(pilot: Any, host: str = "demo-a") -> MainScreen:
    """`host`'s processes (all its GPUs), the process table focused."""
    app: GpuTuiApp = pilot.app
    await settle(pilot)
    assert app._main is not None
    main = app._main
    main.select_host(host)
    main.proc_table.focus()
    await redrawn(pilot)
    return main


def sample_of(app: GpuTuiApp, host: str = "demo-a") -> Sample:
    sample = app.fleet.view(host).sample
    assert sample is not None
    return sample

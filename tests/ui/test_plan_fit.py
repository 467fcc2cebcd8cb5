"""The plan dialog in a small terminal: a plan is confirmed only while its targets are on screen.

At the smallest size the dashboard takes (60x15) the dialog once showed its title, summary, "Proves"
and "Stages" and nothing else: the PID table and the buttons were below the fold, and ctrl+k ran
the plan all the same. Now the explanation gives way first (one line each, then none), the lists
scroll to the targets, and ctrl+k (or the Kill button) is refused while no target row is in view
(scrolled away): the targets come back into view and a notice says why. Where even that cannot
show the targets with the warnings and the buttons, the dialog shows no plan, only why, until the
terminal grows; below 60x15 the one-line screen covers it and ctrl+k reaches nothing.

Every test drives the real app on the demo's recordings (tests/fixtures); a confirmed plan goes to
the replayed host's link, which records it (nothing is signalled).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from textual.widgets import Button

from gputui.kill.plan import PlanOptions, plan_for_host
from gputui.kill.plan.record import Plan
from gputui.ui import GpuTuiApp
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.plan import PlanScreen
from gputui.ui.screens.too_small import TooSmallScreen
from tests.support.apps import build_app
from tests.support.pilot import dialog, procs_of, redrawn, sample_of, screen_text, settle, wait_for

SMALL_SIZES = [(60, 15), (61, 16), (72, 15), (80, 18), (99, 15), (100, 15), (116, 16), (130, 15)]
ROW = re.compile(r"┃ +(\d+) +\S")  # a table row of the dialog: its PID first


def demo_app() -> GpuTuiApp:
    app = build_app()
    app.fresh_timeout = 0  # plan on the replayed sample: a recording answers no full-scan request
    return app


def rows_shown(app: GpuTuiApp) -> set[int]:
    """The PIDs of the dialog's table rows on screen."""
    return {int(m.group(1)) for line in screen_text(app).splitlines() if (m := ROW.search(line))}


def targets_shown(screen: PlanScreen, app: GpuTuiApp) -> set[int]:
    signalled = {t.pid for p in screen.plans for t in p.signalled}
    return rows_shown(app) & signalled


def buttons_shown(app: GpuTuiApp) -> bool:
    text = screen_text(app)
    return "Cancel" in text and re.search(r"(Stop|Free) \d+", text) is not None


async def fitted(pilot: Any) -> PlanScreen:
    """The dialog, once laid out for the terminal (it fits itself after its first layout)."""
    screen = await dialog(pilot)
    await wait_for(pilot, lambda: screen.fitted)
    await pilot.pause()
    return screen


async def open_one(pilot: Any) -> PlanScreen:
    """x on one selected process of demo-a."""
    main = await procs_of(pilot)
    main.proc_table.move_cursor(row=0)
    await pilot.press("space", "x")
    return await fitted(pilot)


async def open_host(pilot: Any) -> PlanScreen:
    """F on demo-a: every GPU, six targets, the sweep and what is left alone."""
    main = await procs_of(pilot)
    main.gpu_table.focus()
    await pilot.press("F")
    return await fitted(pilot)


def confirmed(app: GpuTuiApp) -> bool:
    """The dialog closed with the plan sent to the host (the replayed host's link records it)."""
    return isinstance(app.screen, MainScreen) and bool(app.running)


@pytest.mark.parametrize("size", SMALL_SIZES)
@pytest.mark.parametrize("opener", [open_one, open_host], ids=["one-target", "many-targets"])
async def test_the_dialog_opens_with_its_targets_and_buttons_on_screen(
    size: tuple[int, int], opener: Any
) -> None:
    app = demo_app()
    async with app.run_test(size=size) as pilot:
        screen = await opener(pilot)
        shown = targets_shown(screen, app)
        first = screen.plans[0].signalled[0].pid
        assert first in shown, f"{size}: no first target row on screen\n{screen_text(app)}"
        assert buttons_shown(app), f"{size}: buttons not on screen\n{screen_text(app)}"
        assert screen.targets_in_view()
        await pilot.press("ctrl+k")  # the targets are on screen: it runs
        await wait_for(pilot, lambda: confirmed(app))


async def test_ctrl_k_is_refused_while_the_targets_are_scrolled_away() -> None:
    app = demo_app()
    async with app.run_test(size=(60, 15)) as pilot:
        screen = await open_host(pilot)
        assert targets_shown(screen, app)
        await pilot.press(*["pagedown"] * 6)  # to the end of the lists: what is left alone
        await pilot.pause()
        assert not targets_shown(screen, app), screen_text(app)
        assert not screen.targets_in_view()
        await pilot.press("ctrl+k")
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen) and not app.running  # refused
        assert any("targets" in n.message for n in app._notifications)
        # ... and the targets are back in view: now it may be confirmed.
        await wait_for(pilot, lambda: bool(targets_shown(screen, app)))
        await pilot.press(*["pagedown"] * 6)
        await pilot.pause()
        kill = screen.query_one("#plan-kill", Button)
        await pilot.click(kill)  # the button is refused the same way
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen) and not app.running
        await wait_for(pilot, lambda: bool(targets_shown(screen, app)))
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: confirmed(app))


async def test_resizing_an_open_dialog_keeps_its_targets_on_screen() -> None:
    app = demo_app()
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await open_host(pilot)
        assert len(targets_shown(screen, app)) == len(screen.plans[0].signalled)  # all of them
        for size in [(60, 15), (90, 20), (60, 16), (116, 15)]:
            await pilot.resize_terminal(*size)
            await redrawn(pilot)
            await wait_for(pilot, lambda: screen.fitted)
            await pilot.pause()
            assert targets_shown(screen, app), f"{size}\n{screen_text(app)}"
            assert buttons_shown(app), f"{size}\n{screen_text(app)}"
            assert screen.targets_in_view()
        # Below the dashboard's smallest size the one-line screen covers the dialog: ctrl+k
        # reaches nothing.
        await pilot.resize_terminal(50, 12)
        await pilot.pause()
        assert isinstance(app.screen, TooSmallScreen)
        await pilot.press("ctrl+k")
        await pilot.pause()
        assert not app.running and screen in app.screen_stack
        await pilot.resize_terminal(60, 15)
        await wait_for(pilot, lambda: app.screen is screen)
        await wait_for(pilot, lambda: screen.fitted and bool(targets_shown(screen, app)))
        assert buttons_shown(app)
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: confirmed(app))


def crowded_plans(app: GpuTuiApp) -> list[Plan]:
    """Both hosts freed by someone who owns none of their processes: a warning for every target."""
    options = PlanOptions(operator="nobody")
    return [plan_for_host(sample_of(app, h), host=h, options=options) for h in ("demo-a", "demo-b")]


async def test_a_plan_whose_targets_cannot_be_shown_opens_no_plan_and_says_why() -> None:
    app = demo_app()
    async with app.run_test(size=(60, 15)) as pilot:
        await settle(pilot)
        plans = crowded_plans(app)
        warnings = sum(len(p.warnings) for p in plans)
        assert warnings > 10  # more lines than 60x15 holds with a target and the buttons
        chosen: list[Any] = []
        app.push_screen(PlanScreen(plans, operator="nobody"), chosen.append)
        screen = await fitted(pilot)
        text = " ".join(screen_text(app).split())
        assert "too small" in text and "60x15" in text, text
        assert not targets_shown(screen, app) and not screen.targets_in_view()
        await pilot.press("ctrl+k")
        await pilot.pause()
        assert app.screen is screen and not chosen  # refused
        await pilot.resize_terminal(120, 50)
        await redrawn(pilot)
        await wait_for(pilot, lambda: screen.fitted and bool(targets_shown(screen, app)))
        assert "too small" not in screen_text(app) and buttons_shown(app)
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: bool(chosen))
        assert chosen[0]

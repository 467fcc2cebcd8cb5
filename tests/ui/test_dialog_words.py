"""The plan dialog says what it does, once: the sweep is offered only where it adds something, and
named for what it does; the button's verb is the title's; every dialog's title and button agree.

demo-a (recorded) has an unattributed hidden holder (probe_cuda.py: holds /dev/nvidia*, on no GPU)
beside a notebook and a ghost on GPU 2.
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Button

from gputui.ui.screens.plan import PlanScreen
from tests.support.apps import build_app, recording
from tests.support.demopids import demo_pid
from tests.support.pilot import dialog, dialog_text, palette, procs_of, redrawn
from tests.support.scenes import JOBS_HOST

NOTEBOOK = str(demo_pid("notebook_kernel.py"))
GHOST = str(demo_pid(None, "ghost"))
UNATTRIBUTED = str(demo_pid("probe_cuda.py", "hidden"))


async def x_on(pilot: Any, pid: str) -> PlanScreen:
    """`x` on process `pid` of demo-a: its plan dialog."""
    main = await procs_of(pilot)
    table = main.proc_table
    table.move_to(next(k for k in table.rows_data() if k.startswith(f"{pid}:")))
    await redrawn(pilot)
    await pilot.press("x")
    return await dialog(pilot)


async def test_stopping_one_process_offers_no_host_wide_sweep() -> None:
    app = build_app()
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await x_on(pilot, NOTEBOOK)
        [plan] = screen.plans
        assert [t.pid for t in plan.targets] == [int(NOTEBOOK)] and plan.sweep == ()
        text = dialog_text(app)
        assert "Sweep" not in text and "s sweep" not in text and UNATTRIBUTED not in text
        assert not any(w.kind == "sweep-off" for w in plan.warnings)
        assert screen.check_action("toggle_sweep", ()) is False


async def test_a_ghosts_plan_and_a_gpus_offer_the_sweep_named_for_what_it_does() -> None:
    app = build_app()
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await x_on(pilot, GHOST)  # its memory's holder may be among the unattributed
        [plan] = screen.plans
        assert [t.pid for t in plan.sweep] == [int(UNATTRIBUTED)]
        text = dialog_text(app)
        assert "☐ Sweep (1): also stop the unattributed hidden holder, host-wide" in text
        assert "s sweep" in text
        await pilot.press("escape")
        await redrawn(pilot)
        main = app._main
        assert main is not None
        main.gpu_table.focus()
        await pilot.press("down", "down", "down", "f")  # GPU 2
        screen = await dialog(pilot)
        assert screen.plans[0].sweep and "☐ Sweep (1): also stop" in dialog_text(app)


async def test_the_buttons_verb_is_the_titles() -> None:
    app = build_app()
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await x_on(pilot, NOTEBOOK)
        title = dialog_text(app)
        label = str(screen.query_one("#plan-kill", Button).label)
        assert "Stop the chosen process · confirm" in title and label == "Stop 1", label


def verb_pair(app: Any, screen: PlanScreen) -> tuple[str, str, str]:
    """The first word of the dialog's title, of its button, and ctrl+k's word in its keys line."""
    title = str(screen.query_one("#plan-box").border_title)
    button = str(screen.query_one("#plan-kill", Button).label)
    keys = str(screen.query_one("#plan-keys").render())
    return title.split()[0], button.split()[0], keys.split(" · ")[0].removeprefix("ctrl+k ")


@pytest.mark.parametrize(
    ("keys", "verb"),
    [
        (("gpus", "down", "down", "down", "f"), "Free"),  # GPU 2
        (("gpus", "F"), "Free"),
        (("procs", NOTEBOOK, "x"), "Stop"),
        (("procs", GHOST, "x"), "Stop"),
        (("procs", NOTEBOOK, "T"), "Stop"),  # nvitop's SIGTERM key: the same plan, one signal ladder
    ],
    ids=["f", "F", "x", "x-ghost", "T"],
)
async def test_every_plan_dialogs_title_and_button_say_the_same_verb(
    keys: tuple[str, ...], verb: str
) -> None:
    app = build_app()
    async with app.run_test(size=(160, 40)) as pilot:
        main = await procs_of(pilot)
        for key in keys:
            if key == "gpus":
                main.gpu_table.focus()
            elif key == "procs":
                main.proc_table.focus()
            elif key.isdigit():
                main.proc_table.move_to(
                    next(k for k in main.proc_table.rows_data() if k.startswith(f"{key}:"))
                )
                await redrawn(pilot)
            else:
                await pilot.press(key)
        screen = await dialog(pilot)
        assert verb_pair(app, screen) == (verb, verb, verb.lower())


async def test_the_stop_job_dialog_says_stop() -> None:
    app = build_app((JOBS_HOST,), records={JOBS_HOST: list(recording("jobs"))})
    async with app.run_test(size=(160, 40)) as pilot:
        main = await procs_of(pilot, JOBS_HOST)
        await pilot.press("J")
        await redrawn(pilot)
        assert main.procs.cursor_job() is not None
        await pilot.press("X")
        screen = await dialog(pilot)
        assert verb_pair(app, screen) == ("Stop", "Stop", "stop")


@pytest.mark.parametrize("words", ["free gpu", "free host", "sweep"])
async def test_a_palette_entry_and_the_dialog_it_opens_say_the_same_verb(words: str) -> None:
    app = build_app()
    async with app.run_test(size=(160, 40)) as pilot:
        main = await procs_of(pilot)
        main.gpu_table.focus()
        await pilot.press("down", "down", "down")
        await palette(pilot, words)
        screen = await dialog(pilot)
        title, button, key = verb_pair(app, screen)
        assert (title, button, key) == ("Free", "Free", "free")

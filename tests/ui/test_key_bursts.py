"""Keys that come in one burst (a paste, an SSH link, a busy machine: the terminal hands them over in
one read) go where the operator meant them: what follows `/` is the filter's text, and a plan asked
for from one view opens over that view only."""

from __future__ import annotations

import pytest
from textual import events
from textual.widgets import Input

from gputui.ui import GpuTuiApp
from gputui.ui.screens.help import HelpScreen
from gputui.ui.screens.plan import PlanScreen
from tests.support.apps import build_app
from tests.support.pilot import procs_of, redrawn, wait_for

# What a terminal's parser makes of the characters (Textual's key names).
KEY_NAMES = {"/": "slash", "?": "question_mark", "]": "right_square_bracket", "\r": "enter"}


def burst(app: GpuTuiApp, text: str) -> None:
    """`text` as keys all queued before the first is handled, as the driver posts one read's keys."""
    for char in text:
        app.post_message(events.Key(KEY_NAMES.get(char, char), char))


async def test_what_is_typed_after_slash_is_the_filter_and_what_follows_enter_the_tables() -> None:
    app = build_app()
    async with app.run_test(size=(100, 30)) as pilot:
        main = await procs_of(pilot)
        burst(app, "/train")
        await redrawn(pilot)
        bar = app.query_one("#filter", Input)
        assert bar.has_focus and bar.value == "train"
        # Nothing of it reached the table's keys (t: the tree, i: the GPU view).
        assert app.screen is main and not main.proc_table.tree_mode
        burst(app, "\rt")
        await redrawn(pilot)
        # The box kept its text, and the `t` after enter switched the table to its tree.
        assert main.proc_table.has_focus and main.proc_table.tree_mode
        assert main.state.filter_of("procs").text == "train"


@pytest.mark.parametrize("keys", ["x?", "x]"])
async def test_a_plan_asked_from_a_view_left_at_once_does_not_open_over_another(keys: str) -> None:
    """`x`, then at once `?` (the help) or `]` (the next host): the plan is made, and not shown over
    a view it was not asked from; the log says so and nothing is signalled."""
    app = build_app()
    async with app.run_test(size=(100, 30)) as pilot:
        main = await procs_of(pilot)
        burst(app, keys)
        await wait_for(pilot, lambda: any("not shown" in e.plain() for e in main.action_log.entries))
        await redrawn(pilot)
        assert not any(isinstance(s, PlanScreen) for s in app.screen_stack)
        if keys == "x?":
            assert isinstance(app.screen, HelpScreen)
        else:
            assert app.screen is main and main.state.host == "demo-b"
        assert not app.running  # nothing runs: no plan was confirmed


async def test_a_plan_asked_and_left_alone_opens_over_its_view() -> None:
    app = build_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await procs_of(pilot)
        burst(app, "x")
        await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))

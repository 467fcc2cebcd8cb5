"""The filter box (/) as an operator leaves it: enter keeps text that can be read; enter on text
that cannot be read keeps the box open with its problem said, so nothing typed is lost; esc clears.
A user chosen on the Users screen (U) filters by that name, literally."""

from __future__ import annotations

from typing import Any

from textual.widgets import Input

from gputui.ui.screens.users import UsersScreen
from gputui.ui.widgets.filter_bar import FilterProblem
from gputui.ui.widgets.fleet_table import split_row_key
from tests.support.apps import build_app
from tests.support.pilot import procs_of, redrawn, wait_for


async def test_enter_on_text_that_cannot_be_read_keeps_the_box_and_the_text() -> None:
    app = build_app()
    async with app.run_test(size=(100, 30)) as pilot:
        main = await procs_of(pilot)
        await pilot.press("slash", *"user:root")
        await redrawn(pilot)
        await pilot.press("enter")  # readable: kept, the box closed
        await redrawn(pilot)
        bar = app.query_one("#filter", Input)
        assert main.proc_table.has_focus and main.state.filter_of("procs").text == "user:root"
        await pilot.press("slash", "end", "space", *'"my job')  # a quote never closed
        await redrawn(pilot)
        await pilot.press("enter")
        await redrawn(pilot)
        assert bar.has_focus and bar.value == 'user:root "my job'
        problem = app.query_one(FilterProblem)
        assert problem.display and "never closed" in str(problem.render())
        # The table keeps the last filter that could be read ("user:root ", as typed on the way).
        assert main.state.filter_of("procs").text.strip() == "user:root"
        await pilot.press('"', "enter")  # mended: kept
        await redrawn(pilot)
        assert main.proc_table.has_focus and main.state.filter_of("procs").text == 'user:root "my job"'
        await pilot.press("slash", "escape")
        await redrawn(pilot)
        assert main.proc_table.has_focus and main.state.filter_of("procs").text == ""
        await pilot.press("slash")
        await redrawn(pilot)
        assert bar.value == ""


async def test_a_user_chosen_on_the_users_screen_is_that_user_only() -> None:
    """`[i]mallory` (the recording's hostile name) chosen with enter filters the fleet to the GPUs
    where that user runs, not to a pattern (`[i]` would match the one letter i)."""
    app = build_app()
    async with app.run_test(size=(140, 40)) as pilot:
        main = await procs_of(pilot)
        await pilot.press("U")
        await wait_for(pilot, lambda: isinstance(app.screen, UsersScreen))
        screen = app.screen
        assert isinstance(screen, UsersScreen)
        await wait_for(pilot, lambda: screen.table.move_to("[i]mallory"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is main)
        await redrawn(pilot)
        rows = [split_row_key(k) for k in main.fleet_table.rows_data()]
        used = {
            (v.name, g)
            for v in app.fleet.hosts
            if v.sample
            for p in v.sample.processes
            if p.user == "[i]mallory"
            for g in p.gpus
        }
        assert used and set(rows) == used, (rows, used)


async def _problem_of(size: tuple[int, int], typed: str) -> dict[str, Any]:
    """The filter box opened on demo-a's processes at `size`, `typed` in it: its problem line (shown
    or not, its words, its width, its tooltip) and that line as drawn (its first row)."""
    app = build_app()
    async with app.run_test(size=size) as pilot:
        await procs_of(pilot)
        await pilot.press("slash", *typed)
        await redrawn(pilot)
        problem = app.query_one(FilterProblem)
        assert app.is_running
        return {
            "display": problem.display,
            "words": str(problem.render()),
            "width": problem.size.width,
            "tooltip": str(problem.tooltip),
            "shown": "".join(segment.text for segment in problem.render_line(0)).rstrip(),
        }


async def test_a_problem_longer_than_its_room_ends_in_a_mark_and_is_whole_on_hover() -> None:
    """At 60 columns the problem beside the box was cut at its edge with no mark: "is not a" read
    as the whole reason. It now ends in "…" where cut, and its tooltip holds all of it."""
    problem = await _problem_of((60, 15), "gpu:seven-and-a-half")
    words, shown = problem["words"], problem["shown"]
    assert problem["display"] and len(words) > problem["width"]  # longer than its room
    assert shown.endswith("…") and words.startswith(shown[:-1]), (shown, words)
    assert problem["tooltip"] == words


async def test_text_in_square_brackets_is_said_literally_and_ends_nothing() -> None:
    """A problem quotes what was typed: `gpu:[b]x[/b]` was read as Textual markup, and the closing
    tag the problem made of it ended the dashboard with a MarkupError."""
    problem = await _problem_of((140, 30), "gpu:[b]x[/b]")
    assert problem["display"] and problem["shown"].startswith("gpu:[b]x[/b] is no GPU index"), problem

"""The dashboard started filtered (`gputui --user alice`, `--gpu 2,3`, `--compute`; the options are
gputui/cli/options.py's): both tables start with the filter, their titles say it, the filter box
holds it (esc clears it), read-only too; a filter that matches nothing says so in the title."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from gputui.cli.commands import dashboard
from gputui.cli.options import filter_text
from gputui.ui.screens.main import MainScreen
from gputui.ui.widgets.fleet_table import split_row_key
from tests.support.apps import build_app
from tests.support.pilot import procs_of, redrawn, screen_text, settle


def gpu_rows(main: MainScreen) -> set[tuple[str, int | None]]:
    table = main.fleet_table
    return {
        split_row_key(table.coordinate_to_cell_key((i, 0)).row_key.value or "")
        for i in range(table.row_count)
    }


def test_the_options_are_one_query_of_the_filter_language() -> None:
    args = dashboard.parser().parse_args(
        ["--demo", "--user", "alice,bob", "--user", "carol", "--pid", "4121", "--only", "2,3", "--compute"]
    )
    assert filter_text(args) == "user:alice,bob,carol pid:4121 gpu:2,3 kind:user"
    assert filter_text(dashboard.parser().parse_args([])) == ""


@pytest.mark.parametrize("read_only", [False, True])
async def test_the_dashboard_starts_filtered_and_the_filter_box_clears_it(read_only: bool) -> None:
    app = build_app(start_filter="gpu:demo-a:1,demo-b:3 kind:user", read_only=read_only)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        main: MainScreen = app._main  # type: ignore[assignment]
        shown = gpu_rows(main)
        # The GPUs named that run a compute process (demo-b's GPU 3 runs none in the recording).
        assert shown and shown <= {("demo-a", 1), ("demo-b", 3)}, shown
        assert "filter: gpu:demo-a:1,demo-b:3 kind:us…" in screen_text(app)  # cut at 30 cells
        main.fleet_table.focus()
        await pilot.press("slash")
        await redrawn(pilot)
        bar = app.query_one("#filter", Input)
        assert bar.value == "gpu:demo-a:1,demo-b:3 kind:user"
        await pilot.press("escape")
        await redrawn(pilot)
        assert len(gpu_rows(main)) > len(shown) and "filter:" not in str(main.fleet_table.border_title)
        # The process table started with it too (each table's filter is its own: esc cleared the fleet's).
        main = await procs_of(pilot)
        listed = main.proc_table.in_view
        assert listed and all(p.kind == "user" and 1 in p.gpus for p in listed)
        assert "filter: gpu:demo-a:1,demo-b:3" in screen_text(app)


async def test_a_start_filter_that_matches_nothing_says_so() -> None:
    app = build_app(start_filter="user:nobody-here")
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        main: MainScreen = app._main  # type: ignore[assignment]
        assert not gpu_rows(main)
        assert "filter: user:nobody-here · nothing matches" in screen_text(app)
        main = await procs_of(pilot)
        assert not main.proc_table.in_view
        text = screen_text(app)
        assert "filter: user:nobody-here · nothing matches" in text, text

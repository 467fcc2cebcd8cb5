"""Sort keys name columns, not places (issue 12, defect 2): `5` sorts by the same column at every
width, the sort brings its column into view (issue 19), a sort on a column that is not shown all the
same (the config hides it) is kept (and the pane's bottom border says so), and the sorted column's
header carries the arrow."""

from __future__ import annotations

from typing import Any

import pytest
from textual.app import App, ComposeResult

from gputui.ui.widgets.cells import Cell
from gputui.ui.widgets.columns import SORT_KEYS, Column
from gputui.ui.widgets.fleet_table import FleetTable
from gputui.ui.widgets.proc_table import ProcTable
from gputui.ui.widgets.table import KeyedTable
from tests.support.apps import build_app
from tests.support.pilot import redrawn, settle


def sortable(table: type[KeyedTable]) -> list[str]:
    return [c.key for c in table.COLUMNS if c.sortable]


def ordered(table: KeyedTable, column: str) -> list[Any]:
    keys = [table.coordinate_to_cell_key((i, 0)).row_key.value for i in range(table.row_count)]
    return [table.rows_data()[k][column].sort_key for k in keys]


def header(table: KeyedTable, column: str) -> str:
    return next(c.label.plain for k, c in table.columns.items() if k.value == column)


@pytest.mark.parametrize("width", [60, 80, 120, 200])
async def test_each_key_sorts_the_same_fleet_column_at_every_width(width: int) -> None:
    app = build_app()
    async with app.run_test(size=(width, 36)) as pilot:
        await settle(pilot)
        table = app._main.fleet_table
        table.focus()
        expected = sortable(FleetTable)
        assert expected[:8] == ["host", "gpu", "name", "memory", "util", "temp", "state", "holders"]
        for digit, column in zip(SORT_KEYS, expected, strict=False):
            await pilot.press(digit)
            assert table.sort_column is not None and table.sort_column[0] == column, (width, digit)
            values = ordered(table, column)
            assert values == sorted(values, reverse=table.sort_column[1]), (width, column)


@pytest.mark.parametrize("width", [80, 200])
async def test_each_key_sorts_the_same_process_column_at_every_width(width: int) -> None:
    app = build_app()
    async with app.run_test(size=(width, 36)) as pilot:
        await settle(pilot)
        main = app._main
        main.select_host("demo-a")
        await redrawn(pilot)
        table = main.proc_table
        table.focus()
        expected = sortable(ProcTable)
        assert len(expected) == 10  # the tenth is 0
        for digit, column in zip(SORT_KEYS, expected, strict=True):
            await pilot.press(digit)
            assert table.sort_column is not None and table.sort_column[0] == column, (width, digit)


async def test_a_sort_on_a_column_that_hides_is_kept_and_said() -> None:
    app = build_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        main = app._main
        main.select_host("demo-a")
        await redrawn(pilot)
        table = main.proc_table
        table.focus()
        rss = str(SORT_KEYS[sortable(ProcTable).index("rss")])
        await pilot.press(rss)
        assert table.sort_column == ("rss", True)
        assert header(table, "rss") == "▼RSS"
        by_rss = ordered(table, "rss")
        assert by_rss == sorted(by_rss, reverse=True)
        assert "sorted by" not in main.proc_table.border_title

        await pilot.resize_terminal(80, 24)
        await redrawn(pilot)
        assert table.width_of("rss")  # RSS would not show at this width: the sort brings it (issue 19)
        assert header(table, "rss") == "▼RSS"

        table.hide_columns({"rss"})  # as the config's [columns] does: hidden at every width
        await redrawn(pilot)
        assert table.width_of("rss") == 0
        assert table.sort_column == ("rss", True)  # kept
        assert ordered(table, "rss") == by_rss  # and still what orders the rows
        assert main.proc_table.border_subtitle == "sorted by RSS ▼ (column hidden)"
        await pilot.press(rss)  # the same key reverses it, hidden or not
        assert ordered(table, "rss") == sorted(by_rss)
        assert main.proc_table.border_subtitle == "sorted by RSS ▲ (column hidden)"

        table.hide_columns(())
        await pilot.resize_terminal(200, 50)
        await redrawn(pilot)
        assert header(table, "rss") == "▲RSS"
        assert "sorted by" not in main.proc_table.border_title
        assert not main.proc_table.border_subtitle


class Table(KeyedTable):
    COLUMNS = (
        Column("name", "Name", width=8, cut=True),
        Column("big", "Big", width=40, priority=5),
        Column("value", "Value", width=6, justify="right", priority=1),
    )
    DEFAULT_SORT = ("value", False)


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Table()


async def test_sorting_by_a_hidden_column_orders_rows_like_datatable() -> None:
    """The sort by a hidden column writes DataTable's row order itself (`_row_locations`,
    `_update_count`): this fails loudly if a Textual upgrade changes those internals."""
    app = TableApp()
    async with app.run_test(size=(30, 12)) as pilot:
        table = app.query_one(Table)
        values = [5, 3, 9, 1]
        table.sync(
            {
                f"r{v}": {"name": Cell(f"r{v}"), "big": Cell("x"), "value": Cell(str(v), sort_key=v)}
                for v in values
            }
        )
        await pilot.pause()
        assert table.width_of("big") == 0  # 30 columns: no room for it
        table.sort_by("big")  # all equal: the order of the rows as they are
        table.sort_by("value", reverse=True)
        assert [table.get_row_at(i)[0].plain for i in range(4)] == ["r9", "r5", "r3", "r1"]
        await pilot.resize_terminal(12, 12)  # "value" hides too
        await pilot.pause()
        assert table.width_of("value") == 0
        table.sort_by("value", reverse=False)
        assert [table.get_row_at(i)[0].plain for i in range(4)] == ["r1", "r3", "r5", "r9"]
        assert table.hidden_sort() == "sorted by Value ▲ (column hidden)"

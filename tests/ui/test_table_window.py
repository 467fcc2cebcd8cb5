"""A KeyedTable of thousands of rows builds only what can be seen (issue 21).

Rows handed to `sync` as builders (`later`) are built at once when new or in the window (the rows in
view and WINDOW_MARGIN rows about), else when they come into it; under a sort whose keys
move with the data, all at once. These tests drive a real app and count which builders ran.
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import App, ComposeResult
from textual.pilot import Pilot

from gputui.fleet.session import LIVE
from gputui.ui._textual import InPlaceTable
from gputui.ui.widgets.cells import Cell, Row
from gputui.ui.widgets.columns import Column
from gputui.ui.widgets.table import KeyedTable
from tests.support.apps import build_app, recording
from tests.support.pilot import redrawn, wait_for


class Table(KeyedTable):
    COLUMNS: ClassVar[tuple[Column, ...]] = (
        Column("name", "Name", width=8),
        Column("value", "Value", width=8, justify="right"),
    )
    DEFAULT_SORT = ("name", False)
    STEADY_SORTS = frozenset({"name"})
    LAZY = True

    def __init__(self) -> None:
        super().__init__()
        self.source = Source()

    def build_later(self, key: str) -> Row | None:
        return self.source.row(key)


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Table()


class Source:
    """Rows r000..r199 whose values a test changes; each build is counted."""

    def __init__(self) -> None:
        self.values = {f"r{i:03d}": str(i) for i in range(200)}
        self.built: list[str] = []

    def row(self, key: str) -> Row | None:
        self.built.append(key)
        value = self.values.get(key)
        if value is None:
            return None
        return {"name": Cell(key, sort_key=key), "value": Cell(value, sort_key=int(value))}

    def later(self) -> list[str]:
        return list(self.values)


def shown(app: App[Any]) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def painted(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.pause()


async def synced(app: App[Any], pilot: Pilot[Any]) -> Table:
    """The app's table with every row of its source handed to `sync` as a key, and painted."""
    table = app.query_one(Table)
    table.sync({}, later=table.source.later())
    await painted(pilot)
    return table


async def test_rows_out_of_the_window_wait_and_show_their_latest_values_when_scrolled_to():
    app = TableApp()
    async with app.run_test(size=(40, 12)) as pilot:
        table = await synced(app, pilot)
        source = table.source
        assert set(source.built) == set(
            source.values
        )  # new rows are built at once (their place, their widths)
        window = set(table.window())
        assert len(window) < 50
        # Out of the window they are held thin: the cell that places them, a blank as wide.
        thin = table.rows_data()["r199"]
        assert thin["name"].plain == "r199" and thin["value"].plain.strip() == ""
        assert len(thin["value"].plain) == 3 and "r199" in table._later
        source.built.clear()
        source.values = {key: str(int(value) + 1000) for key, value in source.values.items()}
        table.sync({}, later=source.later())
        await painted(pilot)
        in_window = {f"r{i:03d}" for i in window}
        assert set(source.built) == in_window  # only what can be seen (or soon) was built
        assert "1000" in shown(app) and "r199" not in shown(app)
        assert table.row_count == 200
        source.built.clear()
        await pilot.press("G")  # the bottom: rows that waited come into the window
        await painted(pilot)
        assert "r199" in source.built and "1199" in shown(app)
        assert all(key not in table._later for key in source.built)


async def test_a_sort_that_moves_with_the_data_builds_every_row_first():
    app = TableApp()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(Table)
        source = table.source
        table.sync({}, later=source.later())
        source.values = {key: str(1000 - int(value)) for key, value in source.values.items()}
        table.sync({}, later=source.later())  # r000 now 1000, the largest
        await painted(pilot)
        assert table._later
        table.sort_by("value", reverse=True)  # by the values that waited: built before sorting
        await painted(pilot)
        assert not table._later
        assert table.cursor_key == "r000" or table.get_row_at(0)[0].plain == "r000"
        source.values["r199"] = "5000"
        source.built.clear()
        table.sync({}, later=source.later())  # sorted by readings: every row built, in order
        await painted(pilot)
        assert len(source.built) == 200 and table.get_row_at(0)[0].plain == "r199"


async def test_a_row_whose_builder_finds_it_gone_is_removed():
    app = TableApp()
    async with app.run_test(size=(40, 12)) as pilot:
        table = await synced(app, pilot)
        source = table.source
        del source.values["r001"]  # in view: its builder says it is gone
        table.sync({}, replace=["r001"], later=["r001"])
        await painted(pilot)
        assert table.row_count == 199 and "r001" not in shown(app)


async def test_the_fleet_view_of_many_hosts_builds_only_the_rows_in_its_window():
    """300 replayed hosts (1,800 GPU rows) on the fleet view: after every host's samples, the rows
    far below the window were not built again; scrolled to, they show the newest sample."""
    records = {}
    for i in range(300):
        recorded = recording("demo-" + "ab"[i % 2])
        samples = [r for r in recorded if r["type"] == "sample"]
        records[f"h{i:03d}"] = [recorded[0], *samples[-5:]]  # its hello and its last samples
    app = build_app(tuple(records), records=records)
    async with app.run_test(size=(200, 50)) as pilot:
        last = {name: recorded[-1]["seq"] for name, recorded in records.items()}
        await wait_for(
            pilot,
            lambda: all(v.sample is not None and v.sample.seq == last[v.name] for v in app.fleet.hosts),
            120,
        )
        await redrawn(pilot)
        main = app._main
        assert main is not None
        table = main.fleet_table
        await pilot.pause(0.5)
        assert all(v.status == LIVE for v in app.fleet.hosts)
        assert table.row_count == 150 * (4 + 8)  # demo-a's 4 GPUs, demo-b's 8
        waiting = len(table._later)
        assert waiting > table.row_count // 2  # most rows wait: they are far from the window
        await pilot.press("G")
        await painted(pilot)
        last = table.cursor_key
        assert last is not None and last not in table._later
        host, gpu = last.partition("@")[2], int(last.partition("@")[0])
        view = app.fleet.view(host)
        fresh = table.built_row(
            view, list(app.fleet.sessions).index(host), gpu, table.problems.states.get(host)
        )
        assert fresh is not None
        assert {k: c.plain for k, c in table.rows_data()[last].items()} == {
            k: c.plain for k, c in fresh.items()
        }


async def test_a_cursor_that_scrolls_the_table_renders_again_only_the_rows_it_leaves_and_reaches():
    """DataTable keys a row's rendered line by the cursor's place: on each move that scrolled the
    table (a key held at the bottom of the view), every row in view was rendered again. KeyedTable
    draws a row the cursor is not on the same wherever the cursor is."""
    app = TableApp()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(Table)
        table.sync({}, later=table.source.later())
        table.focus()
        await painted(pilot)
        height = table.size.height
        for _ in range(height + 2):  # to the bottom of the view and past it: the table scrolls
            await pilot.press("j")
        await painted(pilot)
        assert table.scroll_y > 0
        rendered: list[Any] = []
        original = InPlaceTable.__mro__[1]._render_line_in_row  # DataTable's, below the override

        def counting(self: Any, row_key: Any, *args: Any) -> Any:
            before = len(self._row_render_cache)
            out = original(self, row_key, *args)
            if len(self._row_render_cache) > before:
                rendered.append(row_key.value)
            return out

        InPlaceTable.__mro__[1]._render_line_in_row = counting  # type: ignore[method-assign]
        try:
            start = table.cursor_row
            for _ in range(3):
                await pilot.press("j")
                await painted(pilot)
        finally:
            InPlaceTable.__mro__[1]._render_line_in_row = original  # type: ignore[method-assign]
        assert table.cursor_row == start + 3 and table.scroll_y > 0
        # Each move: the row it left, the row it reached (new in view as the table scrolled).
        rows = sorted({key for key in rendered if key is not None})  # (None: the header's line)
        assert rows == [f"r{i:03d}" for i in range(start, start + 4)]

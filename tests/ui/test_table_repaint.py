"""KeyedTable repaints only the rows whose cells changed, and never shows a stale cell.

DataTable's own update_cell invalidates every render cache of the table; KeyedTable stores the cell,
marks its row's line dirty and drops that row's cache entries before the next render. These tests
drive a real app: what the compositor shows, which cells were rendered again, what a scroll shows.
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import App, ComposeResult
from textual.pilot import Pilot

from gputui.ui.widgets.cells import Cell, Row
from gputui.ui.widgets.columns import Column
from gputui.ui.widgets.table import KeyedTable


class Table(KeyedTable):
    COLUMNS: ClassVar[tuple[Column, ...]] = (
        Column("name", "Name", width=8),
        Column("value", "Value", width=8, justify="right"),
        Column("note", "Note", width=10, sortable=False),
    )
    DEFAULT_SORT = ("name", False)


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Table()


def rows(values: dict[str, str]) -> dict[str, Row]:
    return {
        key: {"name": Cell(key), "value": Cell(value, sort_key=value), "note": Cell("n-" + key)}
        for key, value in values.items()
    }


def shown(app: App[Any]) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def cached_cells(table: Table) -> dict[Any, int]:
    """The cell render cache: key (row key first) -> identity of the rendered lines."""
    return {key: id(table._cell_render_cache.get(key)) for key in list(table._cell_render_cache.keys())}


async def painted(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.pause()


async def thirty_rows(pilot: Pilot[Any], table: Table) -> dict[str, str]:
    """Rows r00..r29 (valued 0..29) synced and painted; more than the 12-line screen shows."""
    data = {f"r{i:02d}": str(i) for i in range(30)}
    table.sync(rows(data))
    await painted(pilot)
    return data


def line_of(app: App[Any], text: str) -> str:
    return next(line for line in shown(app).splitlines() if text in line)


async def test_one_changed_cell_renders_one_row_and_shows_the_new_value() -> None:
    app = TableApp()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(Table)
        data = await thirty_rows(pilot, table)
        assert "r03" in shown(app) and "r20" not in shown(app)
        table.move_to("r05")
        await painted(pilot)

        before = cached_cells(table)
        changes = table.changes
        data["r03"] = "999"
        assert table.sync(rows(data)) is False  # nothing added, removed or reordered
        assert table.changes == changes + 1
        await painted(pilot)

        line = line_of(app, "r03")
        assert "999" in line and "n-r03" in line
        after = cached_cells(table)
        kept = {k for k in before if k[0] != "r03"}
        assert kept and all(after.get(k) == before[k] for k in kept)  # not rendered again
        assert not any(k in after and after[k] == v for k, v in before.items() if k[0] == "r03")
        assert "r05" in shown(app)


async def test_a_row_changed_out_of_view_shows_its_new_value_when_scrolled_to() -> None:
    app = TableApp()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(Table)
        data = await thirty_rows(pilot, table)
        table.move_to("r25", scroll=True)  # render r25 once, so its cells are in the caches
        await painted(pilot)
        assert "25" in shown(app)
        table.move_to("r00", scroll=True)
        await painted(pilot)
        assert "r25" not in shown(app)

        data["r25"] = "12345"
        table.sync(rows(data))
        await painted(pilot)
        table.move_to("r25", scroll=True)
        await painted(pilot)
        assert "12345" in line_of(app, "r25")


async def test_changes_between_paints_and_a_re_sort_stay_consistent() -> None:
    app = TableApp()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(Table)
        data = {f"r{i:02d}": f"{i:03d}" for i in range(8)}
        table.sync(rows(data))
        table.sort_by("value")
        await painted(pilot)
        for step in range(3):  # several updates of the same row before one paint
            data["r02"] = f"x{step}"
            table.sync(rows(data))
        data["r04"] = "0"  # sorts first now
        assert table.sync(rows(data)) is True
        await painted(pilot)
        lines = [line for line in shown(app).splitlines() if line.strip().startswith("r")]
        assert lines[0].split()[:2] == ["r04", "0"]
        assert any(line.split()[:2] == ["r02", "x2"] for line in lines)
        assert table.cursor_key is not None


async def test_render_caches_hold_what_is_shown_not_what_was() -> None:
    """Rows that come and go (processes restarting) leave nothing behind in the render caches."""
    app = TableApp()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(Table)
        for step in range(120):
            table.sync(rows({f"p{step + i:04d}": str(i) for i in range(8)}))  # one row replaced per step
            await pilot.pause()
        assert "p0119" in shown(app) and "p0126" in shown(app)
        visible_cells = 8 * 3
        assert len(table._cell_render_cache) <= 2 * visible_cells
        assert len(table._line_cache) <= 2 * 12


async def test_a_key_that_scrolls_builds_only_the_lines_that_differ() -> None:
    """The cursor at the bottom of the view, one row down: the view scrolls by a line. The lines it
    showed already come from the line cache; only the line that came into view and the two the
    cursor left and reached are made again from their rows (the cursor draws on those)."""
    app = TableApp()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(Table)
        await thirty_rows(pilot, table)
        table.focus()
        for _ in range(14):  # past the last row in view: the table scrolls with the cursor
            await pilot.press("j")
        await painted(pilot)
        assert table.scroll_y > 0
        made: list[Any] = []
        from_row = table._render_line_in_row

        def counted(row_key: Any, *args: Any, **kwargs: Any) -> Any:
            made.append(row_key.value)
            return from_row(row_key, *args, **kwargs)

        table._render_line_in_row = counted  # type: ignore[method-assign]
        top = table.scroll_y
        await pilot.press("j")
        await painted(pilot)
        assert table.scroll_y == top + 1
        cursor = table.cursor_key
        assert cursor is not None and "r15" in line_of(app, cursor)
        assert {"r14", "r15"} <= set(made)
        assert len(set(made) - {"r14", "r15"}) <= 1, made  # and the line that came into view, at most

"""Where a KeyedTable's view stays. Laid out again (`_rebuild`: a number came wider than its column,
or the pane's width changed the columns), it keeps the rows where the reader left them: DataTable's
own `clear` scrolls to the top and the cursor's move then scrolls only as far as brings the cursor
into view, so a rebuild used to move the view under a reader whose cursor was in it (a CI run caught
the process pane moving by a row as a column widened). A row that comes above the cursor moves the
view only where it pushes the cursor out of it."""

from __future__ import annotations

from typing import ClassVar

from textual.app import App, ComposeResult

from gputui.ui.widgets.cells import Cell
from gputui.ui.widgets.columns import Column
from gputui.ui.widgets.table import KeyedTable


class Table(KeyedTable):
    COLUMNS: ClassVar[tuple[Column, ...]] = (
        Column("n", "N", justify="right"),  # a number: its column grows with its widest cell
        Column("w", "Words", width=8, cut=True, priority=1),  # gives way first
    )


class Host(App[None]):
    CSS = "Table { height: 10; }"

    def compose(self) -> ComposeResult:
        yield Table()


def rows(n: int, wide: int | None = None) -> dict[str, dict[str, Cell]]:
    """`n` rows; row `wide`'s number as long as to need a wider column."""
    return {
        f"r{i:03d}": {"n": Cell("1" * 12 if i == wide else str(i), sort_key=i), "w": Cell(f"row {i}")}
        for i in range(n)
    }


async def settled(pilot) -> None:  # type: ignore[no-untyped-def]
    for _ in range(3):
        await pilot.pause()


async def reading(pilot, table: Table) -> int:  # type: ignore[no-untyped-def]
    """40 rows, the view scrolled to row 5, the cursor on row 12 (in view, away from its edges);
    returns how many rows are in view."""
    table.sync(rows(40))
    await settled(pilot)
    table.focus()
    in_view = table.scrollable_content_region.height - table.header_height
    table.scroll_to(y=5, animate=False, immediate=True)
    assert table.move_to("r012")
    await settled(pilot)
    assert table.scroll_y == 5
    return in_view


async def test_a_wider_number_keeps_the_view_and_the_cursor() -> None:
    app = Host()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(Table)
        await reading(pilot, table)
        before = table.width_of("n")
        table.sync(rows(40, wide=30))  # a row out of view widens the number column
        await settled(pilot)
        assert table.width_of("n") > before  # laid out again
        assert table.cursor_key == "r012"
        assert table.scroll_y == 5


async def test_a_resize_keeps_the_view_where_the_cursor_stays_in_it() -> None:
    app = Host()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(Table)
        await reading(pilot, table)
        shown = [c.key for c in table._shown]
        await pilot.resize_terminal(14, 20)  # too narrow for both columns: one gives way
        await settled(pilot)
        assert [c.key for c in table._shown] != shown
        assert table.cursor_key == "r012"
        assert table.scroll_y == 5


async def test_a_row_above_a_cursor_at_the_bottom_edge_brings_the_view_along() -> None:
    """The cursor follows its row's key; where a row that comes above pushes it out of view, the view
    follows it by that row (else the process under the cursor would be out of sight)."""
    app = Host()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(Table)
        last = 5 + await reading(pilot, table) - 1  # the last row in view
        assert table.move_to(f"r{last:03d}")
        await settled(pilot)
        assert table.scroll_y == 5
        grown = rows(40)
        grown["r010a"] = {"n": Cell("10", sort_key=10.5), "w": Cell("new")}  # after r010: above the cursor
        table.sort_by("n", reverse=False)
        table.sync(grown)
        await settled(pilot)
        assert table.cursor_key == f"r{last:03d}"
        assert table.scroll_y == 6

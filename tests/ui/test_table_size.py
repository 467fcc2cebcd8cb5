"""A KeyedTable whose box does not follow its rows (gputui/ui/widgets/table.py `watch_virtual_size`):
its rows change without laying the screen out again, while a box sized by its rows, and a scrollbar
that comes or goes, still get their layout; the scroll offset never points past the rows."""

from __future__ import annotations

from typing import ClassVar

import pytest
from textual.app import App, ComposeResult

from gputui.ui.widgets.cells import Cell
from gputui.ui.widgets.columns import Column
from gputui.ui.widgets.table import KeyedTable


class Table(KeyedTable):
    COLUMNS: ClassVar[tuple[Column, ...]] = (Column("a", "A", width=6),)


class Host(App[None]):
    CSS = "#fixed { height: 8; } #auto { height: auto; max-height: 8; }"

    def compose(self) -> ComposeResult:
        yield Table(id="fixed")
        yield Table(id="auto")


def rows(n: int) -> dict[str, dict[str, Cell]]:
    return {f"r{i:03d}": {"a": Cell(str(i))} for i in range(n)}


def laid_out(table: KeyedTable) -> list[bool]:
    """Record each refresh that asks for a layout (what a change of the virtual size asked)."""
    asked: list[bool] = []
    refresh = table.refresh

    def counted(*regions, repaint=True, layout=False, recompose=False):  # type: ignore[no-untyped-def]
        asked.append(layout)
        return refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    table.refresh = counted  # type: ignore[method-assign]
    return asked


async def test_rows_change_without_a_layout_where_the_box_stays() -> None:
    app = Host()
    async with app.run_test(size=(40, 24)) as pilot:
        fixed, auto = app.query_one("#fixed", Table), app.query_one("#auto", Table)
        fixed.sync(rows(3))
        auto.sync(rows(3))
        await pilot.pause()
        fixed_asked, auto_asked = laid_out(fixed), laid_out(auto)
        fixed.sync(rows(5))  # more rows, still room: the box stays, no scrollbar
        auto.sync(rows(5))  # a box as tall as its rows: it grows
        await pilot.pause()
        assert not any(fixed_asked)
        assert any(auto_asked) and auto.size.height > 3 + 2
        fixed_asked.clear()
        fixed.sync(rows(40))  # past its height: the scrollbar comes, which takes a column
        await pilot.pause()
        assert any(fixed_asked)
        assert fixed.show_vertical_scrollbar and fixed.max_scroll_y > 0
        fixed_asked.clear()
        fixed.sync(rows(60))  # more, with the scrollbar already there: only the bar is told
        await pilot.pause()
        assert not any(fixed_asked)
        assert fixed.max_scroll_y == 60 + 1 - fixed.scrollable_content_region.height
        assert fixed.vertical_scrollbar.window_virtual_size == 61


async def test_fewer_rows_bring_the_offset_back_within_them() -> None:
    app = Host()
    async with app.run_test(size=(40, 24)) as pilot:
        fixed = app.query_one("#fixed", Table)
        fixed.sync(rows(60))
        await pilot.pause()
        fixed.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        assert fixed.scroll_y == fixed.max_scroll_y > 30
        fixed.sync(rows(20))
        await pilot.pause()
        assert fixed.scroll_y == fixed.max_scroll_y < 30
        assert fixed.show_vertical_scrollbar


async def test_each_line_is_found_in_its_row_as_datatable_finds_it() -> None:
    """Rows one line high: the line below the header at y is row y, after rows come, go and are
    sorted; the same row (and line in it) DataTable's own list of lines gives, and the same height."""
    app = Host()
    async with app.run_test(size=(40, 24)) as pilot:
        table = app.query_one("#fixed", Table)
        for n, reverse in ((7, False), (12, True), (4, False)):
            table.sync({f"r{i:03d}": {"a": Cell(str((i * 7) % 11))} for i in range(n)})
            table.sort_by("a", reverse=reverse)
            await pilot.pause()
            header = table.header_height
            assert table._total_row_height == len(table._y_offsets) == n
            for y in range(header + n):
                want = (table._header_row_key, y) if y < header else table._y_offsets[y - header]
                assert table._get_offsets(y) == want
            for y in (header + n, header + n + 3):
                with pytest.raises(LookupError):
                    table._get_offsets(y)

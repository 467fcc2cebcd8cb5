"""KeyedTable's cells are rendered without Rich's whole pipeline (gputui/ui/widgets/table.py
`_cell_line`): held here to DataTable's own rendering, segment for segment, for every kind of cell a
table can hold (spans, justification, overflow, wide characters, tabs and newlines, cut or padded)
under the cursor, the mouse and neither, header and rows, in a real app."""

from __future__ import annotations

from typing import Any, ClassVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from gputui.ui.widgets.cells import Cell
from gputui.ui.widgets.columns import Column
from gputui.ui.widgets.table import KeyedTable

STYLES = [
    Style(),
    Style(bold=True),
    Style(color="red"),
    Style(bgcolor="#203040", italic=True),
    Style(dim=True),
]
WORDS = ["", " ", "a", "python", "GPU 0", "全角", "🙂", "x\ty", "two\nlines", "  pad  ", "1234567890" * 3]


class Table(KeyedTable):
    COLUMNS: ClassVar[tuple[Column, ...]] = (Column("a", "A", width=8), Column("b", "B", width=3))


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Table()


@st.composite
def cells(draw: Any) -> Text:
    parts = draw(st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(STYLES)), min_size=1, max_size=4))
    cell = Cell("", style=draw(st.sampled_from(STYLES)))
    for word, style in parts:
        cell.append(word, style)
    cell.justify = draw(st.sampled_from([None, "left", "right", "center", "full"]))
    cell.overflow = draw(st.sampled_from([None, "ellipsis", "crop", "fold"]))
    cell.no_wrap = draw(st.sampled_from([None, False, True]))
    cell.end = draw(st.sampled_from(["\n", ""]))
    return cell


async def test_a_cell_renders_as_datatable_renders_it() -> None:
    app = Host()
    async with app.run_test(size=(60, 10)) as pilot:
        table = app.query_one(Table)
        table.sync({"r0": {"a": Cell("x"), "b": Cell("y")}, "r1": {"a": Cell("z"), "b": Cell("w")}})
        await pilot.pause()

        @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(cells(), st.integers(-1, 1), st.integers(0, 1), st.integers(1, 24), st.booleans(), st.booleans(),
               st.sampled_from(STYLES))  # fmt: skip
        def same(
            cell: Text, row: int, column: int, width: int, cursor: bool, hover: bool, base: Style
        ) -> None:
            column_key = table._column_locations.get_key(column)
            assert column_key is not None
            if row == -1:  # the header: the column's label
                table.columns[column_key].label = cell
            else:
                table._data[table._row_locations.get_key(row)][column_key] = cell  # type: ignore[index]
            table._update_count += 1  # (no cached render of the cell before it)
            ours = table._render_cell(row, column, base, width, cursor, hover)
            table._update_count += 1
            theirs = DataTable._render_cell(table, row, column, base, width, cursor, hover)
            assert ours == theirs

        same()

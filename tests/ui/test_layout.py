"""How the tables share their width (issue 19, items 4 and 5), at 80x24, 120x36 and 200x50.

- A cut cell fills its column: an ellipsis never sits beside blank space that could have shown more
  (a holder's count cut to "◌ …" with six blank cells after it).
- Columns come in their priority order: a wider pane never shows fewer columns (Power shown at 80
  columns and not at 120), and the flexible column (Command, Holders) takes what is left.
- The command gets the room people read before the optional numbers (SM% excepted) come.
- `m` changes memory units, not which columns show (it used to hide SM% and widen Command).
- The sort is always visible: a sort key brings its column into view (the arrow says which);
  only a column the config hides is not shown, and the pane's title says so where it is never cut.
"""

from __future__ import annotations

from typing import Any

import pytest

from gputui.ui.screens.main import MainScreen
from gputui.ui.widgets.cells import ELLIPSIS, Cell
from gputui.ui.widgets.columns import SORT_KEYS
from gputui.ui.widgets.proc_table import COMMAND_ROOM, ProcTable
from gputui.ui.widgets.table import KeyedTable
from tests.support.apps import build_app
from tests.support.longdata import HOSTS, long_fleet_records
from tests.support.pilot import main_of, redrawn, screen_text, settle

SIZES = [(80, 24), (120, 36), (200, 50)]
ids = [f"{w}x{h}" for w, h in SIZES]


def shown(table: KeyedTable) -> list[str]:
    return [str(key.value) for key in table.columns]


def cut_beside_blank(table: KeyedTable) -> list[str]:
    """Every drawn cell that ends cut (…) while its column has room left: `row/column: text`."""
    found = []
    widths = {str(key.value): column.width for key, column in table.columns.items()}
    for index in range(table.row_count):
        row_key = table.coordinate_to_cell_key((index, 0)).row_key.value
        for key, cell in zip(widths, table.get_row_at(index), strict=True):
            if cell.plain.rstrip().endswith(ELLIPSIS) and cell.cell_len < widths[key] and not stub_gone(cell):
                found.append(f"{row_key}/{key}: {cell.plain!r} in {widths[key]}")
    return found


def stub_gone(cell: Cell) -> bool:
    """fit() dropped a stub of a few letters after a number (`32613 p…` reads as a unit cut): the
    number then ends the cell with ` …`, and the room the stub had stays blank on purpose."""
    end = len(cell.plain.rstrip())
    return cell.plain.rstrip().endswith(" " + ELLIPSIS) and any(stop == end - 2 for _, stop in cell.keep)


def tables(main: MainScreen) -> list[KeyedTable]:
    return [t for t in (main.host_list, main.gpu_table, main.fleet_table, main.proc_table) if t.display]


async def check_no_cut_beside_blank(main: MainScreen) -> None:
    for table in tables(main):
        assert cut_beside_blank(table) == [], type(table).__name__


@pytest.mark.parametrize("size", SIZES, ids=ids)
@pytest.mark.parametrize("data", ["demo", "long"])
async def test_a_cut_cell_fills_its_column(size: tuple[int, int], data: str) -> None:
    app = build_app() if data == "demo" else build_app(tuple(HOSTS.values()), records=long_fleet_records())
    first = "demo-a" if data == "demo" else HOSTS["demo-a"]
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        main = main_of(app)
        await check_no_cut_beside_blank(main)  # the fleet
        main.select_host(first)
        await redrawn(pilot)
        for row in range(5):  # "all", then each GPU's processes
            main.gpu_table.move_to("all" if row == 0 else str(row - 1))
            await redrawn(pilot)
            await check_no_cut_beside_blank(main)


async def columns_at(size: tuple[int, int]) -> dict[str, list[str]]:
    app = build_app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        main = main_of(app)
        fleet = shown(main.fleet_table)
        main.select_host("demo-a")
        await redrawn(pilot)
        return {"fleet": fleet, "gpus": shown(main.gpu_table), "procs": shown(main.proc_table)}


async def test_a_wider_terminal_never_shows_fewer_columns() -> None:
    """Power showed at 80 columns and not at 120: the columns skipped one that did not fit and took
    a later, smaller one. Now each table shows its columns in priority order, up to the first that
    does not fit."""
    at = {size: await columns_at(size) for size in SIZES}
    for name in ("fleet", "gpus", "procs"):
        narrow, middle, wide = (set(at[size][name]) for size in SIZES)
        assert narrow <= middle <= wide, (name, at)
    assert "power" in at[(200, 50)]["gpus"]


@pytest.mark.parametrize("size", SIZES, ids=ids)
async def test_m_changes_units_and_keeps_the_bar(size: tuple[int, int]) -> None:
    """The process table keeps its columns; the GPU table keeps its memory bar (8 cells): its
    Memory column grows by the longer numbers, so where the table is narrow it may show fewer of
    its optional columns, never others."""
    app = build_app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        main = main_of(app)
        main.select_host("demo-a")
        await redrawn(pilot)
        before = {t: shown(t) for t in (main.gpu_table, main.proc_table)}
        command = main.proc_table.width_of("command")
        await pilot.press("m")
        await redrawn(pilot)
        assert "MiB" in screen_text(app)
        assert shown(main.proc_table) == before[main.proc_table]
        assert set(shown(main.gpu_table)) <= set(before[main.gpu_table])
        assert {len(r["memory"].plain.split(" ")[0]) for r in main.gpu_table.rows_data().values()} == {8}
        assert main.proc_table.width_of("command") <= command  # MiB is wider: never the command


LATER = {"cpu", "rss", "state", "elapsed", "container"}  # the columns after the command's room


@pytest.mark.parametrize("data", ["demo", "long"])
async def test_the_command_gets_room_to_read(data: str) -> None:
    """At 120 columns (the host list beside it) the command had 25 characters while St took the
    rest; now no column after its room shows while the command has less than COMMAND_ROOM (the
    long data: 7-digit PIDs, a 9-character user)."""
    app = build_app() if data == "demo" else build_app(tuple(HOSTS.values()), records=long_fleet_records())
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = main_of(app)
        main.select_host("demo-a" if data == "demo" else HOSTS["demo-a"])
        await redrawn(pilot)
        table = main.proc_table
        assert main.host_list.display
        assert table.width_of("command") >= 28  # was 25, with 4-digit PIDs and `root`
        assert table.width_of("sm")  # SM% still shows: it says which process works
        for width in (120, 140, 160, 180, 200):
            await pilot.resize_terminal(width, 36)
            await redrawn(pilot)
            if table.width_of("command") < COMMAND_ROOM:
                assert not LATER & set(shown(table)), (width, shown(table))
        assert {"sm", "cpu", "rss", "state", "elapsed"} <= set(shown(table))
        assert table.width_of("command") >= COMMAND_ROOM


def header(table: KeyedTable, column: str) -> str:
    return next(c.label.plain for k, c in table.columns.items() if k.value == column)


def borders(app: Any, table: KeyedTable) -> str:
    """The pane's top and bottom borders as drawn: its title and its subtitle."""
    lines = screen_text(app).splitlines()
    region = table.region
    return lines[region.y][region.x : region.right] + "\n" + lines[region.bottom - 1][region.x : region.right]


@pytest.mark.parametrize("size", [(120, 36), (80, 24)], ids=["120x36", "80x24"])
@pytest.mark.parametrize("column", ["cpu", "elapsed"])
async def test_a_sort_key_brings_its_column_into_view(size: tuple[int, int], column: str) -> None:
    app = build_app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        main = main_of(app)
        main.select_host("demo-a")
        await redrawn(pilot)
        table = main.proc_table
        table.focus()
        digit = SORT_KEYS[[c.key for c in ProcTable.COLUMNS if c.sortable].index(column)]
        assert digit == {"cpu": "7", "elapsed": "9"}[column]
        await pilot.press(digit)
        await redrawn(pilot)
        assert table.sort_column == (column, True)
        assert table.width_of(column), f"sorted by {column}, which is not shown"
        assert header(table, column).startswith("▼")  # the arrow says what orders the rows
        assert "sorted by" not in (table.border_title or "")
        await check_no_cut_beside_blank(main)


async def test_a_sort_on_a_column_the_config_hides_is_said_where_it_is_never_cut() -> None:
    app = build_app(hidden_columns={"processes": frozenset({"rss"})})
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        main = main_of(app)
        main.select_host("demo-a")
        await redrawn(pilot)
        table = main.proc_table
        table.focus()
        await pilot.press(SORT_KEYS[[c.key for c in ProcTable.COLUMNS if c.sortable].index("rss")])
        await redrawn(pilot)
        assert table.width_of("rss") == 0  # the config hides it, at every width
        assert "sorted by RSS ▼ (column hidden)" in borders(app, table)
        await pilot.press("t")  # the tree: a longer title; the note is where it was
        main.state.following.key = None
        await redrawn(pilot)
        assert "sorted by RSS ▼ (column hidden)" in borders(app, table)

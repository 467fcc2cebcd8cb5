"""`m` (exact MiB) reaches every memory figure the tables show, and the memory bar keeps its width.

Before, the Holders marks (`◌ 41.0 GiB ghost`) and the fleet's State (`ghost 41.0 GiB`) stayed in
GiB, and the bar shrank from 8 cells to 3 to make room for the longer numbers.
"""

from __future__ import annotations

import re

from gputui.ui.screens.gpu_detail import GpuDetailScreen
from gputui.ui.widgets.cells import Cell
from gputui.ui.widgets.table import KeyedTable
from tests.support.apps import build_app
from tests.support.pilot import main_of, redrawn, screen_text, settle, wait_for

GIB = 1 << 30
MIB = 1 << 20
# A size in a unit other than exact MiB: `41.0 GiB`, `615 KiB`, `1.5 MiB` (exact MiB has no decimal).
NOT_EXACT = re.compile(r"\d (?:GiB|KiB|B)\b|\d\.\d+ MiB")
WORDS = {"name", "command", "host", "user"}  # untrusted words, not figures


def figures(table: KeyedTable) -> dict[str, str]:
    """Every cell of `table` that is not words, with its row and column."""
    return {
        f"{key}/{column}": cell.plain
        for key, row in table.rows_data().items()
        for column, cell in row.items()
        if column not in WORDS and isinstance(cell, Cell)
    }


def bar_width(cell: Cell) -> int:
    """The memory cell's bar: what comes before the first space."""
    return len(cell.plain.split(" ", 1)[0])


async def test_m_puts_every_memory_figure_in_mib_and_keeps_the_bar() -> None:
    app = build_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        main = main_of(app)
        fleet = main.fleet_table
        bars = {k: bar_width(r["memory"]) for k, r in fleet.rows_data().items() if "memory" in r}
        assert bars and set(bars.values()) == {8}
        await pilot.press("m")
        await redrawn(pilot)
        assert app.exact_memory
        shown = figures(fleet)
        assert not [c for c in shown.values() if NOT_EXACT.search(c)], shown
        assert any(c == f"ghost {41 * GIB // MIB} MiB" for c in shown.values()), shown
        assert {k: bar_width(r["memory"]) for k, r in fleet.rows_data().items() if "memory" in r} == bars

        main.select_host("demo-a")
        await redrawn(pilot)
        for table in (main.gpu_table, main.proc_table):
            shown = figures(table)
            assert not [c for c in shown.values() if NOT_EXACT.search(c)], shown
        holders = {k: r["holders"].plain for k, r in main.gpu_table.rows_data().items()}
        assert f"◌ {41 * GIB // MIB} MiB ghost" in holders["2"], holders
        assert {bar_width(r["memory"]) for r in main.gpu_table.rows_data().values()} == {8}

        # The GPU view: its account of the memory too.
        main.gpu_table.focus()
        main.gpu_table.move_to("2")
        await pilot.press("i")
        await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
        await pilot.pause()
        text = screen_text(app)
        assert f"! {41 * GIB // MIB} MiB listed for dead PIDs" in text, text
        assert not NOT_EXACT.search(text), text
        await pilot.press("escape")
        await redrawn(pilot)

        # And back: GiB everywhere again.
        await pilot.press("m")
        await redrawn(pilot)
        holders = {k: r["holders"].plain for k, r in main.gpu_table.rows_data().items()}
        assert "◌ 41.0 GiB ghost" in holders["2"], holders

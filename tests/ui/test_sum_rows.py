"""A row that adds its GPUs up says so: the GPU table's "all" row and a fleet group's folded line
show their memory as `Σ 562/1123 GiB` beside the per-GPU `118/140 GiB`, at every width; in ASCII
mode (`--ascii`, a locale that is not UTF-8), where one character would not say it, as `sum`."""

from __future__ import annotations

from typing import Any

import pytest

from gputui.ui import make_app
from gputui.ui.widgets.gpu_table import ALL
from gputui.ui.widgets.host_list import GROUP
from tests.support.apps import FROZEN, OPERATOR, build_app, scratch_log
from tests.support.fleet1024 import drawn, fleet_1024, played
from tests.support.pilot import redrawn, screen_text, settle, wait_for


def memory_of(table: Any, key: str) -> str:
    return str(table.rows_data()[key]["memory"].plain)


@pytest.mark.parametrize("size", [(80, 24), (160, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_all_row_says_its_memory_is_a_sum(size: tuple[int, int]) -> None:
    app = build_app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        main = app._main
        assert main is not None
        main.select_host("demo-a")
        await redrawn(pilot)
        table = main.gpu_table
        assert "Σ " in memory_of(table, ALL) and memory_of(table, ALL).endswith("/562 GiB")
        assert all("Σ" not in memory_of(table, k) for k in table.rows_data() if k != ALL)
        all_line = next(line for line in screen_text(app).splitlines() if " all " in line)
        assert "Σ " in all_line and "/562 GiB" in all_line, all_line  # shown, not cut


async def test_in_ascii_mode_the_sum_is_a_word() -> None:
    app = build_app(ascii_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        main = app._main
        assert main is not None
        main.select_host("demo-a")
        await redrawn(pilot)
        assert memory_of(main.gpu_table, ALL).split()[1] == "sum"  # after the bar
        assert "Σ" not in screen_text(app)


async def test_a_fleet_groups_line_says_its_memory_is_a_sum() -> None:
    fleet = fleet_1024(130)
    app = make_app(fleet, interval=3600.0, clock=lambda: FROZEN, log_path=scratch_log(), operator=OPERATOR)
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: played(app.fleet), 300)
        await drawn(pilot)
        table = app._main.fleet_table  # type: ignore[union-attr]
        groups = [k for k in table.rows_data() if k.startswith(GROUP)]
        assert groups and all("Σ " in memory_of(table, k) for k in groups)
        assert all("Σ" not in memory_of(table, k) for k in table.rows_data() if not k.startswith(GROUP))

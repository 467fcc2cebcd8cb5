"""The order the fleet is shown in, as the keys and titles have it: `[` and `]` walk the hosts in the
host list's order (problems first, worst first, then by group), not the config's; the fleet table's
title says the order it is sorted in, not "problems first" after a sort by another column.

The generated fleet (tests/support/fleet1024.py), 130 hosts: gpu0005 (ghost memory), gpu0064
(orphaned), gpu0017 (an idle holder) and gpu0130 (throttling) first; then rack01, rack02 folded,
and rack03's one healthy host, gpu0129, listed."""

from __future__ import annotations

from typing import Any

from gputui.ui.screens.main import MainScreen
from tests.support.fleet1024 import app_of, drawn, fleet_1024, settled

PROBLEMS_FIRST = ["gpu0005", "gpu0064", "gpu0017", "gpu0130"]


async def steps(pilot: Any, main: MainScreen, key: str, times: int) -> list[str | None]:
    """The host in view after each of `times` presses of `key`."""
    seen: list[str | None] = []
    for _ in range(times):
        await pilot.press(key)
        await drawn(pilot)
        seen.append(main.state.host)
    return seen


async def test_brackets_walk_the_hosts_in_the_order_the_host_list_shows() -> None:
    app = app_of(fleet_1024(130))
    async with app.run_test(size=(200, 50)) as pilot:
        main = await settled(pilot)
        assert main.state.host is None  # "All hosts"
        assert await steps(pilot, main, "right_square_bracket", 4) == PROBLEMS_FIRST
        # After the hosts with problems: the first healthy host (rack01's, folded into its line).
        assert await steps(pilot, main, "right_square_bracket", 1) == ["gpu0001"]
        assert main.host_list.cursor_group == "rack01"  # the list's cursor on the line it is in
        assert await steps(pilot, main, "left_square_bracket", 5) == [*PROBLEMS_FIRST[::-1], None]
        # Back from "All hosts": the last host the list shows (rack03's gpu0129), not the config's last.
        assert await steps(pilot, main, "left_square_bracket", 1) == ["gpu0129"]


def title_of(main: MainScreen) -> str:
    return str(main.fleet_table.border_title)


async def test_the_fleet_title_says_the_order_the_table_is_sorted_in() -> None:
    app = app_of(fleet_1024(130))
    async with app.run_test(size=(200, 50)) as pilot:
        main = await settled(pilot)
        main.fleet_table.focus()
        assert "4 hosts with problems first" in title_of(main)
        await pilot.press("4")  # by memory, most first
        await drawn(pilot)
        assert main.fleet_table.sort_column == ("memory", True)
        title = title_of(main)
        assert "with problems first" not in title, title
        assert "sorted by Memory ▼ (7: problems first)" in title, title
        await pilot.press("4")  # again: reversed
        await drawn(pilot)
        assert "sorted by Memory ▲" in title_of(main)
        await pilot.press("7")  # by state: problems first again
        await drawn(pilot)
        title = title_of(main)
        assert "4 hosts with problems first" in title and "sorted by" not in title, title

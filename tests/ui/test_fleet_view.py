"""The fleet view at size (issue 21), driven through Pilot: problems first, healthy hosts folded by
group (and unfolded), the filter language in the filter box (and what it says when it cannot read
a filter), the users view, and idle holders: shown, selected with H, planned with x through the
confirmation dialog.

A generated fleet (tests/support/fleet1024.py), replayed: 130 hosts where the test needs no more (three
racks: two of 64, and one of two hosts where one has a problem, too few to fold), 1,024 where the
size is the point."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.plan import PlanScreen
from gputui.ui.screens.users import UsersScreen
from gputui.ui.widgets.fleet_table import split_row_key
from gputui.ui.widgets.host_list import GROUP
from tests.support.fleet1024 import IDLE, SLOW, GiB, app_of, fleet_1024, name, settled
from tests.support.pilot import redrawn, screen_text, wait_for


def keys(main: MainScreen) -> list[str]:
    table = main.fleet_table
    return [table.coordinate_to_cell_key((i, 0)).row_key.value or "" for i in range(table.row_count)]


async def test_problems_first_then_healthy_hosts_folded_one_line_per_group() -> None:
    app = app_of(fleet_1024(130))
    async with app.run_test(size=(200, 50)) as pilot:
        main = await settled(pilot)
        rows = keys(main)
        # In rank order: ghost memory, orphaned memory, the idle holder, throttling...
        assert rows[:4] == ["3@gpu0005", "1@gpu0064", "5@gpu0017", "6@gpu0130"]
        states = [main.fleet_table.rows_data()[k]["state"].plain for k in rows[:4]]
        assert states == ["ghost 20.0 GiB", "orphaned 2.1 GiB", "idle 15m", "throttle: hw-thermal"]
        # ... then the other GPUs of those hosts, then one line per group of healthy hosts: rack01
        # and rack02; rack03 has one healthy host (129), too few to fold: its GPUs are listed.
        groups = [k for k in rows if k.startswith(GROUP)]
        assert groups == [GROUP + "rack01", GROUP + "rack02"]
        assert rows[-2:] == groups
        assert {split_row_key(k)[0] for k in rows if not k.startswith(GROUP)} == {
            name(i) for i in (5, 17, 64, 129, 130)
        }
        line = main.fleet_table.get_cell(GROUP + "rack01", "host").plain
        assert line == "▸ rack01 · 61 hosts"  # 64 less the three with a problem
        text = screen_text(app)
        assert "4 hosts with problems first" in text and "125 healthy hosts folded" in text
        # The host list: the hosts with a problem first, then the groups' lines.
        host_rows = [
            main.host_list.coordinate_to_cell_key((i, 0)).row_key.value
            for i in range(main.host_list.row_count)
        ]
        assert host_rows[:5] == ["\x00all", name(5), name(64), name(17), name(130)]
        assert "\x00group:rack01" in host_rows and name(100) not in host_rows


async def test_enter_unfolds_a_group_and_minus_folds_it_again() -> None:
    app = app_of(fleet_1024(130))
    async with app.run_test(size=(200, 50)) as pilot:
        main = await settled(pilot)
        before = main.fleet_table.row_count
        assert main.fleet_table.move_to(GROUP + "rack02")
        main.fleet_table.focus()
        await pilot.press("enter")
        await redrawn(pilot)
        # rack02's 64 hosts, 8 GPUs each, in place of its line; the cursor on its first host.
        assert main.fleet_table.row_count == before - 1 + 64 * 8
        assert GROUP + "rack02" not in keys(main)
        assert main.fleet_table.cursor_gpu == (name(65), 0)
        # The host list unfolds with it.
        assert name(65) in [
            main.host_list.coordinate_to_cell_key((i, 0)).row_key.value
            for i in range(main.host_list.row_count)
        ]
        await pilot.press("minus")
        await redrawn(pilot)
        assert main.fleet_table.row_count == before
        assert main.fleet_table.cursor_key == GROUP + "rack02"


async def test_the_filter_language_in_the_filter_box() -> None:
    app = app_of(fleet_1024(130))
    async with app.run_test(size=(200, 50)) as pilot:
        main = await settled(pilot)
        main.fleet_table.focus()
        await pilot.press("slash", *"state:idle-held")
        await redrawn(pilot)
        assert keys(main) == ["5@gpu0017"]  # a filter lists what it finds, folded or not
        assert "filter: state:idle-held" in screen_text(app)
        # Terms are ANDed; a group, a host glob, a memory comparison; - negates.
        bar = app.query_one("#filter", Input)
        for text, expected in (
            ("group:rack03", {name(129), name(130)}),
            ("host:gpu012? -host:gpu0120", {name(i) for i in range(121, 130)}),
        ):
            bar.value = text
            await redrawn(pilot)
            assert {split_row_key(k)[0] for k in keys(main)} == expected, text
        bar.value = "mem>100G group:rack03"
        await redrawn(pilot)
        assert set(keys(main)) == {"3@gpu0129", "4@gpu0129", "3@gpu0130"}
        # A filter that cannot be read says why beside the box, and the table keeps the last one.
        bar.value = "group:rack03"
        await redrawn(pilot)
        shown = keys(main)
        bar.value = "usr:grace"
        await redrawn(pilot)
        assert "unknown field 'usr': did you mean user:?" in screen_text(app)
        assert keys(main) == shown
        bar.value = "user:grace"
        await redrawn(pilot)
        assert "unknown field" not in screen_text(app)
        assert all(
            any(p.user == "grace" for p in app.fleet.view(h).sample.on_gpu(g))  # type: ignore[union-attr]
            for h, g in map(split_row_key, keys(main))
        )
        await pilot.press("escape")  # clears it: the problems and the folded groups again
        await redrawn(pilot)
        assert GROUP + "rack01" in keys(main)


async def test_the_process_filter_speaks_the_language_too() -> None:
    app = app_of(fleet_1024(130))
    async with app.run_test(size=(200, 50)) as pilot:
        main = await settled(pilot)
        main.select_host(name(17))
        await redrawn(pilot)
        main.proc_table.focus()
        await pilot.press("slash", *"state:idle-held")
        await redrawn(pilot)
        assert [p.pid for p in main.proc_table.in_view] == [10005]
        app.query_one("#filter", Input).value = "-state:idle-held mem>100G"
        await redrawn(pilot)
        assert {p.pid for p in main.proc_table.in_view} and all(
            p.gpu_bytes > 100 * GiB and p.pid != 10005 for p in main.proc_table.in_view
        )


async def test_an_idle_holder_is_flagged_and_i_selects_it_for_the_plan_dialog() -> None:
    app = app_of(fleet_1024(130))
    app.fresh_timeout = 0  # plan on the latest sample: the replay answers no full scan
    async with app.run_test(size=(200, 50)) as pilot:
        main = await settled(pilot)
        main.select_host(name(17))
        await redrawn(pilot)
        row = main.proc_table.rows_data()["10005:5005"]
        assert row["sm"].plain == "idle"
        assert row["command"].plain.startswith("idle 15m · python notebook_kernel.py")
        main.select_host(None)
        await redrawn(pilot)
        main.fleet_table.focus()
        await pilot.press("H")  # every idle holder of the fleet
        await redrawn(pilot)
        assert main.state.selection.hosts() == [name(17)]
        assert main.state.selection.keys(name(17)) == {(10005, 5005)}
        assert any("Selected 1 idle holder on 1 host" in n.message for n in app._notifications)
        main.select_host(name(17))
        await redrawn(pilot)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen), 60)
        screen = app.screen
        assert isinstance(screen, PlanScreen)
        [plan] = screen.plans
        assert plan.host == name(17) and [t.pid for t in plan.targets] == [10005]
        await pilot.press("escape")  # cancelled: nothing signalled
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        await pilot.press("H")  # again: unselected
        await redrawn(pilot)
        assert not main.state.selection


async def test_the_users_view_and_enter_filters_the_fleet_to_a_user() -> None:
    app = app_of(fleet_1024(130))
    async with app.run_test(size=(160, 40)) as pilot:
        main = await settled(pilot)
        await pilot.press("U")
        await wait_for(pilot, lambda: isinstance(app.screen, UsersScreen))
        await redrawn(pilot)
        screen = app.screen
        assert isinstance(screen, UsersScreen)
        table = screen.table
        await wait_for(pilot, lambda: table.row_count > 0)
        users = [table.coordinate_to_cell_key((i, 0)).row_key.value for i in range(table.row_count)]
        assert sorted(users) == ["alice", "bob", "carol", "dave", "erin", "frank", "grace"]
        text = screen_text(app)
        assert "7 users on 130 live hosts" in text and "1 idle holder" in text
        grace = table.rows_data()["grace"]
        assert grace["idle"].plain.startswith("1 · ") and "longest 15m" in grace["idle"].plain
        gpus = sum(int(table.rows_data()[u]["gpus"].plain) for u in users)
        assert gpus == sum(1 for v in app.fleet.hosts for p in v.sample.processes if p.kind == "user")  # type: ignore[union-attr]
        assert table.move_to("grace")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        await redrawn(pilot)
        assert main.state.fleet.text == "user:grace"
        assert keys(main) and all(
            any(p.user == "grace" for p in app.fleet.view(h).sample.on_gpu(g))  # type: ignore[union-attr]
            for h, g in map(split_row_key, keys(main))
        )


@pytest.mark.timeout(SLOW)
async def test_a_thousand_hosts_one_screen() -> None:
    """1,024 hosts: every one played, the problems on top, the rest in sixteen racks' lines."""
    fleet = fleet_1024()
    app = app_of(fleet)
    async with app.run_test(size=(200, 50)) as pilot:
        main = await settled(pilot)
        rows = keys(main)
        assert [split_row_key(k)[0] for k in rows[:3]] == [name(300), name(301), name(777)]  # down
        assert [main.fleet_table.rows_data()[k]["state"].plain for k in rows[:3]] == ["down"] * 3
        assert len([k for k in rows if k.startswith(GROUP)]) == 16
        idle = [k for k in rows if main.fleet_table.rows_data()[k]["state"].plain.startswith("idle 15m")]
        assert [split_row_key(k) for k in idle] == [(name(i), 5) for i in IDLE]
        assert main.fleet_table.row_count < 200  # not 8,192
        await pilot.press("H")
        await redrawn(pilot)
        assert sorted(main.state.selection.hosts()) == [name(i) for i in IDLE]


async def test_the_palette_offers_the_users_view_and_the_idle_holders() -> None:
    from textual.command import CommandPalette

    from gputui.ui.commands import GpuTuiCommands

    app = app_of(fleet_1024(130))
    async with app.run_test(size=(160, 40)) as pilot:
        main = await settled(pilot)
        titles = [e.title for e in GpuTuiCommands(app.screen).entries()]
        assert "Users: GPUs and memory per user" in titles and "Select the idle holders" in titles
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"select the idle holders")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        await redrawn(pilot)
        assert main.state.selection.hosts() == [name(IDLE[0])]

"""A host that goes down keeps its last numbers, but they are not live (issue 19, item 3).

demo-b plays its recording, then its link breaks and every retry is refused: the fleet keeps its
last sample. Before, its GPU table still showed 96 % and 118 GiB in full colour, the header counted
its GPUs as busy and the host list said 4/4 busy while it said down. Now everything from that
sample is dimmed, says how old it is ("last seen 2m ago"), and is counted neither busy nor free.
"""

from __future__ import annotations

from gputui.fleet.session import CONNECTING
from gputui.ui.widgets.fleet_table import fleet_row_key
from gputui.ui.widgets.table import KeyedTable
from tests.support.pilot import redrawn, screen_text
from tests.support.scenes import DOWN_FOR, SCENES, went_down


def colours(table: KeyedTable, index: int) -> set[str]:
    """The colours of every visible character of the drawn row `index` (but the fleet's State: it
    says "down" in its own colour)."""
    console = table.app.console
    found = set()
    for key, cell in zip(table.columns, table.get_row_at(index), strict=True):
        if key.value == "state" and table.id == "fleet":
            continue
        for offset, char in enumerate(cell.plain):
            if not char.isspace():
                style = cell.get_style_at_offset(console, offset)
                found.add(str(style.color))
    return found


def dimmed(table: KeyedTable, index: int) -> bool:
    name = "proc--stale" if "proc--stale" in table.COMPONENT_CLASSES else "gpu--stale"
    muted = table.style_of(name)
    return colours(table, index) == {str(muted.color)}


def row_index(table: KeyedTable, key: str) -> int:
    return table.get_row_index(key)


async def test_a_down_host_is_dimmed_aged_and_not_counted() -> None:
    scene = SCENES["down"]
    app = scene.build("gputui-dark")
    async with app.run_test(size=(120, 36)) as pilot:
        await went_down(pilot)
        main = app._main
        assert main is not None
        b = app.fleet.view("demo-b").sample
        a = app.fleet.view("demo-a").sample
        assert a is not None and b is not None and len(b.gpus) == 8
        busy_a = sum(1 for g in a.gpus if not a.gpu_is_free(g))
        free_a = len(a.gpus) - busy_a
        assert any(b.gpu_is_free(g) for g in b.gpus)  # its last sample had a free GPU: not free now

        # The header and the fleet title count demo-b's GPUs neither busy nor free.
        header = screen_text(app).splitlines()[0]
        assert f"{len(a.gpus) + 8} GPUs: {free_a} free, {busy_a} busy, 8 not live" in header, header
        assert f"{free_a} free" in main.fleet_table.border_title
        assert "8 not live" in main.fleet_table.border_title

        # The host list: demo-b's GPUs are not known busy; "All hosts" counts the live ones.
        hosts = main.host_list
        assert hosts.rows_data()["demo-b"]["gpus"].plain == "?/8"
        assert hosts.rows_data()["\x00all"]["gpus"].plain == f"{busy_a}/{len(a.gpus)}"

        # The fleet table: demo-b's rows dimmed, with their age; no free mark; demo-a's not dimmed.
        fleet = main.fleet_table
        for gpu in b.gpus:
            key = fleet_row_key("demo-b", gpu.index)
            assert dimmed(fleet, row_index(fleet, key)), key
            assert "last seen 2m ago" in fleet.rows_data()[key]["holders"].plain
            # Its worst problem (issue 21): down, and why (then how many more it has).
            assert fleet.rows_data()[key]["state"].plain.startswith("down: unreachable")
        assert not dimmed(fleet, row_index(fleet, fleet_row_key("demo-a", 0)))
        await pilot.press("o")  # free only: none of demo-b's
        await pilot.pause()
        assert not any(k.endswith("@demo-b") for k in fleet.rows_data())
        await pilot.press("o")
        await pilot.pause()

        # Its own view: the GPU table and the processes dimmed, the titles and the header say how old.
        main.select_host("demo-b")
        await pilot.pause()
        for _ in range(3):
            await pilot.pause()
        gpus = main.gpu_table
        for index in range(gpus.row_count):
            assert dimmed(gpus, index), gpus.get_row_at(index)
        holders = " ".join(row["holders"].plain for row in gpus.rows_data().values())
        assert "✓ free" not in holders and "was free" in holders
        assert "last seen 2m ago" in gpus.border_title
        procs = main.proc_table
        assert procs.row_count
        for index in range(procs.row_count):
            assert dimmed(procs, index), procs.get_row_at(index)
        assert "last seen 2m ago" in procs.border_title
        header = screen_text(app).splitlines()[0]
        assert "last seen 2m ago" in header and "free" not in header, header

        # A live host's view is not dimmed.
        main.select_host("demo-a")
        for _ in range(3):
            await pilot.pause()
        assert not dimmed(main.gpu_table, 1)
        assert "last seen" not in main.gpu_table.border_title
        assert DOWN_FOR > 120

        # Between two attempts its link says "connecting" (and how it backs off), as its session
        # sets it (gputui/fleet/session.py HostSession.run): the lists keep it down rather than flicker, and
        # the header's counts say the same. Before, the header of a fleet whose every host was
        # unreachable said "43 connecting" over 43 rows of "down".
        main.select_host(None)
        await redrawn(pilot)
        assert "✕ 1 down" in screen_text(app).splitlines()[0]
        session = app.fleet.sessions["demo-b"]
        session._set(CONNECTING)
        session._phase("backing off", "unreachable; next try in 3.1 s")
        assert app.fleet.view("demo-b").last_down is not None
        main.refresh_data({"demo-b"}, ages=True)
        await redrawn(pilot)
        header = screen_text(app).splitlines()[0]
        assert "✕ 1 down" in header and "connecting" not in header, header
        assert main.host_list.rows_data()["demo-b"]["age"].plain == "down"

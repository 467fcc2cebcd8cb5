"""Pilot tests on replayed recordings of the real sim probe (tests/fixtures/*.jsonl)."""

from __future__ import annotations

from typing import Any

from rich.text import Text

import gputui.fleet.session as session_mod
from gputui.fleet.fleet import Fleet
from gputui.fleet.session import CONNECTING
from gputui.kill.operate import Request
from gputui.recording.player import ReplayLink
from gputui.ui import make_app
from gputui.ui.fmt import key_name
from gputui.ui.screens.help import HelpScreen
from gputui.ui.screens.main import MainScreen
from gputui.ui.widgets.gpu_table import GpuTable
from gputui.ui.widgets.host_list import HostList
from gputui.ui.widgets.proc_table import ProcTable, proc_row_key
from tests.support.apps import FROZEN, QUIET, Unreachable, build_app, recording
from tests.support.pilot import WAIT, main_of, redrawn, screen_text, settle, wait_for


def proc_keys(main: MainScreen) -> list[str]:
    table = main.proc_table
    return [table.coordinate_to_cell_key((i, 0)).row_key.value for i in range(table.row_count)]


async def open_host(pilot: Any, host: str = "demo-a") -> MainScreen:
    main = main_of(pilot.app)
    main.select_host(host)
    main.gpu_table.focus()
    await redrawn(pilot)
    return main


async def test_starts_on_the_fleet_and_drills_into_a_host() -> None:
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = main_of(app)
        assert main.state.host is None
        assert main.fleet_table.display and not main.gpu_table.display
        assert main.fleet_table.row_count == 12  # demo-a's 4 GPUs, demo-b's 8
        assert app.focused is main.fleet_table
        text = screen_text(app)
        assert "All GPUs · 12 on 2 hosts, 5 free" in text
        assert "2 live" in text

        # Problems first (issue 21): each host's ghost on GPU 2, then the other GPUs by host.
        keys = [main.fleet_table.coordinate_to_cell_key((i, 0)).row_key.value for i in range(4)]
        assert keys == ["2@demo-a", "2@demo-b", "0@demo-a", "1@demo-a"]
        await pilot.press("down", "down", "down", "enter")  # into the host of the GPU under the cursor
        await redrawn(pilot)
        assert main.state.host == "demo-a"
        assert app.focused is main.gpu_table
        assert main.gpu_table.cursor_gpu == 1  # the GPU the fleet cursor was on
        assert "Processes · demo-a · GPU 1" in screen_text(app)


async def test_keyboard_navigation() -> None:
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = main_of(app)
        await pilot.press("shift+tab")  # the fleet table -> the host list
        assert app.focused is main.host_list
        await pilot.press("j")
        await redrawn(pilot)
        assert main.state.host == "demo-a"
        await pilot.press("down")
        await redrawn(pilot)
        assert main.state.host == "demo-b"
        await pilot.press("k", "k")
        await redrawn(pilot)
        assert main.state.host is None
        await pilot.press("]", "]")
        assert main.state.host == "demo-b"
        await pilot.press("[")
        assert main.state.host == "demo-a"

        await pilot.press("tab")  # the host list -> the GPU table
        assert app.focused is main.gpu_table
        assert main.gpu_table.cursor_key == "all"
        assert "Processes · demo-a · all GPUs" in screen_text(app)
        await pilot.press("j", "j", "j")  # all -> GPU 0 -> 1 -> 2
        await redrawn(pilot)
        assert main.gpu_table.cursor_gpu == 2
        assert "Processes · demo-a · GPU 2" in screen_text(app)
        kinds = {main.proc_table.get_row(key)[3].plain for key in proc_keys(main)}
        assert kinds == {"■ user", "◇ ghost", "▲ hidden"}  # the notebook, the ghost and its holder

        await pilot.press("enter")  # the GPU table -> its processes
        assert app.focused is main.proc_table
        await pilot.press("tab")
        assert app.focused is main.host_list  # round again (the log pane is hidden)

        # The mouse works too: a click on demo-b in the host list opens it.
        await pilot.click(main.host_list, offset=(4, 4))
        await redrawn(pilot)
        assert main.state.host == "demo-b"


async def test_filter_by_command_or_user() -> None:
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = await open_host(pilot)
        all_rows = main.proc_table.row_count
        assert all_rows == 14
        main.proc_table.focus()
        await pilot.press("slash")
        assert main.filters.row.display and app.focused is main.filters.bar
        await pilot.press(*"vllm")
        await redrawn(pilot)
        assert main.proc_table.row_count == 1
        assert "filter: vllm" in main.proc_table.border_title
        await pilot.press("enter")  # keep the filter, back to the table
        assert not main.filters.row.display and app.focused is main.proc_table
        assert main.proc_table.row_count == 1

        await pilot.press("slash", "ctrl+u", *"mallory")  # by user
        assert main.proc_table.row_count == 1
        assert proc_keys(main) == ["66666:4242"]
        await pilot.press("escape")  # clears the filter and closes the box
        assert main.proc_table.row_count == all_rows
        assert not main.filters.row.display


async def test_sort_by_a_key_per_column() -> None:
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = await open_host(pilot)
        table = main.proc_table
        table.focus()

        def pids() -> list[int]:
            return [int(k.split(":")[0]) for k in proc_keys(main)]

        mems = [table.get_cell(k, "mem").sort_key for k in proc_keys(main)]
        assert mems == sorted(mems, reverse=True)  # by GPU memory to start with
        assert table.sort_column == ("mem", True)

        await pilot.press("1")  # column 1: PID
        assert pids() == sorted(pids())
        assert table.columns[next(iter(c for c in table.columns if c.value == "pid"))].label.plain == "▲PID"
        await pilot.press("1")
        assert pids() == sorted(pids(), reverse=True)
        cursor = table.cursor_key
        await pilot.press("3")  # column 3: kind
        kinds = [table.get_cell(k, "kind").sort_key for k in proc_keys(main)]
        assert kinds == sorted(kinds)
        assert table.cursor_key == cursor  # the cursor stays on its process

        # A click on a column header sorts by it too.
        await pilot.click(table, offset=(table.size.width - 10, 1))  # y=1: under the border
        assert table.sort_column is not None and table.sort_column[0] == "command"


async def test_help_lists_every_binding() -> None:
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.query_one("#help-body").plain(200)  # wide: each binding on one line
        lines = text.splitlines()
        bindings = [*MainScreen.BINDINGS, *ProcTable.BINDINGS, *HostList.BINDINGS, *GpuTable.BINDINGS]
        for binding in bindings:
            described = binding.tooltip or binding.description  # type: ignore[union-attr]
            key = key_name(binding.key_display or app.get_key_display(binding))  # type: ignore[union-attr,arg-type]
            assert any(key in line and described.lower() in line.lower() for line in lines), described
        for needle in ("1-9", "select or unselect", "ctrl+p", "ghost", "hidden", "zombie", "mouse"):
            assert needle in text
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_read_only_offers_no_kill_keys() -> None:
    app = build_app(read_only=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = await open_host(pilot)
        requested: list[Request] = []
        app.request_plans = lambda requests, view=None: requested.extend(requests)  # type: ignore[method-assign]
        text = screen_text(app)
        assert "READ-ONLY" in text
        assert "Free GPU" not in text and "Select" not in text
        main.proc_table.focus()
        await pilot.press("f", "F", "x", "space", "enter")
        await pilot.pause()
        assert requested == []
        await pilot.press("question_mark")
        help_text = app.screen.query_one("#help-body").plain()
        assert "free the GPU" not in help_text and "Read-only" in help_text


async def test_kill_keys_post_plan_requests() -> None:
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = await open_host(pilot)
        requested: list[Request] = []
        app.request_plans = lambda requests, view=None: requested.extend(requests)  # type: ignore[method-assign]
        assert "Free GPU" in screen_text(app)
        await pilot.press("j", "j", "j", "f")  # GPU 2
        await pilot.press("F")
        main.proc_table.focus()
        await pilot.press("space", "space", "x")  # select the first two processes, plan
        await pilot.pause()
        assert [(r.host, r.scope, r.gpus) for r in requested] == [
            ("demo-a", "gpus", (2,)),
            ("demo-a", "host", (0, 1, 2, 3)),
            ("demo-a", "processes", ()),
        ]
        assert len(requested[2].processes) == 2
        assert "2 selected" in main.proc_table.border_title


async def test_refresh_keeps_cursor_and_scroll_position() -> None:
    """Samples keep coming (a looping replay); the cursor stays on its process, the table is never
    cleared, the scroll offset does not move."""
    app = build_app(loop=True, rate=40)
    async with app.run_test(size=(150, 22)) as pilot:  # wide enough for the Elapsed column
        await wait_for(pilot, lambda: all(v.sample is not None for v in app.fleet.hosts))
        main = await open_host(pilot)
        table = main.proc_table
        table.focus()
        await wait_for(pilot, lambda: table.row_count >= 10)
        clears: list[bool] = []
        original_clear = table.clear
        table.clear = lambda columns=False: (clears.append(columns), original_clear(columns))[1]  # type: ignore[method-assign]

        sample = app.fleet.view("demo-a").sample
        assert sample is not None
        target = proc_row_key(next(p for p in sample.processes if p.kind == "hidden"))
        assert table.move_to(target, scroll=True)
        # The cursor away from the view's edges: a process that comes above it (the replay loops)
        # pushes it down a row, and at the bottom edge the view rightly follows it
        # (tests/ui/test_table_view.py).
        in_view = table.scrollable_content_region.height - table.header_height
        table.scroll_to(y=table.cursor_row - in_view // 2, animate=False, immediate=True)
        await pilot.pause()
        scroll = table.scroll_y
        assert scroll > 0
        assert scroll < table.cursor_row < scroll + in_view - 1  # a row of room on either side
        seq = app.fleet.view("demo-a").sample.seq
        updates = table.changes
        widths = dict(table._content)
        await wait_for(pilot, lambda: app.fleet.view("demo-a").sample.seq >= seq + 40, timeout=WAIT)
        await redrawn(pilot)
        assert table.changes > updates  # it did redraw
        assert table.cursor_key == target
        assert table.scroll_y == scroll
        assert False not in clears  # a refresh never clears the rows
        # The columns are laid out again only when a cell came wider than its column had been (a
        # sample the replay had not drawn before this test looked: under load, redraws skip some).
        if clears:
            assert any(width > widths.get(key, 0) for key, width in table._content.items()), clears


async def test_nothing_is_redrawn_while_a_modal_is_open() -> None:
    app = build_app(loop=True, rate=40)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: all(v.sample is not None for v in app.fleet.hosts))
        main = await open_host(pilot)
        await pilot.press("question_mark")
        seq = app.fleet.view("demo-a").sample.seq
        counts = (main.gpu_table.changes, main.proc_table.changes, main.fleet_table.changes)
        await wait_for(pilot, lambda: app.fleet.view("demo-a").sample.seq >= seq + 20, timeout=WAIT)
        await pilot.pause(0.3)
        assert (
            main.gpu_table.changes,
            main.proc_table.changes,
            main.fleet_table.changes,
        ) == counts
        assert "demo-a" in app._changed  # kept for later
        await pilot.press("escape")
        await redrawn(pilot)
        assert main.gpu_table.changes > counts[0]


async def test_markup_and_control_characters_render_literally() -> None:
    app = build_app()
    async with app.run_test(size=(200, 36)) as pilot:  # the whole command line in view
        await settle(pilot)
        main = await open_host(pilot)
        text = screen_text(app)
        assert "[bold red]x --title=\\e[31mred\\e[0m ding\\x07" in text
        assert "[i]mallory " in text  # the user column grows to the longest name where there is room
        assert "\x1b" not in text and "\x07" not in text
        row = main.proc_table.rows_data()["66666:4242"]  # the cells as made, before the column cuts them
        assert row["user"].plain == "[i]mallory"
        command = row["command"]
        assert isinstance(command, Text)
        assert command.plain.startswith("[bold red]x")
        assert not command.spans  # no style came from the name


async def test_theme_switch_restyles_live() -> None:
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = await open_host(pilot)
        assert app.theme == "gputui-dark"

        def user_color() -> str:
            kind = main.proc_table.get_row(proc_keys(main)[0])[3]
            return kind.style.color.name  # type: ignore[union-attr]

        assert user_color().lower() == "#61afef"
        await pilot.press("ctrl+t")  # T plans SIGTERM, as in nvitop
        await redrawn(pilot)
        assert app.theme == "gputui-light"
        assert user_color().lower() == "#1c65b3"

        # The command palette offers every theme, Textual's too; gputui's variables fall back.
        await pilot.press("ctrl+p", *"theme")
        await pilot.pause(0.5)
        await pilot.press("enter")  # "Theme: change the current theme" opens the theme picker
        await pilot.pause(0.3)
        await pilot.press(*"gputui-contrast")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await redrawn(pilot)
        assert app.theme == "gputui-contrast"
        assert user_color().lower() == "#56b4e9"
        app.theme = "nord"
        await redrawn(pilot)
        assert user_color().lower() == app.theme_variables["text-primary"].lower()


async def test_no_driver_says_so_and_points_at_the_demo() -> None:
    hello = dict(recording("demo-a")[0])
    hello["host"] = dict(hello["host"], driver_version=None, nvml_version=None, cuda_driver_version=None)
    hello["error"] = {"code": "no-driver", "message": "NVML Shared Library Not Found"}
    sample = dict(recording("demo-a")[1], gpus=[], processes=[])
    fleet = Fleet()
    fleet.add("local", lambda: ReplayLink([hello, sample]), interval=QUIET)
    app = make_app(fleet, interval=QUIET, clock=lambda: FROZEN)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: fleet.view("local").sample is not None)
        await redrawn(pilot)
        text = screen_text(app)
        assert "local has no NVIDIA driver" in text
        assert "NVML Shared Library Not Found" in text
        assert "gputui --demo" in text
        assert "no NVIDIA driver" in text.splitlines()[0]  # the status line


async def test_down_host_shows_the_reason_everywhere(monkeypatch: Any) -> None:
    # The session backs off for the whole test after its first failure: the test sets the state of
    # an attempt itself below, and a real retry finishing meanwhile (on a busy machine) would undo it.
    monkeypatch.setattr(session_mod, "BACKOFF_FIRST", 3600.0)
    monkeypatch.setattr(session_mod, "BACKOFF_CAP", 3600.0)
    fleet = Fleet()
    fleet.add("demo-a", lambda: ReplayLink(recording("demo-a")), interval=QUIET)
    fleet.add("gpu-[9]", Unreachable, interval=QUIET)  # brackets: shown literally, not as markup
    app = make_app(fleet, interval=QUIET, clock=lambda: FROZEN)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: fleet.view("gpu-[9]").status == "down")
        await wait_for(pilot, lambda: fleet.view("demo-a").sample is not None)
        await redrawn(pilot)
        main = main_of(app)
        text = screen_text(app)
        assert "✕ gpu-[9]" in text and "down" in text  # host list
        assert "unreachable" in text  # the fleet table's row for a host without GPUs
        assert "1 down" in text.splitlines()[0]
        main.select_host("gpu-[9]")
        await redrawn(pilot)
        text = screen_text(app)
        assert "down: unreachable (ssh: connect to host gpu-9 port 22: Connection refused)" in text
        assert "gputui keeps retrying" in text
        assert "gpu-[9] is down" in text
        # Between two attempts (as its session sets it): still down, and it says it is trying now,
        # rather than flicker to a "Connecting to gpu-[9]…" that forgets why it was down.
        session = fleet.sessions["gpu-[9]"]
        session._set(CONNECTING)
        session._phase("connecting")
        await redrawn(pilot)
        text = screen_text(app)
        assert "gpu-[9] is down: unreachable" in text and "Connecting to" not in text, text
        assert "trying again now (connecting)" in text
        assert "✕ gpu-[9]  down: unreachable, trying again: connecting…" in text.splitlines()[0]


async def test_fleet_free_only_and_sort() -> None:
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = main_of(app)
        await pilot.press("o")
        await redrawn(pilot)
        assert main.fleet_table.row_count == 5  # demo-b's GPUs 3 to 7
        assert main.fleet_table.cursor_gpu == ("demo-b", 3)
        await pilot.press("o")
        await redrawn(pilot)
        assert main.fleet_table.row_count == 12
        await pilot.press("4")  # the fourth sortable column, at every width: memory (largest first)
        keys = [main.fleet_table.coordinate_to_cell_key((i, 0)).row_key for i in range(12)]
        used = [main.fleet_table.get_cell(k, "memory").sort_key for k in keys]
        assert used == sorted(used, reverse=True)
        await pilot.press("slash", *"demo-b", "enter")
        await redrawn(pilot)
        assert main.fleet_table.row_count == 8


async def test_narrow_terminal_collapses_columns_and_host_list() -> None:
    app = build_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        main = await open_host(pilot)
        assert not main.host_list.display
        shown = {c.value for c in main.gpu_table.columns}
        assert {"gpu", "memory", "util", "holders"} <= shown
        assert "mem_hist" not in shown and "name" not in shown
        assert {"pid", "kind", "command"} <= {c.value for c in main.proc_table.columns}
        await pilot.press("b")
        assert main.host_list.display and app.focused is main.host_list
        await pilot.resize_terminal(160, 40)
        await pilot.pause()
        assert "power" in {c.value for c in main.gpu_table.columns}


async def test_action_log_shows_events_with_milliseconds() -> None:
    records = list(recording("demo-a"))
    event = {
        "type": "event",
        "v": 1,
        "plan": "a1b2c3d4e5f6",
        "time": FROZEN + 0.125,
        "stage": "signal",
        "pid": 10678,
        "start_time": 1,
        "gpu": None,
        "signal": "SIGTERM",
        "result": "sent",
        "message": "SIGTERM -> 10678 [b]python\x1b",
        "data": {},
    }
    app = build_app(("demo-a",), records={"demo-a": [*records, event]})
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = main_of(app)
        assert not main.action_log.display
        await pilot.press("l")
        await wait_for(pilot, lambda: len(main.action_log.entries) == 1)
        await redrawn(pilot)
        assert main.action_log.display
        await wait_for(pilot, lambda: ".125 demo-a" in screen_text(app))  # its lines drawn, a layout later
        assert "SIGTERM -> 10678 [b]python\\e" in screen_text(app)
        main.action_log.set_filter("nothing like it")
        await wait_for(pilot, lambda: "SIGTERM" not in screen_text(app))


def test_fixture_has_the_hostile_process() -> None:
    last = [r for r in recording("demo-a") if r["type"] == "sample"][-1]
    hostile = next(p for p in last["processes"] if p["pid"] == 66666)
    assert hostile["name"] == "[bold red]x"
    assert "\x1b" in hostile["command"][1] and "\x07" in hostile["command"][2]

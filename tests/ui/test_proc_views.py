"""The process table's views, as htop and nvitop users expect them: the tree (t, folding with - and
+), the process detail (d, copying with c and C), tagging a user's processes (u), following one (.).

Processes are found through the app's state (by kind, user, command), never by a recorded PID: the
recordings are re-recorded from the sim probe, with new PIDs.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from typing import Any

import pytest

from gputui.model import Proc, Sample
from gputui.model.textsafe import printable
from gputui.recording.player import ReplayLink
from gputui.text.units import fmt_mib
from gputui.ui import GpuTuiApp
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.proc_detail import ProcDetailScreen
from gputui.ui.widgets.proc_table import CONTEXT, ProcTable, proc_row_key
from tests.support.apps import build_app, recording
from tests.support.pilot import procs_of, redrawn, sample_of, screen_text, wait_for
from tests.support.scenes import HOSTILE_PID, family_app, launched


def row_keys(table: ProcTable) -> list[str]:
    return [table.coordinate_to_cell_key((i, 0)).row_key.value for i in range(table.row_count)]


def command_of(table: ProcTable, key: str) -> str:
    return table.rows_data()[key]["command"].plain


def title_of(main: MainScreen) -> str:
    return str(main.proc_table.border_title)


def notes(app: GpuTuiApp) -> list[str]:
    return [n.message for n in app._notifications]


# -- the tree (t) ------------------------------------------------------------------------------


async def test_tree_draws_each_family_under_its_parent() -> None:
    app = family_app()
    async with app.run_test(size=(120, 36)) as pilot:
        main = await procs_of(pilot)
        table = main.proc_table
        listed = row_keys(table)
        assert not any(k.startswith(CONTEXT) for k in listed)

        await pilot.press("t")
        await redrawn(pilot)
        assert table.tree_mode and " · tree" in title_of(main)
        sample = sample_of(app)
        keys = row_keys(table)
        by_pid = {p.pid: proc_row_key(p) for p in sample.processes}
        # Every listed process is still there, and the sample's parent that joins them is added.
        assert set(listed) <= set(keys)
        context = [k for k in keys if k.startswith(CONTEXT)]
        assert [c.removeprefix(CONTEXT) for c in context] == [proc_row_key(p) for p in sample.parents]
        launcher = sample.parents[0]
        children = [p for p in sample.processes if p.ppid == launcher.pid]
        assert len(children) >= 2
        # A parent comes before its children, each child's command drawn on a branch.
        for proc in sample.processes:
            parent_key = by_pid.get(proc.ppid or -1) or (
                CONTEXT + proc_row_key(launcher) if proc.ppid == launcher.pid else None
            )
            if parent_key is None or proc.kind == "ghost" or (proc.kind == "hidden" and proc.links):
                continue  # a tied holder hangs under what it is tied to (below)
            assert keys.index(parent_key) < keys.index(by_pid[proc.pid]), proc
            assert command_of(table, by_pid[proc.pid]).lstrip("│ ")[:2] in ("├─", "└─"), proc
        # The ghost's hidden child hangs under the ghost, on a dashed edge (a tie, not a parenthood).
        ghost = next(p for p in sample.processes if p.kind == "ghost")
        child = next(p for p in sample.processes if p.kind == "hidden" and ghost.pid in p.links)
        assert keys.index(by_pid[child.pid]) == keys.index(by_pid[ghost.pid]) + 1
        assert "└╌" in command_of(table, by_pid[child.pid])
        # A context row is dimmed, cannot be selected and says what it is in the detail.
        assert table.move_to(context[0])
        assert table.cursor_proc_key is None
        await pilot.press("space")
        assert main.state.selection.count() == 0

        await pilot.press("t")  # a list again, in the sort's order
        await redrawn(pilot)
        assert not table.tree_mode and " · tree" not in title_of(main)
        assert row_keys(table) == listed


async def test_tree_folds_and_unfolds_a_family() -> None:
    app = family_app()
    async with app.run_test(size=(120, 36)) as pilot:
        main = await procs_of(pilot)
        table = main.proc_table
        await pilot.press("t")
        await redrawn(pilot)
        sample = sample_of(app)
        zombie = next(p for p in sample.processes if p.kind == "zombie")
        parent = next(p for p in sample.processes if p.pid == zombie.ppid)
        parent_key, zombie_key = proc_row_key(parent), proc_row_key(zombie)
        assert zombie_key in row_keys(table)

        assert table.move_to(zombie_key)
        await pilot.press("minus")  # on a leaf: its parent's family folds, the cursor goes there
        await redrawn(pilot)
        assert zombie_key not in row_keys(table)
        assert table.cursor_key == parent_key
        assert "1 folded · " in command_of(table, parent_key)

        await pilot.press("plus")
        await redrawn(pilot)
        assert zombie_key in row_keys(table)
        assert "folded" not in command_of(table, parent_key)

        # The launcher's family folds as one: every job under it leaves the rows.
        launcher = CONTEXT + proc_row_key(sample.parents[0])
        jobs = [proc_row_key(p) for p in launched(sample)]
        assert table.move_to(launcher)
        shown = table.row_count
        await pilot.press("minus")
        await redrawn(pilot)
        assert not set(jobs) & set(row_keys(table))
        # Every row that left is counted: the jobs and what hangs under them (a zombie, torchrun's ranks).
        assert shown - table.row_count > len(jobs)
        assert f"{shown - table.row_count} folded · " in command_of(table, launcher)
        # Folded families stay folded across refreshes.
        main.refresh_data({"demo-a"}, everything=True)
        await redrawn(pilot)
        assert not set(jobs) & set(row_keys(table))


async def test_tree_orders_siblings_by_the_sort_column() -> None:
    app = family_app()
    async with app.run_test(size=(120, 36)) as pilot:
        main = await procs_of(pilot)
        table = main.proc_table
        await pilot.press("t")
        await redrawn(pilot)
        sample = sample_of(app)
        jobs = {proc_row_key(p): p for p in launched(sample)}

        def siblings() -> list[Proc]:
            return [jobs[k] for k in row_keys(table) if k in jobs]

        mem = [p.gpu_bytes for p in siblings()]
        assert mem == sorted(mem, reverse=True)  # GPU mem, the default sort
        await pilot.press("1")  # by PID
        await redrawn(pilot)
        pids = [p.pid for p in siblings()]
        assert pids == sorted(pids)
        await pilot.press("1")  # again: reversed
        await redrawn(pilot)
        assert [p.pid for p in siblings()] == sorted(pids, reverse=True)


# -- the process detail (d) ---------------------------------------------------------------------


async def open_detail(pilot: Any, main: MainScreen, key: str) -> ProcDetailScreen:
    app: GpuTuiApp = pilot.app
    assert main.proc_table.move_to(key)
    await pilot.press("d")
    await wait_for(pilot, lambda: isinstance(app.screen, ProcDetailScreen) and app.screen.status != "reading")
    await pilot.pause()
    assert isinstance(app.screen, ProcDetailScreen)
    return app.screen


async def test_detail_shows_the_probe_answer_literally_and_copies() -> None:
    app = build_app()
    copied: list[str] = []
    app.copy_to_clipboard = copied.append  # type: ignore[method-assign]
    async with app.run_test(size=(120, 36)) as pilot:
        main = await procs_of(pilot)
        hostile = next(p for p in sample_of(app).processes if p.pid == HOSTILE_PID)
        answer = next(r for r in recording("demo-a") if r["type"] == "detail" and r["pid"] == HOSTILE_PID)
        screen = await open_detail(pilot, main, proc_row_key(hostile))
        assert screen.status == "read"
        # The probe was asked about that process, by PID and start time.
        link = app.fleet.sessions["demo-a"].link
        assert isinstance(link, ReplayLink)
        asked = [m for m in link.sent if m.get("type") == "detail"]
        assert (asked[-1]["pid"], asked[-1]["start_time"]) == hostile.key
        text = screen_text(app)
        # Markup shown as typed, control characters as escapes: nothing styled, nothing raw.
        assert "/home/[i]mallory/\\e]0;pwned\\x07run" in text
        assert "0::/[red]kubepods[/red]/pod-\\e[2Jx" in text
        assert "/usr/bin/[bold]python3" in text
        assert "[blink]evil\\e[5m" in text
        assert "\x1b" not in text and "\x07" not in text
        assert "[i]mallory (uid 6666)" in text
        assert f"Threads       {answer['threads']}" in text
        assert "fd 4    /dev/nvidia0" in text
        assert f"{HOSTILE_PID} ← 1 [b]init" in text
        assert "GPU 0: 1.0 GiB" in text

        await pilot.press("c")
        await pilot.press("C")
        await pilot.pause()
        # What is shown is what is copied: control characters as their escapes (pasted into a
        # terminal, a raw ESC would act), each argument quoted as a shell needs it.
        assert copied == [str(HOSTILE_PID), shlex.join(printable(a) for a in answer["command"])]
        assert "\x1b" not in copied[1]
        assert f"Copied PID {HOSTILE_PID}." in notes(app)
        assert any(n.startswith(f"Copied the command line of PID {HOSTILE_PID}") for n in notes(app))

        # Enter means nothing here (never a kill): no plan, no dialog, the detail stays.
        await pilot.press("enter", "space", "x")
        await pilot.pause()
        assert app.screen is screen
        assert not [m for m in link.sent if m.get("type") == "plan"] and main.state.selection.count() == 0

        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is main


async def test_an_answer_that_comes_as_the_detail_closes_draws_nothing() -> None:
    """Closing the detail prunes its body before the screen: an answer read meanwhile finds the
    screen still attached and its body gone (its styles cleared). Seen through a hub under load: the
    redraw raised KeyError, the worker failed and the app ended."""
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        main = await procs_of(pilot)
        proc = next(p for p in sample_of(app).processes if p.kind == "user" and p.start_time)
        screen = await open_detail(pilot, main, proc_row_key(proc))
        answer = asyncio.Event()

        async def late_detail(*_: Any, **__: Any) -> None:
            await answer.wait()

        app.fleet.request_detail = late_detail  # type: ignore[method-assign]
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.status == "reading")
        await screen.body.remove()  # what leaving does first
        assert screen.is_attached
        answer.set()
        await wait_for(pilot, lambda: screen.status == "no-answer")
        await pilot.pause()
        assert app.is_running and app.return_code is None
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is main)


async def test_detail_says_why_a_process_has_its_kind() -> None:
    """A ghost's hidden child: tied to the ghost by process group; with GPU utilization where the
    sample has it. A process the probe no longer finds is said to have exited, the sample kept."""
    records = list(recording("demo-a"))
    last = max(i for i, r in enumerate(records) if r["type"] == "sample")
    sample = records[last]
    ghost = next(p for p in sample["processes"] if p["kind"] == "ghost")
    child = next(p for p in sample["processes"] if p["kind"] == "hidden" and ghost["pid"] in p["links"])
    user = next(p for p in sample["processes"] if p["kind"] == "user" and len(p["gpus"]) > 1)
    shares = {str(g): {"sm": 40 + g, "mem": 10, "enc": 0, "dec": 0} for g in user["gpus"]}
    processes = [dict(p, gpu_util=shares) if p is user else p for p in sample["processes"]]
    records[last] = dict(sample, processes=processes, proc_util={"state": "on", "every": 5.0, "age": 1.0})
    app = build_app(records={"demo-a": records, "demo-b": list(recording("demo-b"))})
    async with app.run_test(size=(120, 40)) as pilot:
        main = await procs_of(pilot)
        key = f"{child['pid']}:{child['start_time']}"
        await open_detail(pilot, main, key)
        text = screen_text(app)
        assert f"hidden: same process group as {ghost['pid']} (ghost)" in text
        assert "has exited" in text or "Read from /proc" in text
        await pilot.press("escape")
        await pilot.pause()

        await open_detail(pilot, main, f"{user['pid']}:{user['start_time']}")
        text = screen_text(app)
        for g in user["gpus"]:
            assert f"GPU {g}: SM {40 + g}% · memory 10%" in text
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("m")  # memory in exact MiB: the detail too
        await open_detail(pilot, main, f"{user['pid']}:{user['start_time']}")
        text = screen_text(app)
        for g in user["gpus"]:
            assert f"GPU {g}: {fmt_mib(user['gpu_memory'][str(g)])}" in text


@pytest.mark.parametrize("name", ["mig", "mps"])
async def test_detail_names_mig_instances_and_mps_parts(name: str) -> None:
    host = {"mig": "m", "mps": "s"}[name]
    app = build_app((host,), records={host: list(recording(name))})
    async with app.run_test(size=(120, 40)) as pilot:
        main = await procs_of(pilot, host)
        sample = sample_of(app, host)
        if name == "mig":
            proc = next(p for p in sample.processes if p.mig)
            wanted = [f"({m.label})" for m in proc.mig]
        else:
            proc = next(p for p in sample.processes if p.mps == "server")
            wanted = ["MPS server", "stopping it ends them all"]
        await open_detail(pilot, main, proc_row_key(proc))
        text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", screen_text(app)).split())
        for words in wanted:
            assert words in text


async def test_detail_of_a_tree_context_row() -> None:
    app = family_app()
    async with app.run_test(size=(120, 36)) as pilot:
        main = await procs_of(pilot)
        await pilot.press("t")
        await redrawn(pilot)
        launcher = sample_of(app).parents[0]
        screen = await open_detail(pilot, main, CONTEXT + proc_row_key(launcher))
        assert screen.record == launcher
        assert "not a GPU process: the parent of GPU processes" in screen_text(app)


# -- tag by user (u) ----------------------------------------------------------------------------


def killable_of(sample: Sample, user: str | None) -> set[tuple[int, int | None]]:
    """What `u` tags among `user`'s processes: GPU users and hidden holders attributed to a GPU, none
    protected (an unattributed holder is the sweep's)."""
    return {
        p.key
        for p in sample.processes
        if p.user == user and p.kind in ("user", "hidden") and not p.protected and p.gpus
    }


async def test_tag_user_selects_every_process_of_that_user_then_unselects() -> None:
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        main = await procs_of(pilot)
        sample = sample_of(app)
        hostile = next(p for p in sample.processes if p.pid == HOSTILE_PID)
        mine = next(p for p in sample.processes if p.kind == "user" and p.user != hostile.user)
        theirs = killable_of(sample, mine.user)
        assert len(theirs) >= 2 and hostile.key not in theirs

        assert main.proc_table.move_to(proc_row_key(mine))
        await pilot.press("u")
        await redrawn(pilot)
        assert main.state.selection.keys("demo-a") == theirs
        assert f"{len(theirs)} selected" in title_of(main)
        assert any(n.startswith(f"Selected {len(theirs)} processes of {mine.user}") for n in notes(app))
        # Monitors and zombies of that user are left out, and the notification says so.
        left = [p for p in sample.processes if p.user == mine.user and p.key not in theirs]
        if left:
            assert any(f"({len(left)} more not tagged" in n for n in notes(app))

        # Another user's process adds to the selection; the plan takes them all.
        assert main.proc_table.move_to(proc_row_key(hostile))
        await pilot.press("u")
        await redrawn(pilot)
        assert main.state.selection.keys("demo-a") == theirs | {hostile.key}
        requests = main.procs.selected_requests()
        assert [r.host for r in requests] == ["demo-a"]
        assert {p.key for p in requests[0].processes} == theirs | {hostile.key}

        assert main.proc_table.move_to(proc_row_key(mine))
        await pilot.press("u")  # again on a fully tagged user: unselected
        await redrawn(pilot)
        assert main.state.selection.keys("demo-a") == {hostile.key}


async def test_tag_user_is_refused_read_only() -> None:
    app = build_app(read_only=True)
    async with app.run_test(size=(120, 36)) as pilot:
        main = await procs_of(pilot)
        mine = next(p for p in sample_of(app).processes if p.kind == "user")
        assert main.proc_table.move_to(proc_row_key(mine))
        await pilot.press("u")
        await redrawn(pilot)
        assert main.state.selection.count() == 0
        assert any("read-only" in n for n in notes(app))


# -- follow (.) ---------------------------------------------------------------------------------


async def test_follow_keeps_the_cursor_on_the_process_across_sorts_and_refreshes() -> None:
    app = family_app()
    async with app.run_test(size=(120, 36)) as pilot:
        main = await procs_of(pilot)
        table = main.proc_table
        sample = sample_of(app)
        # The process with the least GPU memory among the users: it moves when the sort changes.
        users = [p for p in sample.processes if p.kind == "user" and p.pid != HOSTILE_PID]
        target = min(users, key=lambda p: p.gpu_bytes)
        key = proc_row_key(target)
        assert table.move_to(key)
        await pilot.press("full_stop")
        await redrawn(pilot)
        assert main.state.following.key == key
        assert f"following PID {target.pid}" in title_of(main)

        for sort in ("1", "1", "5", "0"):  # PID, reversed, GPU mem, command
            await pilot.press(sort)
            await redrawn(pilot)
            assert table.cursor_key == key, sort
        positions = set()
        for sort in ("1", "1"):
            await pilot.press(sort)
            await redrawn(pilot)
            positions.add(row_keys(table).index(key))
            assert table.cursor_key == key
        assert len(positions) == 2  # it did move, and the cursor with it

        await pilot.press("t")  # into the tree and out: still on it
        await redrawn(pilot)
        assert table.cursor_key == key and main.state.following.key == key
        main.refresh_data({"demo-a"}, everything=True)
        await redrawn(pilot)
        assert table.cursor_key == key and f"following PID {target.pid}" in title_of(main)

        # Filtered out of the list, it is still followed; listed again, the cursor is back on it.
        main.set_filter("procs", "mallory")
        await redrawn(pilot)
        assert key not in row_keys(table) and table.row_count >= 1
        assert main.state.following.key == key
        assert f"following PID {target.pid} (not in this list)" in title_of(main)
        await pilot.press("up")  # a move elsewhere does not end it here
        main.set_filter("procs", "")
        await redrawn(pilot)
        assert table.cursor_key == key and main.state.following.key == key
        assert "(not in this list)" not in title_of(main)

        await pilot.press("full_stop")  # again: stop
        await redrawn(pilot)
        assert main.state.following.key is None
        assert "following" not in title_of(main)
        assert f"No longer following PID {target.pid}." in notes(app)


def in_view(table: ProcTable, key: str) -> bool:
    """Whether row `key` is on screen (the table's scroll offset against its height)."""
    row = row_keys(table).index(key)
    top = round(table.scroll_y)
    return top <= row < top + table.scrollable_content_region.height - 1  # the header row


async def test_follow_keeps_the_process_in_view_when_a_sample_moves_it() -> None:
    """Without following, a refresh leaves the scroll offset alone; following scrolls with the
    process, and ends, with a warning, when it exits."""
    app = build_app()
    async with app.run_test(size=(80, 24)) as pilot:
        main = await procs_of(pilot)
        table = main.proc_table
        session = app.fleet.sessions["demo-a"]
        last = max((r for r in recording("demo-a") if r["type"] == "sample"), key=lambda r: r["seq"])
        target = min(
            (p for p in last["processes"] if p["kind"] == "user" and p["pid"] != HOSTILE_PID),
            key=lambda p: sum(p["gpu_memory"].values()),
        )
        key = f"{target['pid']}:{target['start_time']}"
        await pilot.press("G")  # the last row, scrolled there
        assert table.move_to(key, scroll=True)
        await redrawn(pilot)
        assert in_view(table, key) and table.scroll_y > 0
        await pilot.press("full_stop")
        await redrawn(pilot)

        def grown(seq: int, followed: dict[str, Any] | None) -> dict[str, Any]:
            """The last sample again, the followed process holding the most memory (or gone)."""
            processes = [p for p in last["processes"] if p is not target]
            if followed is not None:
                processes.append(followed)
            return dict(last, seq=seq, processes=processes)

        big = dict(target, gpu_memory={g: 1 << 40 for g in target["gpu_memory"]})
        session._dispatch(grown(last["seq"] + 1, big))
        await redrawn(pilot)
        assert row_keys(table).index(key) == 0  # sorted by GPU mem: now first
        assert table.cursor_key == key and in_view(table, key)
        assert main.state.following.key == key

        session._dispatch(grown(last["seq"] + 2, None))  # it exits
        await redrawn(pilot)
        assert main.state.following.key is None
        assert f"PID {target['pid']} has exited: no longer following it." in notes(app)


async def test_moving_the_cursor_stops_following() -> None:
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        main = await procs_of(pilot)
        table = main.proc_table
        await pilot.press("full_stop")
        await redrawn(pilot)
        assert main.state.following.key == table.cursor_key is not None
        await pilot.press("down")
        await redrawn(pilot)
        assert main.state.following.key is None
        assert "following" not in title_of(main)


async def test_the_palette_offers_the_tree_and_the_detail() -> None:
    from tests.support.pilot import palette

    app = family_app()
    async with app.run_test(size=(120, 36)) as pilot:
        main = await procs_of(pilot)
        await palette(pilot, "processes as a tree")
        await redrawn(pilot)
        assert main.proc_table.tree_mode
        key = main.proc_table.cursor_key
        assert key is not None
        await palette(pilot, f"process detail: pid {key_of_row(key)}")
        await wait_for(
            pilot, lambda: isinstance(app.screen, ProcDetailScreen) and app.screen.status != "reading"
        )
        assert isinstance(app.screen, ProcDetailScreen) and app.screen.record.pid == key_of_row(key)


def key_of_row(key: str) -> int:
    return int(key.removeprefix(CONTEXT).split(":")[0])


def keys_of(line: str) -> list[str]:
    """The keys a help line starts with: one, or a key and its others ("t, F5  processes as a tree")."""
    found = re.match(r"(?:\S+, )*\S+", line.strip())
    return found.group().split(", ") if found else []


@pytest.mark.parametrize("key", ["t", "f5", "d", "u", "full_stop", "minus", "plus"])
async def test_the_keys_are_in_the_help(key: str) -> None:
    from gputui.ui.fmt import key_name
    from gputui.ui.screens.help import HelpScreen

    app = build_app()
    async with app.run_test(size=(120, 60)) as pilot:
        await procs_of(pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        text = app.screen.query_one("#help-body").plain(120)  # type: ignore[attr-defined]
        shown = {"full_stop": ".", "minus": "-", "plus": "+"}.get(key, key_name(key))
        assert any(shown in keys_of(line) for line in text.splitlines()), text
        assert "Process detail (d)" in text and "copy the PID to the clipboard" in text

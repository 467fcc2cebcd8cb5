"""The kill flow from the keyboard, on the real thing: a sim probe as a real subprocess (its GPU
memory owned by real processes) through the local transport, and an audit log in tmp_path.

Select, dialog, cancel (nothing signalled), confirm, stages in the log pane, verdict, audit log; the
dialog's lists for a ghost's GPU and for a whole host; read-only; unfinished actions at start.
Every process signalled here was started by the test's own sim probe, which ends them all when the
app stops the fleet.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from textual.widgets import Button

from gputui.fleet.fleet import Fleet
from gputui.kill.auditlog import ActionLog, read_records, unfinished
from gputui.kill.plan import KillOptions, plan_for_gpus
from gputui.recording.player import ReplayLink
from gputui.text.units import fmt_bytes
from gputui.ui import GpuTuiApp, make_app
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.plan import IncludeScreen, PlanScreen
from gputui.ui.widgets.proc_table import proc_row_key
from tests.support.apps import FROZEN, QUIET, build_app, recording, sim_app
from tests.support.pilot import (
    dialog,
    dialog_text,
    log_text,
    main_of,
    ready,
    redrawn,
    screen_text,
    settle,
    wait_for,
)


def alive(pid: int, start_time: int | None) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return False
    return fields[0] != "Z" and int(fields[19]) == start_time


def notes(app: GpuTuiApp) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


async def test_select_cancel_then_confirm_runs_the_stages_and_shows_the_verdict(tmp_path: Path) -> None:
    log = tmp_path / "actions.jsonl"
    app = sim_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        main = await ready(pilot, gpu_row=1)  # GPU 0: the vLLM server (GPUs 0 and 1), a launcher's ranks
        main.proc_table.focus()
        sample = app.fleet.view("demo-a").sample
        assert sample is not None
        [server] = [p for p in sample.on_gpu(0) if any(a.endswith("vllm_serve.py") for a in p.command)]
        assert server.kind == "user"
        assert main.proc_table.move_to(proc_row_key(server), scroll=True)
        await pilot.press("space")
        await redrawn(pilot)
        assert "1 selected" in str(main.proc_table.border_title)
        assert main.state.selection.keys("demo-a") == {server.key}

        # The dialog; focus on Cancel, so Enter cancels. Nothing is signalled, nothing logged.
        await pilot.press("x")
        screen = await dialog(pilot)
        assert isinstance(app.focused, Button) and app.focused.id == "plan-cancel"
        [plan] = screen.plans
        # A plan of processes: it proves the server gone and its memory back, not GPUs 0 and 1 clean.
        assert [t.pid for t in plan.targets] == [server.pid] and plan.gpu_indexes == ()
        assert [g.index for g in plan.touched] == [0, 1]
        text = dialog_text(app)
        assert f"{server.pid}" in text and "Stop 1 process on demo-a" in text
        assert "Proves: each chosen process gone and the GPU memory it held released" in text
        assert "SIGTERM -> wait up to 5 s -> SIGKILL the survivors -> rescan: stop only holders tied" in text
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        await pilot.pause(0.5)
        assert alive(server.pid, server.start_time)
        assert "SIGTERM" not in log_text(main) and "cancelled: nothing signalled" in log_text(main)
        assert not log.exists()  # not even an intent
        assert main.state.selection.keys("demo-a") == {server.key}  # the selection survives a cancel

        # Escape cancels too; ctrl+k confirms.
        await pilot.press("x")
        await dialog(pilot)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        await pilot.press("x")
        await dialog(pilot)
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        await wait_for(pilot, lambda: "verdict:" in log_text(main))
        await redrawn(pilot)
        assert not app.running
        assert main.action_log.display  # shown when the plan started
        logged = log_text(main)
        assert f"{server.pid} SIGTERM sent python" in logged
        assert "the targets' memory released" in logged and "GPU 0: the targets" not in logged
        assert "verdict: stopped, memory released in " in logged
        assert any("stopped, memory released" in n for n in notes(app))
        # The pane's lines: a millisecond timestamp, the host, GPUs, the PID, the stage, the command.
        stage = re.compile(rf"^\d\d:\d\d:\d\d\.\d{{3}} demo-a GPU 0,1 +{server.pid} SIGTERM sent  python3? ")
        assert any(stage.match(line) for line in _log_lines(app)), _log_lines(app)
        assert main.state.selection.count() == 0  # what was planned left the selection
        await wait_for(pilot, lambda: not alive(server.pid, server.start_time))

        # The pane filters (the plan id matches too).
        main.action_log.set_filter("SIGTERM")
        await pilot.pause()
        assert all("SIGTERM" in line for line in _log_lines(app))
        main.action_log.set_filter(plan.id)  # the cancelled plan's id: its note only
        await pilot.pause()
        assert [line.split(" ", 2)[2].strip() for line in _log_lines(app)] == [
            f"plan {plan.id} cancelled: nothing signalled"
        ]
        main.action_log.set_filter("")

    # The audit log: the plan and its intent, on disk before any event; then events, verdicts, done.
    records, bad = read_records(log)
    assert bad == 0
    kinds = [r["kind"] for r in records]
    assert kinds[:2] == ["plan", "intent"] and kinds[-1] == "done"
    assert max(i for i, k in enumerate(kinds) if k == "intent") < kinds.index("event")
    assert "verdict" in kinds and records[-1]["ok"] is True and records[-1]["result"] == "stopped"
    assert records[1]["pid"] == server.pid and records[1]["start_time"] == server.start_time
    assert unfinished(log) == []


def _log_lines(app: GpuTuiApp) -> list[str]:
    log = main_of(app).action_log.query_one("#log-lines")
    return [strip.text for strip in log.lines]  # type: ignore[attr-defined]


async def test_free_a_gpu_with_a_ghost_targets_its_hidden_holder(tmp_path: Path) -> None:
    app = sim_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        main = await ready(pilot, gpu_row=3)  # GPU 2: a notebook, a ghost and the ghost's child
        sample = app.fleet.view("demo-a").sample
        assert sample is not None
        [ghost] = [p for p in sample.on_gpu(2) if p.kind == "ghost"]
        [holder] = [p for p in sample.on_gpu(2) if p.kind == "hidden"]
        await pilot.press("f")
        screen = await dialog(pilot)
        [plan] = screen.plans
        assert plan.scope == "gpus" and plan.gpu_indexes == (2,)
        by_pid = {t.pid: t for t in plan.targets}
        assert by_pid[holder.pid].why == f"holds the memory of ghost {ghost.pid}"
        [left] = [e for e in plan.excluded if e.pid == ghost.pid]
        assert left.why == f"already dead; its memory is held by {holder.pid}"
        text = dialog_text(app)
        assert f"holds the memory of ghost {ghost.pid}" in text
        assert "already dead; its memory is held by" in text and "Left alone (1)" in text
        assert "☐ Sweep (1)" in text  # the unattributed holder: offered, not included
        assert not plan.sweep_included

        # Tab to Kill, Enter: the deliberate way without ctrl+k.
        await pilot.press("tab")
        assert isinstance(app.focused, Button) and app.focused.id == "plan-kill"
        await pilot.press("enter")
        await wait_for(pilot, lambda: "verdict:" in log_text(main))
        assert re.search(r"GPU 2 +clean", "\n".join(_log_lines(app))), _log_lines(app)
        assert not alive(holder.pid, holder.start_time)


async def test_free_the_host_leaves_monitors_alone_and_offers_the_sweep(tmp_path: Path) -> None:
    app = sim_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot, gpu_row=0)
        sample = app.fleet.view("demo-a").sample
        assert sample is not None
        await pilot.press("F")
        screen = await dialog(pilot)
        [plan] = screen.plans
        assert plan.scope == "host" and plan.gpu_indexes == (0, 1, 2, 3)
        protected = {e.protected for e in plan.excluded}
        assert {"monitor", "probe"} <= protected
        [dcgm] = [e for e in plan.excluded if e.protected == "monitor"]
        assert "a GPU monitor: protected" in dcgm.why
        # The unattributed holder is listed apart, left out: `s` adds it.
        assert plan.sweep and not plan.sweep_included
        assert "☐ Sweep (1)" in screen_text(app)
        sweep_pids = {t.pid for t in plan.sweep}
        assert not sweep_pids & {t.pid for t in plan.targets}
        assert "and the 1 swept" not in dialog_text(app)
        await pilot.press("s")
        await pilot.pause()
        assert screen.plans[0].sweep_included and "☑ Sweep (1)" in screen_text(app)
        assert "and the 1 swept" in dialog_text(app)
        # Defect 4: cancel with the sweep on; the next dialog starts from the safe default again.
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        await pilot.press("F")
        again = await dialog(pilot)
        assert again is not screen and not again.plans[0].sweep_included
        assert "☐ Sweep (1)" in screen_text(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        for proc in sample.processes:
            if proc.kind in ("user", "hidden", "monitor"):
                assert alive(proc.pid, proc.start_time), proc


async def test_progress_while_waiting_then_sigkill(tmp_path: Path) -> None:
    """GPU 3's server ignores SIGTERM: the log pane says what the plan waits for, then SIGKILL."""
    # The wait is what the progress line is seen in: long enough that a busy machine, which hands the
    # app the probe's events late, still shows it (at 1.5 s a loaded CI box saw SIGKILL first).
    app = sim_app(tmp_path, kill=KillOptions(term_timeout=4.5))
    async with app.run_test(size=(120, 36)) as pilot:
        main = await ready(pilot, gpu_row=4)
        await pilot.press("f")
        await dialog(pilot)
        assert "wait 4.5 s after each soft signal" in dialog_text(app)
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: "to exit after SIGTERM" in main.action_log._progress)
        assert "s of 4.5 s)" in main.action_log._progress
        assert "running" in str(main.action_log.border_title)
        await pilot.press("q")  # quitting now would lose the verdict: it takes a second press
        await pilot.pause()
        assert app.is_running and any("Quit again within" in n for n in notes(app))
        await wait_for(pilot, lambda: "verdict:" in log_text(main))
        await pilot.pause(0.3)
        assert main.action_log._progress == ""
        logged = log_text(main)
        assert "SIGKILL sent" in logged and re.search(r"GPU 3 +clean", "\n".join(_log_lines(app))), logged


async def test_a_selected_process_that_exits_drops_out_with_a_note(tmp_path: Path) -> None:
    app = sim_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        main = await ready(pilot, gpu_row=3)
        sample = app.fleet.view("demo-a").sample
        assert sample is not None
        [notebook] = [p for p in sample.on_gpu(2) if p.kind == "user"]
        main.proc_table.focus()
        assert main.proc_table.move_to(f"{notebook.pid}:{notebook.start_time}")
        await pilot.press("space")
        assert main.state.selection.keys("demo-a") == {notebook.key}
        os.kill(notebook.pid, 15)  # a job of this test's own sim probe
        await wait_for(pilot, lambda: "dropped from the selection" in log_text(main))
        assert main.state.selection.count() == 0
        assert f"selected {notebook.pid} python" in log_text(main)


# -- on replayed recordings: fixed data, nothing signalled -------------------------------------


async def test_read_only_opens_no_dialog() -> None:
    app = build_app(read_only=True)
    app.fresh_timeout = 0
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = main_of(app)
        main.select_host("demo-a")
        main.gpu_table.focus()
        await redrawn(pilot)
        await pilot.press("down", "down", "down", "f", "F")
        main.proc_table.focus()
        await pilot.press("space", "x", "enter")
        await pilot.pause(0.3)
        assert isinstance(app.screen, MainScreen)
        assert main.state.selection.count() == 0
        assert not any(isinstance(s, PlanScreen) for s in app.screen_stack)


async def test_a_read_only_host_hides_the_kill_keys() -> None:
    fleet = Fleet()
    fleet.add("demo-a", lambda: ReplayLink(list(recording("demo-a"))), read_only=True, interval=QUIET)
    fleet.add("demo-b", lambda: ReplayLink(list(recording("demo-b"))), interval=QUIET)
    app = make_app(fleet, interval=QUIET, clock=lambda: FROZEN, log_path=Path("/nonexistent/a.jsonl"))
    app.fresh_timeout = 0
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = main_of(app)
        main.select_host("demo-a")
        main.gpu_table.focus()
        await redrawn(pilot)
        assert "Free GPU" not in screen_text(app)
        await pilot.press("down", "f", "F")
        await pilot.pause(0.3)
        assert isinstance(app.screen, MainScreen)
        main.select_host("demo-b")
        main.gpu_table.focus()
        await redrawn(pilot)
        assert "Free GPU" in screen_text(app)
        await pilot.press("F")
        await dialog(pilot)


async def test_one_dialog_for_a_selection_on_two_hosts() -> None:
    app = build_app()
    app.fresh_timeout = 0
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = main_of(app)
        for host in ("demo-a", "demo-b"):
            main.select_host(host)
            main.proc_table.focus()
            await redrawn(pilot)
            await pilot.press("space")
        assert "1 selected on other hosts" in str(main.proc_table.border_title)
        await pilot.press("x")
        screen = await dialog(pilot)
        assert [p.host for p in screen.plans] == ["demo-a", "demo-b"]
        assert "2 hosts" in str(screen.query_one("#plan-box").border_title)
        text = screen_text(app)
        assert "demo-a · stop the chosen process " in text  # one chosen on each host
        # The summary says how many processes on how many hosts, and the GPU memory they hold.
        held = sum(t.memory for p in screen.plans for t in p.signalled)
        assert held > 0
        assert f"Stop 2 processes on 2 hosts ({fmt_bytes(held)} of GPU memory), then" in text
        assert str(screen.query_one("#plan-box").border_title).startswith("Stop processes · confirm")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        assert main.state.selection.count() == 2


async def test_nothing_to_signal_cannot_be_confirmed() -> None:
    app = build_app()
    app.fresh_timeout = 0
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = main_of(app)
        main.select_host("demo-a")
        main.proc_table.focus()
        await redrawn(pilot)
        sample = app.fleet.view("demo-a").sample
        assert sample is not None
        [dcgm] = [p for p in sample.processes if p.protected == "monitor"]
        assert main.proc_table.move_to(f"{dcgm.pid}:{dcgm.start_time}")
        await pilot.press("x")
        screen = await dialog(pilot)
        assert screen.runnable == ()
        assert "Nothing to stop" in screen_text(app)
        kill = screen.query_one("#plan-kill", Button)
        assert kill.disabled
        await pilot.press("ctrl+k", "tab", "enter")  # nothing confirms; Enter on Cancel cancels
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        assert not app.running


async def test_unfinished_actions_are_reported_at_start_then_acknowledged(tmp_path: Path) -> None:
    log = tmp_path / "actions.jsonl"
    sample = next(r for r in reversed(recording("demo-a")) if r["type"] == "sample")
    from gputui.model import Sample

    plan = plan_for_gpus(Sample.from_wire(sample), [2], host="demo-a")
    with ActionLog(log, operator="root") as audit:
        audit.write_plan(plan)  # written ahead, then gputui "died": no event, no done
    assert [u.action for u in unfinished(log)] == [plan.id]
    app = build_app(("demo-a",), log_path=log)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = main_of(app)
        await wait_for(pilot, lambda: "UNFINISHED" in log_text(main))
        await redrawn(pilot)
        assert main.action_log.display
        assert f"UNFINISHED action {plan.id} on demo-a" in screen_text(app)
        assert any("never recorded an outcome" in n for n in notes(app))
    assert unfinished(log) == []  # reported once
    assert read_records(log)[0][-1]["kind"] == "reported"


async def test_no_plan_is_sent_when_the_audit_log_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    links: list[ReplayLink] = []

    def link() -> ReplayLink:
        links.append(ReplayLink(list(recording("demo-a"))))
        return links[-1]

    fleet = Fleet()
    fleet.add("demo-a", link, interval=QUIET)
    app = make_app(fleet, interval=QUIET, clock=lambda: FROZEN, log_path=blocker / "actions.jsonl")
    app.fresh_timeout = 0
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = main_of(app)
        main.gpu_table.focus()
        await pilot.press("down", "down", "down", "f")
        await dialog(pilot)
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: "verdict:" in log_text(main))
        assert "nothing was sent" in log_text(main)
        assert any("NOT SENT" in n for n in notes(app))
        assert not app.running
    assert not [m for m in links[0].sent if m.get("type") == "plan"]  # write-ahead, or nothing


async def test_the_dialog_changes_the_signals_and_timeouts_of_this_plan_only(tmp_path: Path) -> None:
    log = tmp_path / "actions.jsonl"
    app = sim_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        main = await ready(pilot, gpu_row=1)  # GPU 0: the vLLM server
        await pilot.press("f")
        screen = await dialog(pilot)
        assert "Signals: SIGTERM, then SIGKILL (i)" in dialog_text(app)
        await pilot.press("i")  # SIGINT first
        await pilot.press("w")  # 5 s -> 10 s
        await pilot.press("v", "v")  # 10 s -> 30 s -> 60 s
        await pilot.pause()
        text = dialog_text(app)
        assert "Signals: SIGINT, then SIGTERM, then SIGKILL (i)" in text
        assert "wait 10 s after each soft signal" in text and "verify up to 60 s" in text
        assert "SIGINT -> wait up to 10 s -> SIGTERM -> wait up to 10 s" in text
        [plan] = screen.plans
        assert plan.signals == ("SIGINT", "SIGTERM") and plan.verify_timeout == 60
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: "verdict:" in log_text(main))
        assert "SIGINT sent" in log_text(main)
        # The next dialog starts from the configured options again.
        await pilot.press("f")
        again = await dialog(pilot)
        assert again.plans[0].kill == KillOptions()
        await pilot.press("escape")
    [first] = [r for r in read_records(log)[0] if r["kind"] == "plan"]
    assert first["plan"]["signals"] == ["SIGINT", "SIGTERM"] and first["plan"]["term_timeout"] == 10


async def test_a_chosen_monitor_is_offered_behind_a_second_confirmation(tmp_path: Path) -> None:
    """Defect 5: `x` on a monitor opened a dialog with placeholders and "include it explicitly to
    stop it", which nothing could do. Now `p` offers it, and a second dialog names the risk."""
    app = sim_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        main = await ready(pilot, gpu_row=0)
        sample = app.fleet.view("demo-a").sample
        assert sample is not None
        [monitor] = [p for p in sample.processes if p.protected == "monitor"]
        main.state.selection.toggle("demo-a", monitor)
        await pilot.press("x")
        screen = await dialog(pilot)
        text = dialog_text(app)
        assert "GPU -" not in text and "include it explicitly" not in text
        assert f"{monitor.pid} (nv-hostengine) is a protected GPU monitor: p includes it" in text
        assert "Nothing to stop" in text
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, IncludeScreen))
        assert "stopping it ends its metrics" in dialog_text(app)
        assert isinstance(app.focused, Button) and app.focused.id == "include-cancel"
        await pilot.press("escape")  # not included: back in the plan dialog, unchanged
        await wait_for(pilot, lambda: app.screen is screen)
        assert screen.plans[0].targets == ()
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, IncludeScreen))
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: app.screen is screen)
        [plan] = screen.plans
        assert [t.pid for t in plan.targets] == [monitor.pid] and plan.include_protected == (monitor.pid,)
        assert "is a GPU monitor: stopping it ends what it does for everyone" in dialog_text(app)
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: "verdict:" in log_text(main))
        assert "verdict: stopped, memory released" in log_text(main)
        assert not alive(monitor.pid, monitor.start_time)


async def test_the_gpu_table_shows_the_verdict_at_once_not_at_the_next_sample(tmp_path: Path) -> None:
    """Issue 12 #5: the GPU table lagged the log by a sample interval. After a verdict the app asks
    the probe for a sample now, and GPU 0 shows free at once."""
    app = sim_app(tmp_path, interval=3600.0)  # no regular sample during the test: only asked ones
    async with app.run_test(size=(120, 36)) as pilot:
        main = await ready(pilot, gpu_row=1)  # GPU 0
        view = app.fleet.view("demo-a")
        await pilot.press("f")
        await dialog(pilot)
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: "verdict:" in log_text(main))
        # The next regular sample is an hour away: a sample that shows GPU 0 free is the one the
        # app asked for after the verdict.
        await wait_for(
            pilot, lambda: view.sample is not None and view.sample.gpu_is_free(view.sample.gpus[0]), 60
        )

"""Every dialog, verdict and toast read once (issue 19, item 8).

A demo session on a real sim probe (the keys a new user presses: `u`, `x`, `f`, confirm, export,
the palette, `d`), and the word functions over representative verdicts, plans and hosts: every line
they produce is checked for a doubled phrase (`not sent: plan not sent`), `GPU3` without its space,
the wrong plural for one or two, and a literal `\\n`. Then what each dialog is called and says.
"""

from __future__ import annotations

import io
import types
from pathlib import Path
from typing import Any

from gputui.fleet.session import HostView
from gputui.kill.plan import PlanOptions, plan_for_gpus, plan_for_host, plan_for_pids, sweep_candidates
from gputui.model import Event, HostFacts, PlanVerdict, done_event
from gputui.probe.readers.nvml import NvmlReader
from gputui.text.words import no_gpu_words, stage_text, verdict_lines, verdict_summary
from gputui.ui import GpuTuiApp
from gputui.ui.commands import GpuTuiCommands
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.proc_detail import ProcDetailScreen
from gputui.ui.widgets.proc_table import proc_row_key
from gputui.views.report import render
from tests.support.apps import build_app, sim_app
from tests.support.pilot import dialog, dialog_text, log_text, ready, redrawn, screen_text, settle, wait_for
from tests.support.samples import sample as plan_sample
from tests.support.wording import check, problems


def test_the_checker_finds_what_issue_19_found() -> None:
    assert problems("not sent: plan not sent: demo-a: connection closed")
    assert problems("== demo-a: NOTHING DONE: not confirmed: nothing done")
    assert problems("no-gpu: no NVIDIA driver: no NVIDIA driver on this host (x)")
    assert problems("verdict: clean · GPU3 clean") and problems("1 processes") and problems("2 process")
    assert problems("/tmp/a.json\\n/tmp/a.txt")
    assert not problems("Stop 2 processes on demo-a, then verify GPU 3 is clean.")
    assert not problems("uses GPU 0: 40.0 GiB, GPU 1: 40.0 GiB")


# -- the word functions over representative inputs ---------------------------------------------


def _verdict(result: str, message: str, **data: Any) -> PlanVerdict:
    event = Event(plan="p1", time=0.0, stage="done", result=result, message=message, data=data)
    return PlanVerdict.from_event(event)


def test_verdicts_say_each_thing_once() -> None:
    not_sent = PlanVerdict.from_event(
        done_event("p1", "not-sent", "plan not sent: demo-a: connection closed", error="closed")
    )
    lines = [verdict_summary(not_sent), *verdict_lines("demo-a", "not-sent", not_sent.message, not_sent)]
    assert "demo-a: connection closed" in lines[0]
    lines += verdict_lines("demo-a", "aborted", "not confirmed: nothing done", None)
    assert lines[-1] == "== demo-a: NOTHING DONE: not confirmed"
    clean = _verdict(
        "clean",
        "plan p1: every targeted GPU verified clean in 120 ms",
        ok=True,
        gpus={"2": {"result": "clean", "memory_before": 1 << 30, "memory_after": 0}},
        processes=[{"pid": 7, "result": "exited", "signals": ["SIGTERM"]}],
        elapsed_ms=120.0,
    )
    lines += [verdict_summary(clean), *verdict_lines("demo-a", "clean", None, clean)]
    assert "GPU 2 clean" in lines[-4] and lines[-2].startswith("   GPU 2 ")
    event = Event(plan="p1", time=0.0, stage="verdict", result="clean", gpu=2, message="GPU 2: clean")
    lines.append(stage_text(event))
    assert lines[-1] == "GPU 2   clean"  # the column says the GPU: the message does not again
    check(lines)


class _NoLibrary(Exception):
    value = 12


def test_a_host_without_a_driver_is_named_once_and_by_its_name() -> None:
    """What the probe of a remote host says is printed on another: never "this host"."""
    reader = NvmlReader()
    reader._nv = types.SimpleNamespace(
        NVML_ERROR_LIBRARY_NOT_FOUND=12, NVML_ERROR_DRIVER_NOT_LOADED=9, NVML_ERROR_NO_PERMISSION=4
    )
    error = reader._init_error(_NoLibrary("NVML Shared Library Not Found"))
    assert "this host" not in error.message
    facts = HostFacts(hostname="gpu7", error_code=error.code, error_message=error.message)
    out = io.StringIO()
    render([HostView("gpu7", facts=facts)], out)
    lines = out.getvalue().splitlines()
    check(lines)
    assert any(line.strip().startswith("no-gpu: no NVIDIA driver (NVML Shared") for line in lines), lines
    assert no_gpu_words(["gpu7"], {"local"}) == "no NVIDIA driver or GPU on gpu7"
    assert no_gpu_words(["local"], {"local"}) == "no NVIDIA driver or GPU on this host"


def test_plan_titles_name_what_the_plan_does() -> None:
    opts = PlanOptions(operator="alice", plan_id="p1")
    sample = plan_sample()
    one = plan_for_gpus(sample, [3], host="h", options=opts)
    two = plan_for_gpus(sample, [0, 2], host="h", options=opts)
    host = plan_for_host(sample, host="h", options=opts)
    procs = plan_for_pids(sample, [101], host="h", options=opts)
    assert one.title == "Free GPU 3" and two.title == "Free GPUs 0, 2"
    assert host.title == "Free every GPU (0-3)"
    assert procs.title == "Stop the chosen process"
    assert one.proves.startswith("GPU 3 clean (nothing holds it") and two.proves.startswith("GPUs 0, 2 clean")
    lines = [p.title for p in (one, two, host, procs)]
    for plan in (one, two, host, procs):
        lines += [plan.proves, *plan.stages, *(w.message for w in plan.warnings)]
        lines += [t.why for t in plan.targets] + [e.why for e in plan.excluded]
    check(lines)
    # Chosen by PID, a process still says what it holds: the dialog's why, not just "chosen".
    [target] = procs.targets[:1]
    assert target.why == "chosen; uses GPU 1: 20.0 GiB, GPU 2: 20.0 GiB", target.why


# -- a demo session ----------------------------------------------------------------------------


def _notes(app: GpuTuiApp) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


def _main(app: GpuTuiApp) -> MainScreen:
    assert app._main is not None
    return app._main


async def test_u_leaves_unattributed_holders_to_the_sweep_and_the_dialog_says_why(tmp_path: Path) -> None:
    app = sim_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        main = await ready(pilot, gpu_row=0)
        sample = app.fleet.view("demo-a").sample
        assert sample is not None
        unattributed = {p.key for p in sweep_candidates(sample)}
        assert unattributed  # the demo has one: what `u` must leave to the sweep
        [holder] = [p for p in sample.processes if p.kind == "hidden" and p.gpus]
        main.proc_table.focus()
        assert main.proc_table.move_to(proc_row_key(holder))
        await pilot.press("u")
        await redrawn(pilot)
        tagged = main.state.selection.keys("demo-a")
        assert holder.key in tagged and not tagged & unattributed, (tagged, unattributed)
        await pilot.press("x")
        screen = await dialog(pilot)
        title = str(screen.query_one("#plan-box").border_title)
        assert "Free GPUs" not in title and title.startswith("Stop the chosen processes"), title
        why = {t.pid: t.why for t in screen.plans[0].targets}
        assert why[holder.pid].startswith("chosen; hidden holder of GPU 2"), why[holder.pid]
        assert "then verify they are gone and their memory released" in dialog_text(app)
        check([*screen_text(app).splitlines(), *_notes(app)])


async def test_one_gpu_is_said_as_one_and_the_log_names_it_once(tmp_path: Path) -> None:
    app = sim_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        main = await ready(pilot, gpu_row=3)  # GPU 2
        await pilot.press("f")
        screen = await dialog(pilot)
        text = dialog_text(app)
        assert str(screen.query_one("#plan-box").border_title).startswith("Free GPU 2 · confirm")
        assert "then verify GPU 2 is clean." in text and "GPUs are" not in text
        lines = screen_text(app).splitlines()
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        await wait_for(pilot, lambda: "verdict:" in log_text(main))
        await redrawn(pilot)
        logged = log_text(main)
        assert "GPU 2: clean" not in logged and "GPU2" not in logged  # the GPU column says it
        check([*lines, *logged.splitlines(), *_notes(app)])


async def test_every_gpu_of_a_host_is_said_as_such(tmp_path: Path) -> None:
    app = sim_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot, gpu_row=0)
        await pilot.press("F")
        screen = await dialog(pilot)
        text = dialog_text(app)
        assert str(screen.query_one("#plan-box").border_title).startswith("Free every GPU (0-3) · confirm")
        assert "then verify GPUs 0-3 are clean." in text
        check(screen_text(app).splitlines())


async def test_the_export_toast_is_one_line(tmp_path: Path) -> None:
    app = build_app(export_dir=tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        app.action_export()
        await pilot.pause()
        [exported] = [n for n in _notes(app) if n.startswith("Snapshot exported")]
        assert ".json and " in exported
        check([exported])


async def test_the_palette_says_what_each_view_switches_to() -> None:
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = _main(app)
        main.select_host("demo-a")
        main.proc_table.focus()
        await redrawn(pilot)
        for key, on, off in (
            ("t", "Processes as a tree", "Processes as a list"),
            ("z", "Pause the view", "Resume (catch up)"),
        ):
            entries = {e.title: e.help for e in GpuTuiCommands(main).entries()}
            switch_on = entries[on]
            await pilot.press(key)
            await redrawn(pilot)
            entries = {e.title: e.help for e in GpuTuiCommands(main).entries()}
            assert entries[off] != switch_on, (off, entries[off])  # not the words of the mode it leaves
            await pilot.press(key)
            await redrawn(pilot)


async def test_no_cpu_figure_is_no_cpu_figure() -> None:
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        sample = app.fleet.view("demo-a").sample
        assert sample is not None
        ghost = next(p for p in sample.processes if p.kind == "ghost")
        assert ghost.cpu_percent is None
        app.push_screen(ProcDetailScreen("demo-a", ghost))
        await wait_for(pilot, lambda: isinstance(app.screen, ProcDetailScreen))
        await pilot.pause()
        detail = screen_text(app)
        assert "of one core" not in detail, detail
        check(detail.splitlines())

"""Any signal by name from the process detail (`k`; issue 19, item 12), on a real sim probe: the
chooser, the plan dialog naming the process and the signal, the probe sending it once, the audit
log recording it as any plan. Not offered read-only; refused for a monitor as a kill would be.

Every process signalled is a job of the test's own sim probe, which ends them with the app.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widgets import OptionList

from gputui.kill.auditlog import read_records, unfinished
from gputui.model import Proc
from gputui.probe.procfs import read_stat
from gputui.ui import GpuTuiApp
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.plan import PlanScreen
from gputui.ui.screens.proc_detail import ProcDetailScreen
from gputui.ui.screens.signal import SignalScreen
from tests.support.apps import build_app, sim_app
from tests.support.pilot import dialog, dialog_text, log_text, ready, screen_text, settle, wait_for
from tests.support.wording import check


def state(pid: int) -> str | None:
    stat = read_stat(pid)
    return stat.state if stat is not None else None


async def send(pilot: Any, proc: Proc, name: str) -> PlanScreen:
    """From the detail screen: k, the signal chosen by name, then the dialog (not confirmed yet)."""
    app: GpuTuiApp = pilot.app
    assert isinstance(app.screen, ProcDetailScreen)
    await pilot.press("k")
    await wait_for(pilot, lambda: isinstance(app.screen, SignalScreen))
    options = app.screen.query_one(OptionList)
    options.highlighted = next(
        i for i in range(options.option_count) if options.get_option_at_index(i).id == name
    )
    await pilot.press("enter")
    return await dialog(pilot)


async def test_sigstop_then_sigcont_from_the_detail_screen(tmp_path: Path) -> None:
    log = tmp_path / "actions.jsonl"
    app = sim_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        main = await ready(pilot, gpu_row=0)
        sample = app.fleet.view("demo-a").sample
        assert sample is not None
        job = next(p for p in sample.processes if p.kind == "user" and p.state in ("R", "S"))
        app.push_screen(ProcDetailScreen("demo-a", job))
        await wait_for(pilot, lambda: isinstance(app.screen, ProcDetailScreen))
        await wait_for(pilot, lambda: "k signal ·" in screen_text(app))

        screen = await send(pilot, job, "SIGSTOP")
        [plan] = screen.plans
        assert plan.signal == "SIGSTOP" and [t.pid for t in plan.targets] == [job.pid]
        text = dialog_text(app)
        title = str(screen.query_one("#plan-box").border_title)
        assert title.startswith(f"Send SIGSTOP to {job.pid} (") and "confirm" in title
        assert (
            f"Send SIGSTOP to {job.pid} (" in text and "on demo-a, once: pause it (cannot be caught)" in text
        )
        assert "Send SIGSTOP" in text and "no SIGKILL after it" in text
        check(screen_text(app).splitlines())
        await pilot.press("escape")  # cancelled: nothing sent
        await wait_for(pilot, lambda: isinstance(app.screen, ProcDetailScreen))
        assert state(job.pid) in ("R", "S") and not log.exists()

        await send(pilot, job, "SIGSTOP")
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: "verdict:" in log_text(main))
        assert state(job.pid) == "T"
        assert f"SIGSTOP sent to {job.pid}" in log_text(main) and "now stopped, state T" in log_text(main)
        await wait_for(pilot, lambda: isinstance(app.screen, ProcDetailScreen))
        await wait_for(pilot, lambda: "T stopped" in screen_text(app))  # read anew on its return

        await send(pilot, job, "SIGCONT")
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: log_text(main).count("verdict:") == 2)
        assert state(job.pid) in ("R", "S")
        notes = [f"{n.title}: {n.message}" for n in app._notifications]
        assert any(n.startswith("demo-a: signal sent: SIGCONT sent to") for n in notes), notes
        check(notes + log_text(main).splitlines())

    # The audit log has both, as any plan: the plan and its intent before anything, then the events
    # and the outcome; nothing left unfinished.
    records, bad = read_records(log)
    assert bad == 0
    plans = [r for r in records if r["kind"] == "plan"]
    assert [p["plan"]["signal"] for p in plans] == ["SIGSTOP", "SIGCONT"]
    intents = [r for r in records if r["kind"] == "intent"]
    assert [(r["pid"], r["signal"]) for r in intents] == [(job.pid, "SIGSTOP"), (job.pid, "SIGCONT")]
    dones = [r for r in records if r["kind"] == "done"]
    assert [(d["result"], d["ok"]) for d in dones] == [("signalled", True), ("signalled", True)]
    assert unfinished(log) == []


async def test_a_monitor_is_refused_and_read_only_offers_no_signal(tmp_path: Path) -> None:
    app = sim_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot, gpu_row=0)
        sample = app.fleet.view("demo-a").sample
        assert sample is not None
        monitor = next(p for p in sample.processes if p.protected == "monitor")
        app.push_screen(ProcDetailScreen("demo-a", monitor))
        await wait_for(pilot, lambda: isinstance(app.screen, ProcDetailScreen))
        screen = await send(pilot, monitor, "SIGKILL")
        [plan] = screen.plans
        assert not plan.targets and plan.excluded[0].protected == "monitor"
        assert "Nothing to send SIGKILL to" in dialog_text(app) and "a GPU monitor: protected" in dialog_text(
            app
        )
        assert screen.query_one("#plan-kill").disabled
        await pilot.press("ctrl+k")  # not offered: nothing happens
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, ProcDetailScreen))
        assert read_stat(monitor.pid) is not None and state(monitor.pid) != "T"

    app = build_app(read_only=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        sample = app.fleet.view("demo-a").sample
        assert sample is not None
        user = next(p for p in sample.processes if p.kind == "user")
        app.push_screen(ProcDetailScreen("demo-a", user))
        await wait_for(pilot, lambda: isinstance(app.screen, ProcDetailScreen))
        await pilot.press("k")
        await pilot.pause()
        assert isinstance(app.screen, ProcDetailScreen) and "k signal" not in screen_text(app)
        assert not isinstance(app.screen, MainScreen)

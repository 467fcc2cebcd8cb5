"""A plan that names a protected process is not run in the dashboard, as `gputui clean --pid`
refuses it (exit 4) and the hub does (409): a user process and demo-a's monitor selected, `x` opened
the dialog and, confirmed, stopped the user process and left the monitor alone, though the operator
had named it. Now nothing on that host runs until `p` includes the monitor (the dashboard's
--include-monitor), and the dialog says why. The sim's processes end with its probe."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gputui.model import Proc
from gputui.ui import GpuTuiApp
from gputui.ui.screens.plan import IncludeScreen, PlanScreen
from tests.support.apps import sim_app
from tests.support.pilot import dialog, dialog_text, ready, sample_of, wait_for


async def planned_with(pilot: Any, protected: Callable[[Proc], bool]) -> tuple[PlanScreen, Proc, Proc]:
    """A user process and the protected one `protected` picks, selected and planned with `x`: the
    dialog once it says why it runs nothing, the user process, the protected one."""
    app: GpuTuiApp = pilot.app
    main = await ready(pilot, gpu_row=0)
    sample = sample_of(app)
    [chosen] = [p for p in sample.processes if protected(p)]
    user = next(p for p in sample.processes if p.kind == "user")
    main.state.selection.toggle("demo-a", user)
    main.state.selection.toggle("demo-a", chosen)
    await pilot.press("x")
    screen = await dialog(pilot)
    await wait_for(pilot, lambda: "Not run:" in dialog_text(app))
    return screen, user, chosen


async def test_a_selection_with_a_monitor_runs_nothing_until_the_monitor_is_included(tmp_path: Path) -> None:
    app = sim_app(tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        screen, user, monitor = await planned_with(pilot, lambda p: p.protected == "monitor")
        text = dialog_text(app)
        assert f"{monitor.pid} (nv-hostengine) is " in text and "p includes it" in text, text
        assert screen.runnable == () and "Nothing to stop" in text, text
        await pilot.press("ctrl+k")  # nothing to confirm: the dialog stays, nothing is planned to run
        await pilot.pause(0.3)
        assert app.screen is screen and not (tmp_path / "actions.jsonl").exists()
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, IncludeScreen))
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: app.screen is screen)
        await wait_for(pilot, lambda: "Not run:" not in dialog_text(app))
        assert [p.host for p in screen.runnable] == ["demo-a"]
        assert sorted(t.pid for t in screen.runnable[0].targets) == sorted([user.pid, monitor.pid])
        await pilot.press("escape")


async def test_a_protected_process_that_cannot_be_included_says_how_to_go_on(tmp_path: Path) -> None:
    # The probe itself is never signalled, whatever is included: the dialog says the way on is to
    # unselect it, and offers no `p` for it.
    app = sim_app(tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        screen, _, probe = await planned_with(pilot, lambda p: bool(p.protected) and p.protected != "monitor")
        text = " ".join(dialog_text(app).split())
        assert f"{probe.pid} (" in text and "unselect it (space) and plan again" in text, text
        assert "p includes it" not in text and screen.runnable == (), text
        await pilot.press("escape")

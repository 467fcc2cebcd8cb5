"""The dialog for a supervisor's worker says, before the kill, that the supervisor may start it again.

`x` on the worker of the sim's `jobs` scenario (a supervisor that restarts its worker; the recording
tests/fixtures/jobs.jsonl) showed no warning: only the verdict said "parent ... may start it again".
Now the plan's warning names the supervisor and points at `X`, which stops the whole job.
"""

from __future__ import annotations

from typing import Any

from gputui.model import Job, Proc
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.plan import PlanScreen
from gputui.ui.widgets.proc_table import proc_row_key
from tests.support.pilot import dialog, dialog_text, log_text, procs_of, sample_of, wait_for
from tests.support.scenes import JOBS_HOST, _jobs


async def on_the_worker(app: Any, pilot: Any) -> tuple[MainScreen, Job, Proc]:
    """The process table of the jobs host, its cursor on the supervisor's worker."""
    main = await procs_of(pilot, JOBS_HOST)
    sample = sample_of(app, JOBS_HOST)
    [job] = [j for j in sample.jobs if "supervisor" in j.command_line]
    [worker] = [p for p in sample.processes if p.pid in job.members]
    assert main.proc_table.move_to(proc_row_key(worker), scroll=True)
    return main, job, worker


async def test_x_on_a_supervisors_worker_warns_that_the_supervisor_restarts_it() -> None:
    app = _jobs("gputui-dark")
    async with app.run_test(size=(120, 36)) as pilot:
        _, job, worker = await on_the_worker(app, pilot)
        await pilot.press("space", "x")
        screen = await dialog(pilot)
        assert isinstance(screen, PlanScreen)
        assert [t.pid for t in screen.plans[0].targets] == [worker.pid]
        text = dialog_text(app)
        assert f"parent {job.root} `" in text and "supervisor" in text, text
        assert "may start it again" in text and f"stop job {job.id} whole (press X)" in text, text
        assert "clean --job" not in text, text


async def test_X_in_the_dialog_closes_the_plan_and_opens_the_plan_of_the_job_its_warning_names() -> None:
    app = _jobs("gputui-dark")
    async with app.run_test(size=(120, 36)) as pilot:
        main, job, _ = await on_the_worker(app, pilot)
        await pilot.press("space", "x")
        first = await dialog(pilot)
        assert first.check_action("stop_job", ()) is True
        assert "X stop job" in dialog_text(app)
        await pilot.press("X")
        await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen) and app.screen is not first)
        second = await dialog(pilot)
        assert [j.id for p in second.plans for j in p.jobs] == [job.id]
        assert first not in app.screen_stack
        assert f"plan {first.plans[0].id} cancelled" in log_text(main)


async def test_X_is_not_offered_in_a_dialog_without_a_restart_warning() -> None:
    app = _jobs("gputui-dark")
    async with app.run_test(size=(120, 36)) as pilot:
        await on_the_worker(app, pilot)
        await pilot.press("X")  # the whole job: no parent is left out, nothing to warn of
        screen = await dialog(pilot)
        assert not any(w.kind == "restart" for p in screen.plans for w in p.warnings)
        assert screen.check_action("stop_job", ()) is False
        assert "X stop job" not in dialog_text(app)
        await pilot.press("X")
        await pilot.pause()
        assert app.screen is screen

"""The dialog for a supervisor's worker says, before the kill, that the supervisor may start it again.

`x` on the worker of the sim's `jobs` scenario (a supervisor that restarts its worker; the recording
tests/fixtures/jobs.jsonl) showed no warning: only the verdict said "parent ... may start it again".
Now the plan's warning names the supervisor and points at `X`, which stops the whole job.
"""

from __future__ import annotations

from gputui.ui.screens.plan import PlanScreen
from gputui.ui.widgets.proc_table import proc_row_key
from tests.support.pilot import dialog, dialog_text, procs_of, sample_of
from tests.support.scenes import JOBS_HOST, _jobs


async def test_x_on_a_supervisors_worker_warns_that_the_supervisor_restarts_it() -> None:
    app = _jobs("gputui-dark")
    async with app.run_test(size=(120, 36)) as pilot:
        main = await procs_of(pilot, JOBS_HOST)
        sample = sample_of(app, JOBS_HOST)
        [job] = [j for j in sample.jobs if "supervisor" in j.command_line]
        [worker] = [p for p in sample.processes if p.pid in job.members]
        assert main.proc_table.move_to(proc_row_key(worker), scroll=True)
        await pilot.press("space", "x")
        screen = await dialog(pilot)
        assert isinstance(screen, PlanScreen)
        assert [t.pid for t in screen.plans[0].targets] == [worker.pid]
        text = dialog_text(app)
        assert f"parent {job.root} `" in text and "supervisor" in text, text
        assert "may start it again" in text and f"X stops job {job.id}" in text, text

"""A zombie alone is no plan in the dashboard, as in `gputui clean` (exit 4) and the hub (409):
`x` on demo-a's zombie opened the dialog, and confirmed, the verdict said it was stopped, though no
signal reaches a zombie and it stays until its parent reaps it. The sim's processes end with its
probe (the app's fleet stops it)."""

from __future__ import annotations

from pathlib import Path

from gputui.ui.screens.plan import PlanScreen
from gputui.ui.widgets.proc_table import proc_row_key
from tests.support.apps import sim_app
from tests.support.pilot import log_text, ready, redrawn, wait_for


async def test_x_on_a_zombie_says_nothing_would_be_signalled_and_opens_no_dialog(tmp_path: Path) -> None:
    app = sim_app(tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        main = await ready(pilot, gpu_row=0)
        await wait_for(
            pilot, lambda: any(p.kind == "zombie" for p in app.fleet.view("demo-a").sample.processes)
        )
        zombie = next(p for p in app.fleet.view("demo-a").sample.processes if p.kind == "zombie")
        main.gpu_table.move_to("all")
        main.refresh_procs()
        await redrawn(pilot)
        main.proc_table.focus()
        await wait_for(pilot, lambda: main.proc_table.move_to(proc_row_key(zombie)))
        await pilot.press("x")
        await wait_for(pilot, lambda: "nothing was signalled" in log_text(main))
        await pilot.pause(0.3)
        assert not isinstance(app.screen, PlanScreen)
        assert f"{zombie.pid}" in log_text(main) and "zombie" in log_text(main)
        assert not (tmp_path / "actions.jsonl").exists()  # nothing was planned to be sent

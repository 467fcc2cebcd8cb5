"""The host stays live while a plan runs, on a real GPU: two CUDA jobs of the test's own on GPU 0,
one that exits at SIGTERM and one that ignores it (so the plan waits its whole term timeout before
SIGKILL). Before that SIGKILL, a new NVML sample must show the first job gone and GPU 0's memory
lower: the dashboard sees the memory drain instead of a frozen host. The verdict still comes from the
probe's verification. The app's probe reads NVML on this machine (the local transport); the two jobs
are the only processes signalled, by PID."""

from __future__ import annotations

from pathlib import Path

from gputui.config.file import HostSpec
from gputui.ui.screens.main import MainScreen
from gputui.ui.widgets.proc_table import proc_row_key
from tests.support.apps import live_app
from tests.support.pilot import dialog, dialog_text, log_text, sample_of, screen_text, wait_for


async def test_nvml_samples_keep_coming_during_a_plan(cuda_job, tmp_path: Path) -> None:
    quick = cuda_job(gib=4.0, gpu=0)
    stubborn = cuda_job(gib=2.0, gpu=0, ignore_term=True)
    app = live_app(tmp_path, HostSpec(name="local"))
    async with app.run_test(size=(160, 45)) as pilot:

        def listed() -> bool:
            return app.fleet.view("local").sample is not None and {quick.pid, stubborn.pid} <= {
                p.pid for p in sample_of(app, "local").processes
            }

        await wait_for(pilot, listed, 60)
        main = app.screen
        assert isinstance(main, MainScreen)
        main.proc_table.focus()
        await pilot.pause(0.5)
        procs = {p.pid: p for p in sample_of(app, "local").processes}
        used_before = next(g.memory_used for g in sample_of(app, "local").gpus if g.index == 0)
        for pid in (quick.pid, stubborn.pid):
            assert main.proc_table.move_to(proc_row_key(procs[pid]), scroll=True)
            await pilot.press("space")
        await pilot.press("x")
        await dialog(pilot)
        await pilot.press("ctrl+k")
        for _ in range(3):  # a confirmation before the targets showed is refused: press again
            await pilot.pause(1.0)
            if isinstance(app.screen, MainScreen):
                break
            print("dialog still open:", dialog_text(app)[-400:])
            await pilot.press("ctrl+k")
        try:
            await wait_for(pilot, lambda: f"{stubborn.pid} SIGTERM sent" in log_text(main), 60)
        except AssertionError:
            print("log:", log_text(main)[-1500:], "\nscreen:", screen_text(app)[-1500:])
            raise
        signalled = app.fleet.view("local").received

        def killed() -> bool:
            return f"{stubborn.pid} SIGKILL sent" in log_text(main)

        def drained() -> bool:
            now = sample_of(app, "local")
            gpu0 = next(g.memory_used for g in now.gpus if g.index == 0)
            return (
                app.fleet.view("local").received > signalled
                # gone, or a zombie that holds nothing (its parent, this test, reaps it at the end)
                and all(p.pid != quick.pid or p.kind == "zombie" for p in now.processes)
                and gpu0 is not None
                and used_before is not None
                and gpu0 < used_before
            )

        await wait_for(pilot, lambda: drained() or killed(), 60)
        print("drained before SIGKILL:", drained() and not killed(), "last sample after SIGTERM (s):",
              app.fleet.view("local").received - signalled)  # fmt: skip
        assert not killed(), "no NVML sample came while the plan waited for its SIGTERM to take"
        await wait_for(pilot, lambda: "verdict:" in log_text(main), 60)
        logged = log_text(main)
        print(logged[-600:])
        assert f"{stubborn.pid} SIGKILL sent" in logged, logged
        assert "verdict: stopped" in logged, logged

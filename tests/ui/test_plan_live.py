"""The host stays live while a plan runs: its samples keep coming, so the tables show the memory drain.

A plan stops the demo host's vLLM server (it exits at SIGTERM) and its embedding server (it ignores
SIGTERM, so the plan waits its whole term timeout before SIGKILL). Before the verdict, the host's
samples must keep arriving: the server gone from the sample and from the process table, GPU 0's
memory back, while the plan still waits on the other. The verdict still comes from the probe's
verification. Every process here was started by the test's own sim probe, which ends them all when
the app stops the fleet.
"""

from __future__ import annotations

from pathlib import Path

from gputui.model import Proc
from gputui.ui.screens.main import MainScreen
from gputui.ui.widgets.proc_table import proc_row_key
from tests.support.apps import sim_app
from tests.support.pilot import dialog, log_text, ready, redrawn, sample_of, wait_for


def _by_name(procs: tuple[Proc, ...] | list[Proc], script: str) -> Proc:
    [proc] = [p for p in procs if p.kind == "user" and script in p.command_line]
    return proc


async def test_samples_keep_coming_during_a_plan_and_show_the_memory_drain(tmp_path: Path) -> None:
    app = sim_app(tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        main = await ready(pilot, gpu_row=0)  # the host's view ("all"): every process
        main.proc_table.focus()
        sample = sample_of(app)
        server = _by_name(sample.processes, "vllm_serve.py")  # GPUs 0 and 1: exits at SIGTERM
        stubborn = _by_name(sample.processes, "serve_embed.py")  # GPU 3: ignores SIGTERM
        used_before = next(g.memory_used for g in sample.gpus if g.index == 0)
        for proc in (server, stubborn):
            assert main.proc_table.move_to(proc_row_key(proc), scroll=True)
            await pilot.press("space")
        await pilot.press("x")
        await dialog(pilot)
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        await wait_for(pilot, lambda: f"{stubborn.pid} SIGTERM sent" in log_text(main))
        signalled = app.fleet.view("demo-a").received

        def verdict() -> bool:
            return "verdict:" in log_text(main)

        def killed() -> bool:  # the term timeout is over: the plan's wait has ended
            return f"{stubborn.pid} SIGKILL sent" in log_text(main)

        def drained() -> bool:
            now = sample_of(app)
            gpu0 = next(g.memory_used for g in now.gpus if g.index == 0)
            return (
                app.fleet.view("demo-a").received > signalled
                and all(p.pid != server.pid for p in now.processes)
                and gpu0 is not None
                and used_before is not None
                and gpu0 < used_before
            )

        await wait_for(pilot, lambda: drained() or killed())
        assert not killed(), "no sample came while the plan waited for its SIGTERM to take"
        await redrawn(pilot)
        rows = main.proc_table._rows
        assert proc_row_key(server) not in rows
        assert killed() or proc_row_key(stubborn) in rows
        # The plan still ends on the probe's verification: the stubborn one was SIGKILLed.
        await wait_for(pilot, verdict)
        logged = log_text(main)
        assert f"{stubborn.pid} SIGKILL sent" in logged, logged
        assert "verdict: stopped, memory released in " in logged, logged

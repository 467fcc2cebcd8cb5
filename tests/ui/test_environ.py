"""A process's environment from the detail screen (`e`; issue 19, item 12), on a real sim probe:
its variables shown literally, the values of secret-looking names hidden until `s` asks for them.

The processes read are the sim's (ended with its probe) and a sleeper this test starts and reaps.
"""

from __future__ import annotations

from pathlib import Path

from gputui.probe.procfs import read_stat
from gputui.ui.screens.environ import HIDDEN, EnvironScreen
from gputui.ui.screens.proc_detail import ProcDetailScreen
from tests.support.apps import sim_app
from tests.support.pilot import ready, screen_text, wait_for
from tests.support.sleepers import end, sleeper


async def test_e_on_the_detail_shows_the_environment_secrets_hidden_until_asked(tmp_path: Path) -> None:
    app = sim_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot, gpu_row=0)
        sample = app.fleet.view("demo-a").sample
        assert sample is not None
        user = next(p for p in sample.processes if p.kind == "user")
        app.push_screen(ProcDetailScreen("demo-a", user))
        await wait_for(pilot, lambda: isinstance(app.screen, ProcDetailScreen))
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, EnvironScreen))
        screen = app.screen
        assert isinstance(screen, EnvironScreen)
        await wait_for(pilot, lambda: screen.status != "reading")
        # Drawn: the title, then (a layout later, on a busy machine) the variables read.
        await wait_for(
            pilot, lambda: f"Environment of {user.pid}" in screen_text(app) and "LANG" in screen_text(app)
        )
        text = screen_text(app)
        assert f"Environment of {user.pid}" in text and "LANG" in text and "C.UTF-8" in text, text
        assert "variables read from /proc on demo-a" in text
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, ProcDetailScreen))

        # A process of this test's own, with a secret in its environment and escapes in a value.
        env = {"PLAIN": "visible-value", "GPUTUI_TEST_TOKEN": "s3cret-value", "ESCAPES": "\x1b[2Jboom"}
        proc = sleeper(env=env)
        try:
            start = read_stat(proc.pid).start_time
            app.push_screen(EnvironScreen("demo-a", proc.pid, start))
            await wait_for(pilot, lambda: isinstance(app.screen, EnvironScreen))
            screen = app.screen
            assert isinstance(screen, EnvironScreen)
            await wait_for(pilot, lambda: screen.status == "read")
            await wait_for(pilot, lambda: "visible-value" in screen_text(app))  # drawn, a layout later
            text = screen_text(app)
            assert "visible-value" in text and "GPUTUI_TEST_TOKEN" in text and HIDDEN in text
            assert "s3cret" not in text and "1 secret-looking value hidden (s shows it)" in text
            assert "\\e[2Jboom" in text and "\x1b" not in text  # shown literally, never run
            await pilot.press("s")
            await wait_for(pilot, lambda: "s3cret-value" in screen_text(app))
            await pilot.press("s")
            await pilot.pause()
            assert "s3cret" not in screen_text(app)  # hidden again at once
        finally:
            end(proc)
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.status == "gone")
        assert f"PID {proc.pid} has exited" in screen_text(app)

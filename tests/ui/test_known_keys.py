"""The keys people bring from htop and nvitop: F1 help, F3 (search) and F4 filter, F5 tree, F6 sort,
F9 a signal menu, F10 quit; nvitop's one-key signals on the selected process (T SIGTERM, K SIGKILL,
I SIGINT), each through the same plan dialog as x, which opens on Cancel. The keys they took from
gputui moved: the next theme is ctrl+t, the idle holders H."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Button, OptionList

from gputui.ui.screens.choose import ChooseScreen
from gputui.ui.screens.help import HelpScreen
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.plan import PlanScreen
from tests.support.apps import build_app, sim_app
from tests.support.pilot import dialog, dialog_text, log_text, procs_of, ready, redrawn, wait_for

LADDERS = {
    "T": ("term", "SIGTERM -> wait up to"),
    "K": ("kill", "SIGKILL at once"),
    "I": ("int", "SIGINT -> wait"),
}


def alive(pid: int, start_time: int | None) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return False
    return fields[0] != "Z" and int(fields[19]) == start_time


async def back_to_main(pilot: Any) -> None:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, MainScreen))
    await pilot.pause()


@pytest.mark.parametrize("key", list(LADDERS))
async def test_t_k_i_plan_the_process_under_the_cursor_with_their_signal(key: str) -> None:
    app = build_app()
    app.fresh_timeout = 0
    async with app.run_test(size=(120, 36)) as pilot:
        main = await procs_of(pilot)
        await pilot.press("x")  # what x plans for the process under the cursor
        [as_x] = (await dialog(pilot)).plans
        await pilot.press("escape")
        await back_to_main(pilot)
        await pilot.press(key)
        screen = await dialog(pilot)
        assert isinstance(app.focused, Button) and app.focused.id == "plan-cancel"  # enter cancels
        [plan] = screen.plans
        signals, words = LADDERS[key]
        assert plan.kill.signals == signals and as_x.kill.signals == "term"
        assert (
            [(t.pid, t.start_time) for t in plan.targets]
            == [(t.pid, t.start_time) for t in as_x.targets]
            != []
        )
        assert words in dialog_text(app)
        await pilot.press("enter")
        await back_to_main(pilot)
        assert "cancelled: nothing signalled" in log_text(main)


async def test_k_kills_the_process_at_once_once_confirmed(tmp_path: Path) -> None:
    app = sim_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        main = await ready(pilot, gpu_row=1)  # GPU 0: the vLLM server
        main.proc_table.focus()
        await redrawn(pilot)
        sample = app.fleet.view("demo-a").sample
        assert sample is not None
        [server] = [p for p in sample.processes if p.key == main.proc_table.cursor_proc_key]
        assert server.kind == "user"
        await pilot.press("K")
        await dialog(pilot)
        await pilot.press("ctrl+k")
        await back_to_main(pilot)
        await wait_for(pilot, lambda: "verdict:" in log_text(main))
        logged = log_text(main)
        assert f"{server.pid} SIGKILL sent" in logged and "SIGTERM" not in logged, logged
        await wait_for(pilot, lambda: not alive(server.pid, server.start_time))


async def test_function_keys_do_what_htop_s_do() -> None:
    app = build_app()
    app.fresh_timeout = 0
    async with app.run_test(size=(120, 36)) as pilot:
        main = await procs_of(pilot)
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await back_to_main(pilot)
        for key in ("f3", "f4"):  # search and filter: the filter box of the focused table
            await pilot.press(key)
            await pilot.pause()
            assert main.filters.bar.has_focus and main.filters.bar.target == "procs", key
            await pilot.press("escape")
            await pilot.pause()
        main.proc_table.focus()
        await pilot.press("f5")
        await redrawn(pilot)
        assert main.proc_table.tree_mode
        await pilot.press("f5")
        await redrawn(pilot)
        assert not main.proc_table.tree_mode

        # F6: the focused table's columns, by name; the one chosen sorts it.
        await pilot.press("f6")
        await wait_for(pilot, lambda: isinstance(app.screen, ChooseScreen))
        options = app.screen.query_one(OptionList)
        labels = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert labels[0].startswith("1 PID") and any(label.startswith("8 RSS") for label in labels), labels
        await pilot.press("home", *["down"] * 7, "enter")
        await back_to_main(pilot)
        assert main.proc_table.sort_column is not None and main.proc_table.sort_column[0] == "rss"

        # F9: the signal ladders for the process under the cursor, then the plan dialog.
        await pilot.press("f9")
        await wait_for(pilot, lambda: isinstance(app.screen, ChooseScreen))
        await pilot.press("down", "enter")  # the second: SIGINT first
        screen = await dialog(pilot)
        assert screen.plans[0].kill.signals == "int"
        await pilot.press("escape")
        await back_to_main(pilot)

        await pilot.press("f10")
        await wait_for(pilot, lambda: app._exit)


async def test_the_keys_nvitop_took_moved_theme_to_ctrl_t_idle_holders_to_h() -> None:
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        main = await procs_of(pilot)
        theme = app.theme
        await pilot.press("ctrl+t")
        await redrawn(pilot)
        assert app.theme != theme
        await pilot.press("T")
        await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))  # not a theme any more
        await pilot.press("escape")
        await back_to_main(pilot)
        assert main.is_attached

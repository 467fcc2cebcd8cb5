"""MIG instances in the GPU table and MPS in the process table and the plan dialog (Pilot, on the
recorded "mig" and "mps" sim scenarios: tests/fixtures/mig.jsonl, mps.jsonl)."""

from __future__ import annotations

import re
from typing import Any

from gputui.ui.screens.plan import IncludeScreen, PlanScreen
from gputui.ui.widgets.proc_table import ProcTable
from tests.support.pilot import screen_text, settle, wait_for
from tests.support.scenes import SCENES


def dialog_text(app: Any) -> str:
    """The screen's words with borders and line breaks gone, so a wrapped line reads as one."""
    return " ".join(re.sub(r"[┃│╭╮╰╯─━┏┓┗┛]", " ", screen_text(app)).split())


async def test_mig_instances_are_rows_under_their_gpu() -> None:
    scene = SCENES["mig"]
    app = scene.build("gputui-dark")
    async with app.run_test(size=scene.size) as pilot:
        await settle(pilot)
        assert app._main is not None
        table = app._main.gpu_table
        keys = [str(table.coordinate_to_cell_key((row, 0)).row_key.value) for row in range(table.row_count)]
        assert keys[:6] == ["all", "0", "0/1.0", "0/2.0", "0/5.0", "1"]  # in the order shown
        text = screen_text(app)
        assert "0/1.0  └ MIG 3g.71gb (sim)" in text and "46.0/71.0 GiB" in text
        assert "0/5.0  └ MIG 1g.18gb (sim)" in text and "· idle" in text
        # The process table names the instance; a MIG row's cursor stands for its GPU.
        assert text.count("0:1.0") == 2 and text.count("0:2.0") == 1
        table.focus()
        await pilot.press("down", "down", "down")
        await pilot.pause()
        assert table.cursor_key == "0/2.0" and table.cursor_gpu == 0
        procs = app.screen.query_one(ProcTable)
        await wait_for(pilot, lambda: procs.row_count == 3)


async def test_mps_marks_and_the_plan_warns_that_the_server_ends_its_clients() -> None:
    scene = SCENES["mps"]
    app = scene.build("gputui-dark")
    async with app.run_test(size=scene.size) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert text.count("■ mps-cli") == 3 and "○ mps-srv" in text and "○ mps-ctl" in text
        assert "MPS server (3 clients end with it) · python…" in text  # the note, whole; the command cut
        main = app._main
        assert main is not None
        sample = app.fleet.view("s").sample
        assert sample is not None
        [server] = [p for p in sample.processes if p.mps == "server"]
        clients = sorted(p.pid for p in sample.processes if p.mps == "client")
        main.state.selection.toggle("s", server)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))
        screen: Any = app.screen
        await wait_for(pilot, lambda: "Left alone" in dialog_text(app))
        assert "MPS server: protected (stopping it ends its 3 clients)" in dialog_text(app)
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, IncludeScreen))
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.pause()
        shown = dialog_text(app)
        warning = (
            f"! {server.pid} is the MPS server: stopping it ends all its clients: 3 processes "
            f"({', '.join(map(str, clients))})"
        )
        assert warning in shown
        await pilot.press("escape")  # cancelled: nothing is signalled (a recording, besides)

"""A host's name in a dialog's title is shown literally. Names are one printable word (the host
name rule), so `gpu[/b]` is a name: as Textual markup its closing tag matched nothing, and the
process detail, the environment and the signal dialog ended the dashboard with a MarkupError."""

from __future__ import annotations

from typing import Any

import pytest
from textual.command import CommandPalette
from textual.screen import Screen

from gputui.ui.screens.environ import EnvironScreen
from gputui.ui.screens.proc_detail import ProcDetailScreen
from gputui.ui.screens.signal import SignalScreen
from tests.support.apps import build_app, recording
from tests.support.pilot import screen_text, settle, wait_for

NAME = "gpu[/b]"


def _screens(host: str, proc: Any) -> list[Screen[Any]]:
    return [
        ProcDetailScreen(host, proc),
        EnvironScreen(host, proc.pid, proc.start_time or 0),
        SignalScreen(host, proc.pid, "python [/] serve"),
    ]


@pytest.mark.parametrize("which", [0, 1, 2])
async def test_a_name_that_looks_like_markup_is_a_title_like_any_other(which: int) -> None:
    app = build_app((NAME,), records={NAME: list(recording("demo-a"))})
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        sample = app.fleet.view(NAME).sample
        assert sample is not None
        proc = next(p for p in sample.processes if p.kind == "user")
        screen = _screens(NAME, proc)[which]
        app.push_screen(screen)
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.pause()
        await wait_for(pilot, lambda: f"· {NAME} " in screen_text(app))  # the title, drawn literally
        assert app.is_running


async def test_the_command_palette_lists_a_name_that_looks_like_markup_literally() -> None:
    """The palette reads a str as markup too: "Switch to host gpu[/b]" ended the dashboard when
    ctrl+p opened it (and again when the query matched it)."""
    app = build_app(("demo-a", NAME), records={NAME: list(recording("demo-a"))})
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
        await wait_for(pilot, lambda: "Search for commands" in screen_text(app))  # all listed (found)
        await pilot.press(*"switch to host")  # the hits that name hosts, both in sight
        await wait_for(pilot, lambda: f"Switch to host {NAME}" in screen_text(app))
        assert "Switch to host demo-a" in screen_text(app) and app.is_running
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, CommandPalette))
        assert app.is_running

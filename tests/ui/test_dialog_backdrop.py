"""Every dialog is a modal over the screen it was opened on, which shows through dimmed: the signal
picker (`k`) and the environment (`e`) over the process detail, F9's and F6's menus over the
dashboard. The signal picker blanked the screen: its background was opaque."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest

from gputui.ui.screens.choose import ChooseScreen
from gputui.ui.screens.dialog import Dialog
from gputui.ui.screens.environ import EnvironScreen
from gputui.ui.screens.proc_detail import ProcDetailScreen
from gputui.ui.screens.signal import SignalScreen
from tests.support.apps import build_app
from tests.support.demopids import demo_pid
from tests.support.pilot import procs_of, redrawn, wait_for

NOTEBOOK = str(demo_pid("notebook_kernel.py"))


def shown(app: Any) -> str:
    """Every word the terminal shows, the screens behind a dialog's included (as the app composes
    them: what an SVG screenshot has)."""
    svg = html.unescape(app.export_screenshot())
    return " ".join(re.sub(r"<[^>]+>", " ", svg).split())


async def over(pilot: Any, keys: tuple[str, ...], dialog: type[Dialog[Any]]) -> Dialog[Any]:
    app = pilot.app
    main = await procs_of(pilot)
    table = main.proc_table
    table.move_to(next(k for k in table.rows_data() if k.startswith(f"{NOTEBOOK}:")))
    await redrawn(pilot)
    await pilot.press(*keys)
    await wait_for(pilot, lambda: isinstance(app.screen, dialog))
    await pilot.pause(0.3)
    return app.screen  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("keys", "dialog", "behind"),
    [
        (("d", "k"), SignalScreen, f"Process {NOTEBOOK} · demo-a"),
        (("d", "e"), EnvironScreen, f"Process {NOTEBOOK} · demo-a"),
        (("f9",), ChooseScreen, "Processes · demo-a"),
        (("f6",), ChooseScreen, "Processes · demo-a"),
    ],
    ids=["signal-over-detail", "environ-over-detail", "f9-over-main", "f6-over-main"],
)
async def test_a_dialog_shows_the_screen_behind_it(
    keys: tuple[str, ...], dialog: type[Dialog[Any]], behind: str
) -> None:
    app = build_app()
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await over(pilot, keys, dialog)
        below = app.screen_stack[-2]
        assert screen.styles.background.a < 1, screen.styles.background  # dimmed, not blank
        assert below in app._background_screens
        if keys[0] == "d":
            assert isinstance(below, ProcDetailScreen)
        assert behind in shown(app)

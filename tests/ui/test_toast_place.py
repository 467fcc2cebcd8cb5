"""Toasts (a verdict, an export, a refusal) sit inside the process table's pane, never on a pane's
border, nor on the log, the legend or the footer: at 80x24 and 160x40, one or several, with the
action log shown or not. (Where the pane has room for fewer toasts than are shown, 80x24 with the log
open, the others stack up over the GPU table.)"""

from __future__ import annotations

import pytest

from tests.support.apps import build_app
from tests.support.pilot import redrawn, screen_text, settle, wait_for

BORDERS = set("─━═│┃║┌┐└┘╭╮╰╯├┤┬┴┼┏┓┗┛▁▔▏▕")  # the box lines of the panes (and Textual's tall borders)


def covered(before: list[str], after: list[str]) -> list[tuple[int, int, str]]:
    """(row, column, character) of every border character `after` no longer shows."""
    out = []
    for row, (was, now) in enumerate(zip(before, after, strict=True)):
        for col, char in enumerate(was):
            if char in BORDERS and (col >= len(now) or now[col] != char):
                out.append((row, col, char))
    return out


@pytest.mark.parametrize(
    ("size", "toasts", "log"),
    [
        ((80, 24), 1, False),
        ((80, 24), 2, False),
        ((80, 24), 1, True),  # the process table has 4 rows left: room for one toast
        ((160, 40), 1, False),
        ((160, 40), 2, False),
        ((160, 40), 2, True),
    ],
    ids=["80x24", "80x24-2", "80x24-log", "160x40", "160x40-2", "160x40-2-log"],
)
async def test_a_toast_covers_no_border_legend_or_footer(
    size: tuple[int, int], toasts: int, log: bool
) -> None:
    app = build_app()
    async with app.run_test(size=size, notifications=True) as pilot:  # run_test leaves them out
        await settle(pilot)
        main = app._main
        assert main is not None
        main.select_host("demo-a")
        if log:
            await pilot.press("l")
        await redrawn(pilot)
        before = screen_text(app).splitlines()
        for i in range(toasts):
            app.notify("GPU 2 clean: 53.0 GiB released in 1.2 s, 3 processes stopped", title=f"Verdict {i}")
        await wait_for(pilot, lambda: len(app.screen.query("Toast")) == toasts)
        await pilot.pause(0.5)
        after = screen_text(app).splitlines()
        assert after != before  # the toasts are drawn
        assert covered(before, after) == [], "\n".join(after)
        assert after[-2:] == before[-2:], "\n".join(after)  # the legend and the footer

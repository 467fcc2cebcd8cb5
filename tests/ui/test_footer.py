"""The footer shows whole keys only (issue 19): the keys that do not fit before the command palette's
key are left out, never drawn under it, cut (`i GPU` for `i GPU view`, with `l Log`, `t Tree`,
`J Jobs` hidden beneath it without a sign)."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets._footer import FooterKey

from gputui.ui.widgets.footer import Footer
from tests.support.apps import build_app
from tests.support.pilot import redrawn, screen_text, settle

SIZES = [(80, 24), (100, 30), (120, 36), (160, 40), (200, 50)]


def keys(app: Any) -> tuple[list[FooterKey], FooterKey]:
    footer = app.screen.query_one(Footer)
    found = list(footer.query(FooterKey))
    palette = next(k for k in found if k.has_class("-command-palette"))
    return [k for k in found if k is not palette], palette


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("focus", ["fleet", "procs"])
async def test_every_key_shown_is_whole(size: tuple[int, int], focus: str) -> None:
    app = build_app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        main = app._main
        if focus == "procs":
            main.select_host("demo-a")
            main.proc_table.focus()
        await redrawn(pilot)
        await pilot.pause()
        shown, palette = keys(app)
        line = screen_text(app).splitlines()[-1]
        assert "ctrl+p palette" in line
        visible = [k for k in shown if k.display]
        assert visible, line
        for key in visible:
            assert key.region.right <= palette.region.x, f"{key.key_display} {key.description} is cut"
            assert f"{key.key_display} {key.description}".strip() in line, line
        hidden = [k for k in shown if not k.display]
        if hidden:  # what is left out is the end of the line, never a key in the middle
            assert shown.index(hidden[0]) == len(visible)
        if size[0] >= 200:
            assert not hidden

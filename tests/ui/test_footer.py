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


# What the footer shows per focused pane (issue 36): the keys that pane is for first, then help and
# quit; at 160 columns the rest follow. The process table's x, the GPU table's f, F and i, the fleet's
# o were hidden at 80 columns behind the keys every table shares.
FOOTERS = {
    ((80, 24), "procs"): "space Select  x Plan  d Detail  ? Help  q Quit  t Tree",
    ((80, 24), "gpus"): "f Free GPU  F Free host  i GPU view  ? Help  q Quit  / Filter",
    ((80, 24), "fleet"): "o Free only  i GPU view  f Free GPU  ? Help  q Quit  / Filter",
    ((160, 40), "procs"): "space Select  x Plan  d Detail  ? Help  q Quit  t Tree  J Jobs  X Stop job  "
    "/ Filter  1-9 Sort  i GPU view  l Log  U Users",
    ((160, 40), "gpus"): "f Free GPU  F Free host  i GPU view  ? Help  q Quit  / Filter  l Log  U Users  "
    "X Stop job  t Tree  J Jobs  x Plan",
    ((160, 40), "fleet"): "o Free only  i GPU view  f Free GPU  ? Help  q Quit  / Filter  1-9 Sort  U Users  "
    "F Free host  l Log  t Tree  J Jobs  x Plan  X Stop job",
    ((160, 40), "hosts"): "F Free host  U Users  ? Help  q Quit  / Filter  l Log  i GPU view  t Tree",
}


@pytest.mark.parametrize(("size", "pane"), list(FOOTERS), ids=[f"{w}x{h}-{p}" for (w, h), p in FOOTERS])
async def test_the_footer_ranks_the_keys_of_the_focused_pane(size: tuple[int, int], pane: str) -> None:
    app = build_app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        main = app._main
        if pane in ("procs", "gpus"):
            main.select_host("demo-a")
        await redrawn(pilot)
        main.query_one(f"#{pane}").focus()
        await redrawn(pilot)
        await pilot.pause()
        line = screen_text(app).splitlines()[-1]
        assert line.strip().startswith(FOOTERS[size, pane]), line
        assert line.rstrip().endswith("ctrl+p palette")

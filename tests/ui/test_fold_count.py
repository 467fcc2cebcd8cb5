"""A folded family says how many rows it keeps out of view, where it can be read (issue 19, item
12): on screen, at every size, however long the command beside it."""

from __future__ import annotations

import pytest

from gputui.ui import tree
from gputui.ui.widgets.proc_table import CONTEXT, proc_row_key
from tests.support.pilot import procs_of, redrawn, sample_of, screen_text
from tests.support.scenes import family_app, launched


@pytest.mark.parametrize("size", [(80, 24), (120, 36), (200, 50)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_a_folded_family_shows_how_many_it_hides(size: tuple[int, int]) -> None:
    app = family_app()
    async with app.run_test(size=size) as pilot:
        main = await procs_of(pilot)
        table = main.proc_table
        await pilot.press("t")
        await redrawn(pilot)
        sample = sample_of(app)
        launcher = CONTEXT + proc_row_key(sample.parents[0])
        assert table.move_to(launcher)
        shown = table.row_count
        await pilot.press("minus")
        await redrawn(pilot)
        # Its jobs and what hangs under them (a zombie, torchrun's ranks): every row that left.
        hidden = shown - table.row_count
        assert hidden > len(launched(sample))
        [row] = [line for line in screen_text(app).splitlines() if f"{sample.parents[0].pid} " in line]
        assert tree.fold_words(hidden) in row, row  # beside the branch, before the command


def test_fold_words_count_one_and_many() -> None:
    assert tree.fold_words(1) == "1 folded"
    assert tree.fold_words(7) == "7 folded"

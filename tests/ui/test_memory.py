"""What the app lets go of: widgets it replaced, as the operator moves around."""

from __future__ import annotations

import gc

from textual.widgets._footer import FooterKey

from tests.support.apps import build_app
from tests.support.pilot import settle


def detached_footer_keys() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, FooterKey) and not o.is_attached)


async def test_switching_views_does_not_keep_the_old_footer_keys() -> None:
    """Footer recomposes at every focus change; Textual binds each new key to the footer and would
    keep every old one alive (gputui.ui.widgets.footer)."""
    app = build_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        for _ in range(24):  # fleet -> demo-a -> demo-b -> fleet ..., each moves the focus
            await pilot.press("right_square_bracket")
            await pilot.pause()
        await pilot.pause(0.2)
        assert detached_footer_keys() <= 40  # at most the last recompose's, not 24 x ~15

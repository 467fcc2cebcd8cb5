"""When the app redraws: at once after a quiet spell, never lost, nothing while a modal is open."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from gputui.ui import app as app_module

from .conftest import build_app, redrawn, wait_for


def count_redraws(app: app_module.GpuTuiApp) -> list[float]:
    calls: list[float] = []
    original = app._redraw

    def redraw() -> None:
        calls.append(time.monotonic())
        original()

    app._redraw = redraw  # type: ignore[method-assign]
    return calls


async def test_a_change_after_a_quiet_spell_is_drawn_without_waiting_for_a_timer() -> None:
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: all(v.sample is not None for v in app.fleet.hosts))
        await redrawn(pilot)
        calls = count_redraws(app)
        app._last_redraw = time.monotonic() - 10  # quiet for a while
        app._changed.add("demo-a")
        app.want_redraw()
        assert app._redraw_due
        await pilot.pause()  # one turn of the message loop, no sleep
        assert len(calls) == 1 and "demo-a" not in app._changed


async def test_a_redraw_due_in_a_nanosecond_is_never_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last redraw was REDRAW_GAP ago but for a nanosecond: a one-shot Textual timer whose
    delay has passed by the time its task starts is skipped, never fired, and with the redraw
    marked due nothing would ever be drawn again (what most likely stalled one memory soak run)."""
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: all(v.sample is not None for v in app.fleet.hosts))
        await redrawn(pilot)
        calls = count_redraws(app)
        now = time.monotonic()
        app._last_redraw = now - app_module.REDRAW_GAP + 1e-9
        app._redraw_due = False
        app._changed.add("demo-a")
        with monkeypatch.context() as patch:
            patch.setattr(app_module, "time", SimpleNamespace(monotonic=lambda: now))
            app.want_redraw()  # wait = 1e-9 s: scheduled, not drawn at once
        assert calls == []
        await wait_for(pilot, lambda: len(calls) == 1, timeout=3.0)
        assert "demo-a" not in app._changed


async def test_changes_coming_fast_are_drawn_together() -> None:
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: all(v.sample is not None for v in app.fleet.hosts))
        await redrawn(pilot)
        calls = count_redraws(app)
        app._last_redraw = time.monotonic()  # just redrawn: the next one waits for the gap
        for host in ("demo-a", "demo-b", "demo-a"):
            app._changed.add(host)
            app.want_redraw()
        await pilot.pause()
        assert calls == [] and app._changed == {"demo-a", "demo-b"}
        await wait_for(pilot, lambda: len(calls) >= 1, timeout=3.0)
        assert not app._changed
        assert len(calls) == 1

"""When the app redraws: at once after a quiet spell, never lost, nothing while a modal is open."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from gputui.ui import intake as app_module
from gputui.ui.app import GpuTuiApp
from tests.support.apps import build_app
from tests.support.pilot import WAIT, sampled, wait_for


def count_redraws(app: GpuTuiApp, left: list[set[str]] | None = None) -> list[set[str]]:
    """What each redraw from now on drew: the hosts changed since the last one; `left`: what each
    left to draw as it ended. (The 1 s ages tick adds redraws of no host whenever it comes: a busy
    machine can fit one anywhere. The demo's hosts keep sampling: under load a new sample may mark
    a host changed again between a redraw and the test's next line, so what a redraw took is
    looked at as it ends.)"""
    calls: list[set[str]] = []
    original = app._redraw

    def redraw() -> None:
        calls.append(set(app._changed))
        original()
        if left is not None:
            left.append(set(app._changed))

    app._redraw = redraw  # type: ignore[method-assign]
    return calls


async def test_a_change_after_a_quiet_spell_is_drawn_without_waiting_for_a_timer() -> None:
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await sampled(pilot)
        calls = count_redraws(app)
        # No redraw pending: under load a sample may have just scheduled one within the gap, and a
        # pending redraw is one the next change joins (no quiet spell to stage). From here to the
        # pause below nothing awaits, so no sample comes in between.
        await wait_for(pilot, lambda: not app._redraw_due)
        app._last_redraw = time.monotonic() - 10  # quiet for a while
        app._changed.add("demo-a")
        app.want_redraw()
        assert app._redraw_due
        await pilot.pause()  # one turn of the message loop, no sleep
        # Drawn at once, demo-a with it. (Not "nothing left to draw": the demo's hosts keep
        # sampling, and a new sample of demo-a may mark it changed again in the meantime.)
        assert calls and "demo-a" in calls[0]


async def test_a_redraw_due_in_a_nanosecond_is_never_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last redraw was REDRAW_GAP ago but for a nanosecond: a one-shot Textual timer whose
    delay has passed by the time its task starts is skipped, never fired, and with the redraw
    marked due nothing would ever be drawn again (what most likely stalled one memory soak run)."""
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await sampled(pilot)
        left: list[set[str]] = []
        calls = count_redraws(app, left)
        now = time.monotonic()
        app._last_redraw = now - app_module.REDRAW_GAP + 1e-9
        app._redraw_due = False
        app._changed.add("demo-a")
        with monkeypatch.context() as patch:
            patch.setattr(app_module, "time", SimpleNamespace(monotonic=lambda: now))
            app.want_redraw()  # wait = 1e-9 s: scheduled, not drawn at once
        assert calls == []
        await wait_for(pilot, lambda: len(calls) >= 1, timeout=WAIT)
        assert "demo-a" in calls[0] and "demo-a" not in left[0]  # drawn, and taken off what is left


async def test_changes_coming_fast_are_drawn_together(monkeypatch: pytest.MonkeyPatch) -> None:
    # A gap longer than any turn of the loop on a busy machine: nothing can be drawn before it.
    monkeypatch.setattr(app_module, "REDRAW_GAP", 3.0)
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await sampled(pilot)
        await wait_for(pilot, lambda: not app._redraw_due)  # (an ages tick may have one coming)
        left: list[set[str]] = []
        calls = count_redraws(app, left)
        app._last_redraw = time.monotonic()  # just redrawn: the next one waits for the gap
        for host in ("demo-a", "demo-b", "demo-a"):
            app._changed.add(host)
            app.want_redraw()
        await pilot.pause()
        assert calls == [] and app._changed == {"demo-a", "demo-b"}
        await wait_for(pilot, lambda: len(calls) >= 1, timeout=WAIT)
        assert {"demo-a", "demo-b"} <= calls[0] and not left[0]  # one redraw drew both


@pytest.mark.parametrize(
    ("hosts", "per_second"), [(1, 10), (128, 10), (256, 10), (512, 4), (1024, 2), (4096, 2)]
)
def test_a_larger_fleet_redraws_less_often(hosts: int, per_second: int) -> None:
    """Up to 256 hosts, at most 10 redraws a second; 512 hosts' samples are drawn 4 times a second
    (each redraw walks the changed hosts and repaints the rows in view), a thousand and more twice."""
    assert app_module.redraw_gap(hosts) == pytest.approx(1 / per_second)

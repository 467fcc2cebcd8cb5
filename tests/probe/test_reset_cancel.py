"""The reset ladder stops where the app cancels it (its audit log failed: what it cannot record must
not happen): no step starts after the cancel, and persistence mode, once turned off, is turned back
on. On the sim's "preflight" host, whose GPU 1 holds memory no process does (persistence on)."""

from __future__ import annotations

from typing import Any

import pytest

from gputui.probe.run.reset import execute


def ladder(probe: Any, cancel_at: int) -> list[dict[str, Any]]:
    """A reset of GPU 1 whose `stop_requested` says "cancelled" from its `cancel_at`-th question on."""
    asked = 0

    def stop_requested() -> str | None:
        nonlocal asked
        asked += 1
        return "the app's audit log failed: No space left on device" if asked >= cancel_at else None

    events: list[dict[str, Any]] = []
    execute(
        probe,
        {"type": "reset", "v": 1, "id": "r1", "gpu": 1, "dry_run": False},
        events.append,
        stop_requested,
    )
    return events


@pytest.mark.parametrize("cancel_at", [1, 2])
def test_a_cancelled_ladder_takes_no_further_step(sim_probe, cancel_at):
    probe, reader = sim_probe(scenario="preflight")
    events = ladder(probe, cancel_at)
    stages = [(e["stage"], e["result"]) for e in events]
    assert ("cancel", "cancelled") in stages, stages
    assert not any(stage == "reset" for stage, _ in stages), stages
    assert stages[-1] == ("done", "not-reset"), stages
    assert "cancelled by the app" in events[-1]["message"]
    # Before any step: nothing changed; after persistence went off: it is back on.
    persistence = [result for stage, result in stages if stage == "persistence"]
    assert persistence == ([] if cancel_at == 1 else ["off", "on"]), stages
    assert reader.preflight()[1]["persistence"] is True


def test_an_uncancelled_ladder_resets(sim_probe):
    probe, _ = sim_probe(scenario="preflight")
    events = ladder(probe, cancel_at=99)
    assert events[-1]["stage"] == "done" and events[-1]["result"] == "reset", events[-1]

"""Helpers for the UI tests: fleets of replayed recordings, a frozen clock, waiting for redraws."""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from gputui.fleet import Fleet
from gputui.transport.replay import ReplayLink, load_recording
from gputui.ui import GpuTuiApp, make_app

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FROZEN = 1764430000.0  # 2025-11-29 15:26:40 UTC: every sample age reads 0.0 s
QUIET = 3600.0  # a fleet interval longer than any test, so a finished recording never looks stale
HOSTS = ("demo-a", "demo-b")
OPERATOR = "root"  # who owns the recorded processes: no "not yours" warnings in fixed screens


@cache
def recording(name: str) -> tuple[dict[str, Any], ...]:
    return tuple(load_recording(FIXTURES / f"{name}.jsonl"))


# The last sample of what each host name replays in the latest fleet built (its recording, or the
# records a test gave it): what `settle` waits for.
_LAST_SEQ: dict[str, int] = {}


def last_seq(name: str) -> int:
    if name in _LAST_SEQ:
        return _LAST_SEQ[name]
    return max(r["seq"] for r in recording(name) if r["type"] == "sample")


def replay_fleet(
    hosts: tuple[str, ...] = HOSTS,
    *,
    records: dict[str, list[dict[str, Any]]] | None = None,
    loop: bool = False,
    rate: float | None = None,
    interval: float = QUIET,
) -> Fleet:
    fleet = Fleet()
    for name in hosts:
        recs = list(records[name]) if records and name in records else list(recording(name))
        seqs = [r["seq"] for r in recs if r.get("type") == "sample"]
        if seqs:
            _LAST_SEQ[name] = max(seqs)
        fleet.add(name, lambda recs=recs: ReplayLink(recs, loop=loop, rate=rate), interval=interval)
    return fleet


def scratch_log() -> Path:
    """A fresh audit log path for one app (created only if a plan is confirmed): an app built here
    never reads or writes the user's audit log, nor another app's."""
    return Path(tempfile.gettempdir()) / f"gputui-ui-{uuid.uuid4().hex[:12]}" / "actions.jsonl"


def build_app(hosts: tuple[str, ...] = HOSTS, *, interval: float = QUIET, **kwargs: Any) -> GpuTuiApp:
    fleet_kwargs = {k: kwargs.pop(k) for k in ("records", "loop", "rate") if k in kwargs}
    fleet = replay_fleet(hosts, interval=interval, **fleet_kwargs)
    kwargs.setdefault("clock", lambda: FROZEN)
    kwargs.setdefault("log_path", scratch_log())
    kwargs.setdefault("operator", OPERATOR)
    return make_app(fleet, interval=interval, **kwargs)


async def wait_for(pilot: Pilot[Any], predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {getattr(predicate, '__name__', predicate)}")
        await pilot.pause(0.02)


async def settle(pilot: Pilot[Any]) -> None:
    """Until every host has played its whole recording and the screen has drawn it."""
    app: GpuTuiApp = pilot.app  # type: ignore[assignment]

    def all_played() -> bool:
        return all(v.sample is not None and v.sample.seq >= last_seq(v.name) for v in app.fleet.hosts) or any(
            v.status == "down" for v in app.fleet.hosts
        )

    await wait_for(pilot, all_played)
    await redrawn(pilot)


async def redrawn(pilot: Pilot[Any]) -> None:
    """Until the redraw timer has drawn everything that has arrived."""
    app: GpuTuiApp = pilot.app  # type: ignore[assignment]
    await pilot.pause()  # let what was just set (a theme, a key) post its messages first
    await wait_for(pilot, lambda: not app._changed and not app._restyle)
    await asyncio.sleep(0)
    await pilot.pause()


def screen_text(app: GpuTuiApp) -> str:
    """What the terminal shows of the current screen, as plain text, one line per row."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


@pytest.fixture(autouse=True)
def no_cursor_blink(monkeypatch: pytest.MonkeyPatch) -> None:
    """A blinking input cursor makes screenshots depend on timing."""
    original = Input.__init__

    def init(self: Input, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.cursor_blink = False

    monkeypatch.setattr(Input, "__init__", init)


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Wall times (a process's start, in its detail) shown in local time read the same everywhere."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()

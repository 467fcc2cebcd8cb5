"""News: a sample that changes nothing the fleet's views draw is not drawn (gputui/fleet/news.py).

Each rule is checked both ways on the demo's own records: what moves every second (the sample's
number and time, the probe's costs, the host's uptime and load, each process's age, CPU and RSS)
is no news; each thing the fleet table, the host list and the problems show is. Then the app: a
host whose sample has no news is not redrawn, unless the screen shows it in full (its process pane
here); an idle holder is drawn by the ages tick however quiet its samples are.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from gputui.fleet.deltas import SampleIntake
from gputui.fleet.news import has_news
from gputui.fleet.session import HostView, SampleArrived
from gputui.model import Sample
from tests.support.apps import build_app, recording
from tests.support.pilot import main_of, sampled, wait_for

Record = dict[str, Any]


def first_record() -> Record:
    return copy.deepcopy(next(r for r in recording("demo-a") if r["type"] == "sample"))


def user_proc(record: Record) -> Record:
    return next(p for p in record["processes"] if p["kind"] == "user")


def both(change: Callable[[Record], None]) -> tuple[Sample, Sample]:
    """The demo's first sample, and the next one with `change` made (seq and time moved too)."""
    before = first_record()
    after = copy.deepcopy(before)
    after["seq"] += 1
    after["time"] += 1.0
    change(after)
    return Sample.from_wire(before), Sample.from_wire(after)


def _set(path: tuple[Any, ...], value: Any) -> Callable[[Record], None]:
    def change(record: Record) -> None:
        target: Any = record
        for part in path[:-1]:
            target = target[part] if not callable(part) else part(target)
        target[path[-1]] = value

    return change


QUIET = {
    "the probe's costs": _set(("cost_ms", "total"), 9.5),
    "the host's uptime": _set(("host", "uptime"), 99999.0),
    "the host's load": _set(("host", "load1"), 7.25),
    "the scan's age": _set(("scan", "age"), 4.0),
    "a process's age": _set((user_proc, "elapsed"), 12345.0),
    "a process's CPU": _set((user_proc, "cpu_percent"), 87.5),
    "a process's RSS": _set((user_proc, "rss"), 1 << 33),
    "no preflight reading this time": _set(("gpus", 0, "preflight"), None),
}

NEWS = {
    "a GPU's utilization": _set(("gpus", 0, "util_gpu"), 3),
    "a GPU's memory": _set(("gpus", 1, "memory_used"), 1 << 30),
    "a GPU's temperature": _set(("gpus", 2, "temperature"), 91),
    "a GPU's error": _set(("gpus", 3, "error"), "gpu-lost"),
    "a process's GPU memory": _set((user_proc, "gpu_memory"), {"0": 1 << 30}),
    "a process's kind": _set((user_proc, "kind"), "ghost"),
    "a process's user": _set((user_proc, "user"), "mallory"),
    "the host's CPU": _set(("host", "cpu_percent"), 3.5),
    "the host's RAM": _set(("host", "memory_used"), 1 << 33),
    "a process that came": lambda r: r["processes"].append(dict(user_proc(r), pid=777_777, start_time=5)),
    "a process that went": lambda r: r["processes"].remove(user_proc(r)),
    "the scan's unreadable count": _set(("scan", "unreadable"), 3),
}


@pytest.mark.parametrize("what", sorted(QUIET))
def test_what_moves_every_second_is_no_news(what: str) -> None:
    before, after = both(QUIET[what])
    held = {g.index: g.preflight for g in before.gpus if g.preflight is not None}
    assert not has_news(before, after, held)


@pytest.mark.parametrize("what", sorted(NEWS))
def test_what_the_fleet_view_draws_is_news(what: str) -> None:
    before, after = both(NEWS[what])
    assert has_news(before, after, {})


def test_a_preflight_reading_is_news_unless_it_is_the_one_the_host_keeps() -> None:
    before, after = both(lambda r: None)
    readings = {g.index: g.preflight for g in after.gpus if g.preflight is not None}
    assert readings  # the demo's samples carry them
    assert has_news(before, after, {})  # readings the host has none of
    assert not has_news(before, after, readings)


def test_a_hosts_first_sample_is_news_and_the_same_one_again_is_not() -> None:
    view = HostView("demo-a")
    sample = Sample.from_wire(first_record())
    view.record(sample)
    assert view.news
    view.record(sample)  # the same sample again: nothing new
    assert not view.news


def test_deltas_that_move_only_ages_are_no_news_through_the_intake() -> None:
    """The app's intake reuses what a delta did not change; the host's view says no news."""
    intake = SampleIntake()
    view = HostView("demo-a")
    record = first_record()
    view.record(intake.take(record))
    delta = {"type": "sample", "v": 1, "seq": record["seq"] + 1, "time": record["time"] + 1.0,
             "delta": record["seq"], "cost_ms": {"total": 1.5},
             "processes": [{"pid": user_proc(record)["pid"], "start_time": user_proc(record)["start_time"],
                            "elapsed": 99.0}]}  # fmt: skip
    view.record(intake.take(delta))
    assert not view.news
    util = {"type": "sample", "v": 1, "seq": record["seq"] + 2, "time": record["time"] + 2.0,
            "delta": record["seq"] + 1, "gpus": [{"index": 0, "util_gpu": 1}]}  # fmt: skip
    view.record(intake.take(util))
    assert view.news


async def test_a_host_whose_sample_has_no_news_is_not_redrawn_unless_shown_in_full() -> None:
    app = build_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await sampled(pilot)
        main = main_of(app)
        shown = main.procs.scope.host if main.procs.scope is not None else None
        assert shown in ("demo-a", "demo-b")
        other = "demo-b" if shown == "demo-a" else "demo-a"
        await wait_for(pilot, lambda: not app._redraw_due)
        for name in (shown, other):
            view = app.fleet.view(name)
            assert view.sample is not None
            view.record(view.sample)  # the same sample again: no news
            assert not view.news
            app._changed.discard(name)
            app._on_fleet(SampleArrived(view, view.sample))
        assert shown in app._changed  # its process pane shows its ages and CPU: drawn
        assert other not in app._changed  # nothing it shows changed: not drawn
        assert app.received[other] >= app.received[shown] - 1.0  # but its age is its newest sample's


async def test_an_idle_holder_is_drawn_by_the_ages_tick_however_quiet_its_samples() -> None:
    app = build_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await sampled(pilot)
        main = main_of(app)
        drawn: list[set[str]] = []
        original = main.state.problems.update

        def update(touched: Any, *args: Any, **kwargs: Any) -> Any:
            drawn.append({v.name for v in touched})
            return original(touched, *args, **kwargs)

        main.state.problems.update = update  # type: ignore[method-assign]
        after = main.dash.idle_after
        view = app.fleet.view("demo-b")
        assert not view.idle.any_for(after)
        main.refresh_data(set(), ages=True)
        assert not drawn  # no host changed, none has an idle holder: nothing to work out again
        # demo-b's job on GPU 3 at 0 % SM, sample after quiet sample, past the threshold.
        record = copy.deepcopy(next(r for r in recording("demo-b") if r["type"] == "sample"))
        for gpu in record["gpus"]:
            gpu["util_gpu"] = 0
        idle = Sample.from_wire(record)
        t = record["time"]
        for step in range(int(after // 60) + 2):
            view.idle.observe(idle, t + 60.0 * step)
        assert view.idle.any_for(after)
        main.refresh_data(set(), ages=True)
        assert drawn and drawn[-1] == {"demo-b"}

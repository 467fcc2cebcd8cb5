"""The dashboard's garbage-collector settings (cli.tune_gc): what start-up made is frozen out of
every collection, and so is what the fleet holds once each host has sent its first sample (after one
full collection, so that no garbage is frozen with it). Global state of this process: each test puts
it back."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from gputui.cli import dashboard as cli
from gputui.fleet.fleet import Fleet
from gputui.fleet.session import SampleArrived, StatusChanged
from tests.support.apps import replay_fleet


@pytest.fixture
def collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


async def test_the_fleet_is_frozen_out_once_every_host_has_sent_a_sample(collector: None) -> None:
    fleet = replay_fleet(("demo-a", "demo-b"))
    cli.tune_gc(fleet)
    assert gc.get_threshold() == (10_000, 10, 10)  # two hosts: little young state to walk
    kept = [object() for _ in range(3)]  # what a fleet holds from then on

    def collected() -> bool:
        """Whether `kept` is among what the collector walks (frozen objects are not)."""
        return any(o is kept for o in gc.get_objects())

    a, b = fleet.hosts
    fleet._notify(StatusChanged(a))  # not a sample: nothing yet
    fleet._notify(SampleArrived(a, None))
    fleet._notify(SampleArrived(a, None))  # the same host again: demo-b has not spoken
    await asyncio.sleep(0)
    assert collected() and len(fleet.listeners) == 1
    fleet._notify(SampleArrived(b, None))
    assert not collected()
    await asyncio.sleep(0)
    assert fleet.listeners == []  # once: later samples cost nothing


def test_without_a_fleet_only_start_up_is_frozen(collector: None) -> None:
    cli.tune_gc()
    assert gc.get_freeze_count() > 0
    empty = Fleet()
    cli.tune_gc(empty)  # no host to wait for
    assert empty.listeners == []


def test_the_young_generation_grows_with_the_fleet(collector: None) -> None:
    """About what each host's latest sample holds young, within 10,000 and 100,000 objects."""
    assert [cli.young_threshold(n) for n in (0, 2, 100, 128, 512, 1024, 4096)] == [
        10_000, 10_000, 10_000, 12_800, 51_200, 100_000, 100_000
    ]  # fmt: skip
    fleet = Fleet()
    for i in range(256):
        fleet.add(f"h{i}", lambda: None, interval=1.0)  # type: ignore[arg-type, return-value]
    cli.tune_gc(fleet)
    assert gc.get_threshold() == (25_600, 10, 10)

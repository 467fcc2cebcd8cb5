"""The hub's /metrics text (gputui/serve/metrics.py): what it keeps between scrapes follows every change
of a host (a reading, a process gone, a host down or gone, a preflight, hostile text) and is, line for
line, prometheus_client's text of `gputui export`'s families for the same fleet."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.utils import floatToGoString

from gputui.fleet.session import DOWN, HostView
from gputui.serve.metrics import MetricsCache, Values
from gputui.views.metrics import FleetCollector, registry
from gputui.views.readiness import Conditions, is_ready, unready
from tests.support.metricsfleet import GiB, a_fleet_of_every_kind, gpu, proc, renew, view

AGE = "gputui_host_sample_age_seconds{"


def steady(text: str) -> list[str]:
    """The lines but each sample's age (a clock read at another time)."""
    return [line for line in text.splitlines() if not line.startswith(AGE)]


def exporters(views: list[HostView]) -> list[str]:
    return steady(generate_latest(registry(FleetCollector(lambda: views))).decode())


def scraped(cache: MetricsCache, views: list[HostView], versions: dict[str, int]) -> list[str]:
    return steady(cache.text(views, versions).decode())


def busy() -> dict[str, Any]:
    return {
        "gpus": [gpu(0, util=80, used=20 * GiB), gpu(1, util=0, used=GiB)],
        "processes": [
            proc(4242, "user", {0: 20 * GiB}),
            proc(13, "user", {1: GiB}),
            proc(14, "monitor", {}, gpus=[0]),
        ],
    }


def test_a_fleet_of_every_kind_is_written_as_the_exporter_writes_it():
    views = a_fleet_of_every_kind()
    cache = MetricsCache()
    assert scraped(cache, views, {}) == exporters(views)
    assert scraped(cache, views, {}) == exporters(views)  # again, from what it kept


def change_reading(s: dict[str, Any]) -> None:
    s["gpus"][0].update(util_gpu=31, temperature=77, power_draw=512.25)


def change_memory(s: dict[str, Any]) -> None:
    s["processes"][0]["gpu_memory"]["0"] = 18 * GiB
    s["gpus"][0]["memory_used"] = 18 * GiB


def process_gone(s: dict[str, Any]) -> None:
    del s["processes"][1]


def gpu_gone(s: dict[str, Any]) -> None:
    del s["gpus"][1]


def hostile_name(s: dict[str, Any]) -> None:
    s["processes"][0].update(name='x"}\n# HELP evil', user="a\\b")


def preflight_came(s: dict[str, Any]) -> None:
    s["gpus"][0]["preflight"] = {"throttle": ["sw-thermal"], "ecc_corrected": 1, "ecc_uncorrected": 0}


def idle_now(s: dict[str, Any]) -> None:
    s["gpus"][0].update(util_gpu=0, util_mem=0)


CHANGES = [change_reading, change_memory, process_gone, gpu_gone, hostile_name, preflight_came, idle_now]


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c.__name__)
def test_what_is_kept_follows_each_change_of_a_sample(change):
    views = [view("a", busy()), view("b", busy())]
    cache = MetricsCache()
    versions = {"a": 1, "b": 1}
    before = scraped(cache, views, versions)
    sample = busy()
    change(sample)
    renew(views[0], sample, 2)
    versions["a"] += 1  # as the hub's feed moves it at a new sample
    after = scraped(cache, views, versions)
    assert after != before
    assert after == exporters(views) == scraped(MetricsCache(), views, {})


def test_a_host_down_then_back_and_a_host_gone_are_followed():
    views = [view("a", busy()), view("b", busy())]
    cache = MetricsCache()
    versions = {"a": 1, "b": 1}
    scraped(cache, views, versions)
    views[0].status = DOWN
    versions["a"] += 1
    down = scraped(cache, views, versions)
    assert down == exporters(views)
    assert not any('host="a"' in line for line in down if line.startswith("gputui_gpu_memory_used_bytes"))
    views[0].status = "live"
    versions["a"] += 1
    assert scraped(cache, views, versions) == exporters(views)
    del views[0]
    assert scraped(cache, views, versions) == exporters(views)
    assert set(cache.kept) == {"b"}


def test_a_sample_with_the_same_readings_keeps_every_family_text():
    """Only seq and time moved: nothing the families read did, so each family's text is the one kept."""
    views = [view("a", busy())]
    cache = MetricsCache()
    cache.text(views, {"a": 1})
    kept = dict(cache.kept["a"].blocks)
    renew(views[0], busy(), 2)
    assert scraped(cache, views, {"a": 2}) == exporters(views)
    assert all(cache.kept["a"].blocks[name] is block for name, block in kept.items())
    sample = busy()
    change_reading(sample)
    renew(views[0], sample, 3)
    scraped(cache, views, {"a": 3})
    renewed = {name for name, block in cache.kept["a"].blocks.items() if kept.get(name) is not block}
    # GPU 0 stays busy: neither its readiness nor its idle holders moved
    assert renewed == {
        "gputui_gpu_utilization_ratio",
        "gputui_gpu_temperature_celsius",
        "gputui_gpu_power_watts",
    }


def test_a_host_not_versioned_is_read_at_every_scrape():
    views = [view("a", busy())]
    cache = MetricsCache()
    cache.text(views, {})
    sample = busy()
    change_memory(sample)
    renew(views[0], sample, 2)
    assert scraped(cache, views, {}) == exporters(views)


@pytest.mark.parametrize(
    "value", [0.0, -0.0, 1.0, 1e21, 123456789.0, 0.1, -3.5, math.inf, -math.inf, math.nan, 1.39519328256e11]
)
def test_a_value_is_written_as_go_writes_it_again_and_again(value):
    values = Values()
    assert values.text(value) == floatToGoString(value) == values.text(value)


def test_is_ready_agrees_with_unready_on_every_gpu_of_every_kind():
    conditions = Conditions()
    seen = 0
    for v in a_fleet_of_every_kind():
        if v.sample is None:
            continue
        for g in v.sample.gpus:
            pre = v.preflight.get(g.index)
            for quiet in (g, dataclasses.replace(g, util_gpu=0)):
                assert is_ready(quiet, v.sample, conditions, pre) == (
                    not unready(quiet, v.sample, conditions, pre)
                )
                seen += 1
    assert seen > 10

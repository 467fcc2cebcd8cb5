"""Values out of any range in a Prometheus's series (gputui/transport/prometheus.py): a fake of the query
API (aiohttp on 127.0.0.1 port 0 of this test's loop) answers a GPU's memory as 1e308 MiB (past what a
float holds once in bytes), or Inf. The value is refused (unknown), the host stays live, and the
feed's poller lives on: once the value is sane again it is read.
"""

from __future__ import annotations

import json
import time

import pytest

from gputui.config import promql
from gputui.fleet.session import LIVE
from gputui.text.units import MIB
from tests.prom.fakeprom import fake_prometheus, memory_used, prom_fleet
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(120)

HOSTS = ("h1", "h2")


class Series:
    """What the fake answers: each host's DCGM_FI_DEV_FB_USED of GPU 0, in MiB, as text."""

    def __init__(self, used: str) -> None:
        self.used = {"h1": used, "h2": "1000"}
        self.gpu = {"h1": "0", "h2": "0"}  # each host's GPU label, as its exporter wrote it

    def answer(self, query: str) -> bytes:
        now = time.time()
        if query.startswith("label_replace"):  # the times query: each GPU's newest point
            items = [
                {
                    "metric": {"Hostname": h, "gpu": self.gpu[h], "gputui_series": promql.DCGM_KEY},
                    "value": [now, str(now)],
                }
                for h in HOSTS
            ]
        else:
            items = [
                {
                    "metric": {"__name__": name, "Hostname": h, "gpu": self.gpu[h], "UUID": f"GPU-{h}"},
                    "value": [now, value],
                }
                for h in HOSTS
                for name, value in ((promql.DCGM_KEY, self.used[h]), ("DCGM_FI_DEV_FB_FREE", "1000"))
            ]
        data = {"resultType": "vector", "result": items}
        return json.dumps({"status": "success", "data": data}).encode()


@pytest.mark.parametrize("used", ["1e308", "Inf", "-Inf", "NaN"])
async def test_a_value_out_of_range_is_refused_and_the_poller_lives_on(used: str) -> None:
    series = Series(used)
    async with fake_prometheus(series) as url:
        fleet = prom_fleet(url, HOSTS)
        fleet.start()
        try:
            assert await eventually(lambda: all(fleet.view(h).status == LIVE for h in HOSTS), 60), [
                (v.name, v.status, v.reason, v.detail) for v in fleet.hosts
            ]
            assert memory_used(fleet, "h2") == 1000 * MIB
            assert memory_used(fleet, "h1") is None  # refused: unknown, not a number made up
            series.used["h1"] = "100"
            assert await eventually(lambda: memory_used(fleet, "h1") == 100 * MIB, 60), memory_used(
                fleet, "h1"
            )
            assert fleet.view("h1").status == LIVE
        finally:
            await fleet.stop()


@pytest.mark.parametrize("label", ["\u00b2", "\u0663", "3a", "-1", ""])
async def test_a_gpu_label_that_is_no_index_costs_only_its_own_series(label: str) -> None:
    """h1's exporter writes its GPU as `²` (a digit to str.isdigit, not to int), an Arabic-Indic 3,
    or no number: that series is no GPU of h1's, and h2 of the same feed is read as ever (before,
    `²` raised in the round: every host of the feed was down, "cannot read its answer")."""
    series = Series("500")
    series.gpu["h1"] = label
    async with fake_prometheus(series) as url:
        fleet = prom_fleet(url, HOSTS)
        fleet.start()
        try:
            assert await eventually(lambda: memory_used(fleet, "h2") == 1000 * MIB, 60), [
                (v.name, v.status, v.reason, v.detail) for v in fleet.hosts
            ]
            assert fleet.view("h2").status == LIVE
            sample = fleet.view("h1").sample
            assert sample is None or not sample.gpus, sample.gpus  # no GPU made up from the label
        finally:
            await fleet.stop()

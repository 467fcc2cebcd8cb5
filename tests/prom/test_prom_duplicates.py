"""One host's GPU in two exporters' series (two scrape jobs, or two instances whose `Hostname` is the
same): a fake of the query API (tests/prom/fakeprom.py) answers GPU 0 of h1 from each. Where they
give the same values (one exporter scraped by two jobs) the GPU is read as one; where they differ,
no value of theirs is picked: the differing ones are unknown, the GPU's error says `series-conflict`
and the host's log says which exporters, once (gputui/transport/prometheus.py `_merged`). Before,
the last series of the answer won, silently.

And a host named by `instance` alone: its port is ASCII digits only (gputui/config/promql.py
`dcgm_host`), as the `@prometheus:` source lists hosts.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import pytest

from gputui.config import promql
from gputui.fleet.fleet import Fleet
from gputui.fleet.session import ErrorArrived
from gputui.inventory.prometheus import prometheus_hosts
from gputui.text.units import MIB
from tests.prom.fakeprom import fake_prometheus, memory_used, prom_fleet
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(120)

HOSTS = ("h1", "h2")


@dataclass
class Exporter:
    """One exporter's GPU 0 of a host: its scrape job and instance, UUID and memory used (MiB)."""

    host: str
    job: str
    instance: str
    used: int
    uuid: str = ""

    def labels(self) -> dict[str, str]:
        labels = {"gpu": "0", "job": self.job, "instance": self.instance}
        return labels | ({"Hostname": self.host} if self.host else {})


class Exporters:
    """What the fake answers: every exporter's series, in the order listed (the last one won)."""

    def __init__(self, *exporters: Exporter) -> None:
        self.exporters = list(exporters)

    def answer(self, query: str) -> bytes:
        now = time.time()
        if query.startswith("label_replace"):  # the times query: each GPU's newest point
            items = [
                {"metric": {**e.labels(), "gputui_series": promql.DCGM_KEY}, "value": [now, str(now)]}
                for e in self.exporters
            ]
        else:
            items = [
                {
                    "metric": {"__name__": name, **e.labels(), "UUID": e.uuid or f"GPU-{e.host}"},
                    "value": [now, str(value)],
                }
                for e in self.exporters
                for name, value in ((promql.DCGM_KEY, e.used), ("DCGM_FI_DEV_FB_FREE", 80000 - e.used))
            ]
        data = {"resultType": "vector", "result": items}
        return json.dumps({"status": "success", "data": data}).encode()


def gpu0(fleet: Fleet, name: str) -> tuple[int | None, str | None, str | None] | None:
    """GPU 0 of the host's sample: (memory used, error, UUID); None before one."""
    sample = fleet.view(name).sample
    if sample is None or not sample.gpus:
        return None
    gpu = sample.gpus[0]
    return gpu.memory_used, gpu.error, gpu.uuid


def heard(fleet: Fleet) -> list[tuple[str, dict[str, object]]]:
    """The error records the fleet's hosts send, as they come."""
    records: list[tuple[str, dict[str, object]]] = []

    def listen(change: object) -> None:
        if isinstance(change, ErrorArrived):
            records.append((change.view.name, change.record))

    fleet.listen(listen)
    return records


async def test_two_exporters_that_differ_on_a_gpu_show_it_unknown_and_say_so() -> None:
    right = Exporter("h1", "dcgm", "10.0.0.1:9400", 500)
    wrong = Exporter("h1", "dcgm-old", "10.0.0.9:9400", 70000)
    series = Exporters(right, Exporter("h2", "dcgm", "10.0.0.2:9400", 1000), wrong)
    async with fake_prometheus(series) as url:
        fleet = prom_fleet(url, HOSTS)
        records = heard(fleet)
        fleet.start()
        try:
            assert await eventually(lambda: gpu0(fleet, "h1") is not None, 60), [
                (v.name, v.status, v.reason) for v in fleet.hosts
            ]
            assert gpu0(fleet, "h1") == (None, "series-conflict", "GPU-h1")  # not 70,000 MiB
            assert await eventually(lambda: memory_used(fleet, "h2") == 1000 * MIB, 60)
            assert await eventually(lambda: records, 60)
            first = fleet.view("h1").sample
            assert first is not None
            assert await eventually(
                lambda: (s := fleet.view("h1").sample) is not None and s.seq > first.seq + 2, 60
            )
            assert len(records) == 1, records  # said once, not each round
            name, record = records[0]
            assert name == "h1" and record["code"] == "series-conflict", records
            message = str(record["message"])
            for words in ('job="dcgm" instance="10.0.0.1:9400"', 'job="dcgm-old" instance="10.0.0.9:9400"'):
                assert words in message, message
            assert "which differ in FB_FREE, FB_USED" in message and "GPU 0" in message, message
            assert "selector" in message, message
            series.exporters.remove(wrong)  # the old exporter is gone: h1 is read again
            assert await eventually(lambda: gpu0(fleet, "h1") == (500 * MIB, None, "GPU-h1"), 60), gpu0(
                fleet, "h1"
            )
        finally:
            await fleet.stop()


@pytest.mark.parametrize("uuid", ["GPU-h1", "GPU-other"])
async def test_one_gpu_scraped_by_two_jobs(uuid: str) -> None:
    """The same values from two jobs: one GPU, read (one exporter scraped twice), unless their UUIDs
    differ: then they are two GPUs said to be one, and which is h1's cannot be told."""
    series = Exporters(
        Exporter("h1", "dcgm", "10.0.0.1:9400", 500, "GPU-h1"),
        Exporter("h1", "kube-dcgm", "10.0.0.1:9400", 500, uuid),
        Exporter("h2", "dcgm", "10.0.0.2:9400", 1000),
    )
    async with fake_prometheus(series) as url:
        fleet = prom_fleet(url, HOSTS)
        records = heard(fleet)
        fleet.start()
        try:
            assert await eventually(lambda: gpu0(fleet, "h1") is not None and memory_used(fleet, "h2"), 60)
            if uuid == "GPU-h1":
                assert gpu0(fleet, "h1") == (500 * MIB, None, "GPU-h1")
                assert records == []
            else:
                assert gpu0(fleet, "h1") == (500 * MIB, "series-conflict", None)
                assert await eventually(lambda: records, 60)
                assert "differ in UUID" in str(records[0][1]["message"]), records
        finally:
            await fleet.stop()


async def test_an_instance_port_is_ascii_digits() -> None:
    """`instance` names the host without its port, and a port is ASCII digits: `node-b:٩٤٠٠`
    (Arabic-Indic digits, decimal to Python) and `node-c:²` (a digit to str.isdigit) are no port,
    so the host is the whole instance, not node-b or node-c."""
    series = Exporters(
        *(
            Exporter("", "dcgm", instance, 1)
            for instance in ("node-a:9400", "node-b:\u0669\u0664\u0660\u0660", "node-c:\u00b2")
        )
    )
    async with fake_prometheus(series) as url:
        hosts = await asyncio.to_thread(prometheus_hosts, url)
    assert [h.name for h in hosts] == ["node-a", "node-b:\u0669\u0664\u0660\u0660", "node-c:\u00b2"]

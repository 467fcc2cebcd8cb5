"""`@prometheus:URL` against a real Prometheus (Debian's) scraping `gputui export --listen` over the
test's own demo and a static exposition in dcgm-exporter's format (tests/prom/servers.py): `hosts`,
`snapshot --json`, `wait`, and a target that stops (stale, then down, the other hosts live).
Every process is the test's own, ended by its PID. Only conditions are waited for; no duration is
asserted.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gputui.config.file import Config
from gputui.fleet.fleet import Fleet
from gputui.inventory.specs import host_specs
from gputui.transport import make_link
from tests.prom.servers import (
    StaticTarget,
    dcgm_gpu,
    dcgm_node,
    exposition,
    prometheus_over,
)
from tests.support.exporter import get, gputui, served_url, start, stop, wait_for
from tests.support.prometheus import PROMETHEUS, Prometheus

pytestmark = [
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus not installed (Debian package `prometheus`)"),
    pytest.mark.timeout(600),
]


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """A Prometheus scraping the demo's exporter (demo-a, demo-b) and dcgm-node-1."""
    with prometheus_over(tmp_path_factory.mktemp("prom"), dcgm_node(), 2) as server:
        yield server


def test_hosts_lists_the_hosts_of_both_kinds_of_series(prom: Prometheus) -> None:
    done = gputui("hosts", "--json", f"@prometheus:{prom.base}")
    assert done.returncode == 0, done.stderr
    hosts = {h["name"]: h for h in json.loads(done.stdout)["hosts"]}
    assert set(hosts) == {"demo-a", "demo-b", "dcgm-node-1"}
    assert hosts["dcgm-node-1"]["feed"] == f"prometheus:{prom.base}"
    assert hosts["dcgm-node-1"]["address"] == "dcgm-node-1"  # for SSH, through the user's ssh_config
    # A selector narrows the query: only the dcgm job's host.
    done = gputui("hosts", f'@prometheus:{prom.base}#{{job="dcgm"}}')
    assert done.returncode == 0, done.stderr
    assert "dcgm-node-1" in done.stdout and "demo-a" not in done.stdout


def test_snapshot_json_shows_gpus_memory_utilization_and_the_pod(prom: Prometheus) -> None:
    done = gputui("snapshot", "--json", f"@prometheus:{prom.base}")
    assert done.returncode == 0, done.stderr
    hosts = {h["name"]: h for h in json.loads(done.stdout)["hosts"]}
    assert {h["status"] for h in hosts.values()} == {"live"}
    node = hosts["dcgm-node-1"]
    gpus = {g["index"]: g for g in node["gpus"]}
    assert gpus[0]["memory_used"] == 40000 << 20  # MiB in the series, bytes on the wire
    assert gpus[0]["memory_total"] == 81559 << 20
    assert gpus[0]["util_gpu"] == 97 and gpus[0]["temperature"] == 41
    assert gpus[0]["name"] == "NVIDIA H100 80GB HBM3" and gpus[0]["uuid"].startswith("GPU-dcgm-node-1")
    assert gpus[0]["pod"] == "ml/train-0/trainer" and "pod" not in gpus[1]
    assert node["processes"] == [] and node["host"]["driver_version"] == "550.54.15"
    # gputui's own series: every GPU of the demo, memory in bytes as the exporter read it.
    assert len(hosts["demo-b"]["gpus"]) == 8 and len(hosts["demo-a"]["gpus"]) == 4
    assert all(g["memory_total"] and g["name"] for g in hosts["demo-b"]["gpus"])


def test_text_snapshot_shows_the_pod_and_a_power_without_its_limit(prom: Prometheus) -> None:
    done = gputui("snapshot", f'@prometheus:{prom.base}#{{job="dcgm"}}')
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()[:1].isdigit()}
    assert "pod ml/train-0/trainer" in rows["0"] and "pod" not in rows["1"]
    # dcgm-exporter has no power limit: the draw alone, not "112/0W".
    assert " 112W " in rows["0"] + " " and "/0W" not in done.stdout, done.stdout


def test_export_once_writes_the_hosts_read_from_prometheus(prom: Prometheus) -> None:
    # Not needed where the series are in Prometheus already (docs/SOURCES.md), but it works as for
    # any source: gputui's names, the dcgm host's memory in bytes.
    done = gputui("export", "--once", "--timeout", "60", f'@prometheus:{prom.base}#{{job="dcgm"}}')
    assert done.returncode == 0, done.stderr
    used = [
        line
        for line in done.stdout.splitlines()
        if line.startswith("gputui_gpu_memory_used_bytes{") and 'host="dcgm-node-1"' in line
    ]
    assert len(used) == 2, done.stdout[:2000]
    assert sorted(float(line.rpartition(" ")[2]) for line in used) == [0.0, float(40000 << 20)], used


def test_serve_shows_the_hosts_read_from_prometheus(prom: Prometheus) -> None:
    proc = start(f"@prometheus:{prom.base}", "--listen", "127.0.0.1:0", "--interval", "1", command="serve")
    try:
        url = served_url(proc)

        def snapshot() -> dict[str, Any]:
            status, _, body = get(f"{url}api/v1/snapshot")
            assert status == 200, body[:200]
            return {h["name"]: h for h in json.loads(body)["hosts"]}

        assert wait_for(lambda: {h["status"] for h in snapshot().values()} == {"live"}, timeout=120), (
            snapshot()
        )
        hosts = snapshot()
        assert set(hosts) == {"demo-a", "demo-b", "dcgm-node-1"}
        gpus = {g["index"]: g for g in hosts["dcgm-node-1"]["gpus"]}
        assert gpus[0]["pod"] == "ml/train-0/trainer" and gpus[0]["memory_used"] == 40000 << 20
    finally:
        assert stop(proc) == 0


def test_wait_judges_memory_and_utilization_from_the_series(prom: Prometheus) -> None:
    source = f'@prometheus:{prom.base}#{{job="dcgm"}}'
    done = gputui("wait", source, "--gpu", "dcgm-node-1:1", "--timeout", "60", "--settle", "0")
    assert done.returncode == 0, done.stderr
    assert "ready: dcgm-node-1 GPU 1" in done.stdout
    assert "Prometheus series" in done.stdout  # what it judged from, said
    done = gputui("wait", source, "--gpu", "dcgm-node-1:0", "--timeout", "3")
    assert done.returncode != 0
    assert (
        "dcgm-node-1 GPU 0: memory:" in done.stderr
        and "from Prometheus series: no holder list" in done.stderr
    )


def _statuses(fleet: Fleet) -> dict[str, tuple[str, str | None]]:
    return {v.name: (v.shown_status, v.reason) for v in fleet.hosts}


async def _until(fleet: Fleet, want: dict[str, str], seen: list[dict[str, tuple[str, str | None]]]) -> bool:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        now = _statuses(fleet)
        if not seen or seen[-1] != now:
            seen.append(now)
        if all(now[h][0] == s for h, s in want.items()):
            return True
        await asyncio.sleep(0.05)
    return False


async def test_a_target_that_stops_is_stale_then_down_and_the_others_stay_live(tmp_path: Path) -> None:
    keep = StaticTarget(tmp_path / "keep", exposition([dcgm_gpu("node-keep", 0, 10, 5)]))
    gone = StaticTarget(tmp_path / "gone", exposition([dcgm_gpu("node-gone", 0, 10, 5)]))
    server = Prometheus(tmp_path, {"keep": keep.target, "gone": gone.target})
    try:
        server.start()
        assert wait_for(lambda: server.has("DCGM_FI_DEV_FB_USED", 2), timeout=120), server.logs()
        specs = host_specs([f"@prometheus:{server.base}"], Config())
        assert sorted(s.name for s in specs) == ["node-gone", "node-keep"]
        assert all(s.read_only and s.feed for s in specs)
        fleet = Fleet()
        for spec in specs:
            fleet.add(
                spec.name, lambda spec=spec: make_link(spec, interval=0.5), read_only=True, interval=0.5
            )
        fleet.start()
        seen: list[dict[str, tuple[str, str | None]]] = []
        try:
            assert await _until(fleet, {"node-keep": "live", "node-gone": "live"}, seen), seen
            gone.stop()  # Prometheus' next scrape fails: its series are stale at once
            assert await _until(fleet, {"node-gone": "down"}, seen), seen
            states = [s["node-gone"][0] for s in seen]
            assert states.index("stale") < states.index("down"), states
            assert fleet.view("node-gone").down_why == "series stopped"
            assert all(s["node-keep"][0] == "live" for s in seen[1:]), seen
        finally:
            await fleet.stop()
    finally:
        server.stop()
        keep.stop()
        gone.stop()


def test_bad_feeds_are_one_line_and_exit_2() -> None:
    for spec, words in (
        ("@prometheus:", "name the Prometheus"),
        ("@prometheus:ftp://x:9090", "must be http://"),
        ("@prometheus:http://x:9090#{job=dcgm}", "label matcher list"),
        ('@prometheus:http://x:9090#{__name__="up"}', "may not name series"),
        ('@prometheus:http://x:9090#{a="\x1b[31m"}', "control characters"),
    ):
        done = gputui("hosts", spec)
        assert done.returncode == 2, (spec, done.stderr)
        assert words in done.stderr and "\x1b" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr

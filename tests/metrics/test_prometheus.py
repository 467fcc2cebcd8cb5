"""A real Prometheus scrapes `gputui export --listen` over the demo (docs/MONITORING.md).

Debian's `prometheus` (installed by .ci/run; skipped without it) runs on loopback with a config, a
storage directory and a port of the test's own, scrape and rule evaluation every second, and the
shipped alerting rules loaded. The exporter is a subprocess on a fresh demo. The test reads the
series back through Prometheus' HTTP API (/api/v1/query): the GPUs, the ghost memory the demo holds,
the holders joined to their memory by uuid and pid, the rules loaded and healthy, and the alerts the
demo's state starts (pending: their `for` is minutes long). Both processes are ended by PID and
reaped. Only conditions are waited for, with generous timeouts; no duration is asserted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.exporter import REPO, exporter_over_demo, wait_for
from tests.support.prometheus import PROMETHEUS, Prometheus

pytestmark = [
    pytest.mark.skipif(
        PROMETHEUS is None,
        reason="prometheus not installed (Debian package `prometheus`; .ci/run installs it)",
    ),
    pytest.mark.timeout(600),  # two servers to start and series to wait for on a busy machine
]
RULES = REPO / "gputui" / "rules" / "gputui.rules.yml"


@pytest.fixture
def exporter() -> Iterator[str]:
    """`gputui export --listen` over a fresh demo: its host:port."""
    with exporter_over_demo() as target:
        yield target


@pytest.fixture
def prometheus(tmp_path: Path, exporter: str) -> Iterator[Prometheus]:
    server = Prometheus(tmp_path, {"gputui": exporter}, rules=[RULES])
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_prometheus_scrapes_the_demo_and_answers_queries_on_it(prometheus):
    # Every GPU of the demo (demo-a 4 GPUs, demo-b 8), its memory as the exporter read it.
    used = wait_for(lambda: len(prometheus.query("gputui_gpu_memory_used_bytes")) == 12, timeout=180)
    assert used, "the GPUs never showed up: " + prometheus.logs()
    assert prometheus.query('up{job="gputui"} == 1')
    hosts = {r["metric"]["host"]: r["value"][1] for r in prometheus.query("gputui_host_up")}
    assert hosts == {"demo-a": "1", "demo-b": "1"}
    for r in prometheus.query("gputui_gpu_memory_used_bytes"):
        assert set(r["metric"]) >= {"host", "gpu", "uuid", "pci_bus_id", "job", "instance"}
    # The demo's ghosts: memory listed for dead PIDs on GPU 2 of each host, over 1 GiB.
    ghosts = prometheus.query('gputui_gpu_memory_unaccounted_bytes{category="ghost"} > 1073741824')
    assert sorted((r["metric"]["host"], r["metric"]["gpu"]) for r in ghosts) == [
        ("demo-a", "2"),
        ("demo-b", "2"),
    ]
    # Who holds what: the memory series joined to the holders' info by uuid and pid.
    joined = prometheus.query(
        "gputui_process_gpu_memory_bytes * on (uuid, pid) group_left (user, kind, job) gputui_gpu_holder_info"
    )
    kinds = {r["metric"]["kind"] for r in joined}
    assert {"user", "ghost"} <= kinds
    assert all(float(r["value"][1]) > 0 for r in joined)
    # A ghost's PID is dead: no user (an empty label is no label); a user process has its user.
    assert all("user" in r["metric"] for r in joined if r["metric"]["kind"] == "user")
    # The idle notebook on demo-a's GPU 2 (12 GiB, the GPU at 0 %).
    idle = prometheus.query('gputui_gpu_idle_holders{host="demo-a", gpu="2"}')
    assert [r["value"][1] for r in idle] == ["1"]


def test_the_shipped_rules_load_and_the_demos_state_starts_their_alerts(prometheus):
    def healthy() -> dict | None:
        groups = prometheus.api("rules")["groups"]
        rules = {r["name"]: r for g in groups for r in g["rules"]}
        return rules if rules and all(r["health"] == "ok" for r in rules.values()) else None

    rules = wait_for(healthy, timeout=180)
    assert rules, "the rules never evaluated healthy: " + prometheus.logs()
    assert {"GpuMemoryHeldWhileIdle", "GpuMemoryUnaccounted", "GputuiHostDown", "GpuThrottled"} <= set(rules)

    def pending() -> set[tuple[str, str, str]] | None:
        alerts = prometheus.api("alerts")["alerts"]
        found = {
            (a["labels"]["alertname"], a["labels"]["host"], a["labels"]["gpu"])
            for a in alerts
            if "gpu" in a["labels"]
        }
        wanted = {
            ("GpuMemoryUnaccounted", "demo-a", "2"),
            ("GpuMemoryUnaccounted", "demo-b", "2"),
            ("GpuMemoryHeldWhileIdle", "demo-a", "2"),
        }
        return found if wanted <= found else None

    found = wait_for(pending, timeout=180)
    assert found, prometheus.api("alerts")
    # Nothing about hosts down: both are up.
    assert not [a for a in prometheus.api("alerts")["alerts"] if a["labels"]["alertname"] == "GputuiHostDown"]

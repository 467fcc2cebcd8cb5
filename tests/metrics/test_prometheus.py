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

import json
import os
import shutil
import signal
import socket
import subprocess
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.exporter import REPO, get, served_url, start, stop, wait_for

PROMETHEUS = shutil.which("prometheus")
pytestmark = [
    pytest.mark.skipif(
        PROMETHEUS is None,
        reason="prometheus not installed (Debian package `prometheus`; .ci/run installs it)",
    ),
    pytest.mark.timeout(600),  # two servers to start and series to wait for on a busy machine
]
RULES = REPO / "gputui" / "rules" / "gputui.rules.yml"
CONFIG = """\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - {rules}
scrape_configs:
  - job_name: gputui
    static_configs:
      - targets: ["{target}"]
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, directory: Path, target: str) -> None:
        self.directory = directory
        self.config = directory / "prometheus.yml"
        self.config.write_text(CONFIG.format(rules=RULES, target=target))
        self.proc: subprocess.Popen[bytes] | None = None
        self.base = ""

    def start(self) -> None:
        """Started on a free loopback port (another port if that one is taken by the time it
        binds), and ready: it answers /-/ready."""
        assert PROMETHEUS is not None
        for attempt in range(5):
            port = free_port()
            log = open(self.directory / f"prometheus-{attempt}.log", "wb")  # noqa: SIM115 (kept for the process)
            self.proc = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={self.config}",
                    f"--storage.tsdb.path={self.directory / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
            )
            log.close()
            self.base = f"http://127.0.0.1:{port}"
            answered = wait_for(lambda: self.proc.poll() is not None or self._answers(), timeout=120)
            if answered and self.proc.poll() is None:
                return
            self.stop()
        raise AssertionError("prometheus did not start: " + self.logs())

    def _answers(self) -> bool:
        try:
            return get(self.base + "/-/ready", timeout=5)[0] == 200
        except OSError:
            return False

    def api(self, path: str, **params: str) -> dict:
        query = urllib.parse.urlencode(params)
        status, _, body = get(f"{self.base}/api/v1/{path}" + (f"?{query}" if query else ""))
        assert status == 200, body
        answer = json.loads(body)
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, promql: str) -> list[dict]:
        return self.api("query", query=promql)["result"]

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-2000:] for p in sorted(self.directory.glob("*.log")))

    def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)  # the PID this test started
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(60)
        self.proc = None


@pytest.fixture
def exporter() -> Iterator[str]:
    """`gputui export --listen` over a fresh demo: its host:port."""
    proc = start("--demo", "--listen", "127.0.0.1:0", "--interval", "1")
    try:
        url = served_url(proc)
        yield urllib.parse.urlsplit(url).netloc
    finally:
        assert stop(proc) == 0


@pytest.fixture
def prometheus(tmp_path: Path, exporter: str) -> Iterator[Prometheus]:
    server = Prometheus(tmp_path, exporter)
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

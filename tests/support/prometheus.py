"""A real Prometheus (Debian's `prometheus`; PROMETHEUS is None without it) on a loopback port and in
a directory of the test's own, scraping its targets and evaluating rules every second; started by the
test, ended by its PID and reaped. Read back through its HTTP API."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.exporter import get, wait_for

PROMETHEUS = shutil.which("prometheus")
CONFIG = """\
global:
  scrape_interval: {scrape:g}s
  scrape_timeout: {scrape:g}s
  evaluation_interval: 1s
{rules}scrape_configs:
{jobs}
"""
JOB = """\
  - job_name: {name}
    static_configs:
      - targets: ["{target}"]
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    """Prometheus scraping `targets` ({job: host:port}) every `scrape` seconds, with the alerting rules
    of `rules` loaded."""

    def __init__(
        self, directory: Path, targets: dict[str, str], rules: Sequence[Path] = (), scrape: float = 1.0
    ) -> None:
        self.directory = directory
        self.config = directory / "prometheus.yml"
        jobs = "".join(JOB.format(name=name, target=target) for name, target in targets.items())
        files = "".join(f"  - {path}\n" for path in rules)
        rule_files = f"rule_files:\n{files}" if files else ""
        self.config.write_text(CONFIG.format(scrape=scrape, rules=rule_files, jobs=jobs))
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
            answered = wait_for(lambda: self._gone() or self._answers(), timeout=120)
            if answered and not self._gone():
                return
            self.stop()
        raise AssertionError("prometheus did not start: " + self.logs())

    def _gone(self) -> bool:
        return self.proc is None or self.proc.poll() is not None

    def _answers(self) -> bool:
        try:
            return get(self.base + "/-/ready", timeout=5)[0] == 200
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        """The `data` of a successful answer of /api/v1/PATH."""
        query = urllib.parse.urlencode(params)
        status, _, body = get(f"{self.base}/api/v1/{path}" + (f"?{query}" if query else ""))
        assert status == 200, body
        answer = json.loads(body)
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("query", query=promql)["result"]
        return result

    def has(self, promql: str, count: int) -> bool:
        """Whether `promql` gives at least `count` series (False while Prometheus does not answer)."""
        try:
            return len(self.query(promql)) >= count
        except (OSError, AssertionError, ValueError):
            return False

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-2000:] for p in sorted(self.directory.glob("*.log")))

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)  # the PID this test started
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(60)

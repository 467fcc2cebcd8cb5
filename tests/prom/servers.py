"""What the Prometheus source's tests run: a real Prometheus (Debian's), a static exposition in
dcgm-exporter's format served by `python -m http.server`, and `gputui export --listen` over the
test's own demo. Each is a process the test starts, ended by its PID and reaped.

The exposition is dcgm-exporter's as it writes it (3.x, default counters, in Kubernetes): its
names, HELP and TYPE lines, and labels `gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`,
`Hostname`, `DCGM_FI_DRIVER_VERSION`, and the pod labels `container`, `namespace`, `pod` on a GPU
a pod was given.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.exporter import get, served_url, start, stop, wait_for

PROMETHEUS = shutil.which("prometheus")
CONFIG = """\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
{jobs}
"""
JOB = """\
  - job_name: {name}
    static_configs:
      - targets: ["{target}"]
"""
# (HELP, TYPE) of each field, as dcgm-exporter's default-counters.csv says them.
FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL": ("GPU utilization (in %).", "gauge"),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("Memory utilization (in %).", "gauge"),
    "DCGM_FI_DEV_GPU_TEMP": ("GPU temperature (in C).", "gauge"),
    "DCGM_FI_DEV_POWER_USAGE": ("Power draw (in W).", "gauge"),
    "DCGM_FI_DEV_FB_FREE": ("Framebuffer memory free (in MiB).", "gauge"),
    "DCGM_FI_DEV_FB_USED": ("Framebuffer memory used (in MiB).", "gauge"),
    "DCGM_FI_DEV_XID_ERRORS": ("Value of the last XID error encountered.", "gauge"),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("Total number of single-bit volatile ECC errors.", "counter"),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("Total number of double-bit volatile ECC errors.", "counter"),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dcgm_gpu(
    host: str, index: int, used_mib: int, util: int, pod: tuple[str, str, str] | None = None, xid: int = 0
) -> dict[str, float]:
    """One GPU's fields and labels (returned as {series line head: value})."""
    labels = {
        "gpu": str(index),
        "UUID": f"GPU-{host}-{index:04d}-0000-0000-000000000000",
        "pci_bus_id": f"00000000:{0x18 + index:02X}:00.0",
        "device": f"nvidia{index}",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": host,
        "DCGM_FI_DRIVER_VERSION": "550.54.15",
    }
    if pod is not None:
        labels.update(container=pod[2], namespace=pod[0], pod=pod[1])
    values = {
        "DCGM_FI_DEV_GPU_UTIL": util,
        "DCGM_FI_DEV_MEM_COPY_UTIL": util // 2,
        "DCGM_FI_DEV_GPU_TEMP": 41 + index,
        "DCGM_FI_DEV_POWER_USAGE": 112.5 + index,
        "DCGM_FI_DEV_FB_FREE": 81559 - used_mib,
        "DCGM_FI_DEV_FB_USED": used_mib,
        "DCGM_FI_DEV_XID_ERRORS": xid,
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 0,
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0,
    }
    text = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {f"{name}{{{text}}}": value for name, value in values.items()}


def exposition(gpus: list[dict[str, float]]) -> str:
    lines: list[str] = []
    for name, (help_text, kind) in FIELDS.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        lines += [
            f"{head} {value}" for gpu in gpus for head, value in gpu.items() if head.startswith(name + "{")
        ]
    return "\n".join(lines) + "\n"


def dcgm_node() -> str:
    """dcgm-node-1: GPU 0 given to pod ml/train-0 (40,000 MiB used, 97 %), GPU 1 free."""
    return exposition(
        [
            dcgm_gpu("dcgm-node-1", 0, 40000, 97, ("ml", "train-0", "trainer")),
            dcgm_gpu("dcgm-node-1", 1, 0, 0),
        ]
    )


class StaticTarget:
    """An exposition served as /metrics by `python -m http.server` (a target that can be stopped)."""

    def __init__(self, directory: Path, text: str) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "metrics").write_text(text)
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                str(self.port),
                "--directory",
                str(directory),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        assert wait_for(lambda: self._answers(), timeout=60), "the static target did not start"

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _answers(self) -> bool:
        try:
            return get(f"http://{self.target}/metrics", timeout=5)[0] == 200
        except OSError:
            return False

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)  # the PID this test started
            proc.wait(60)


class Prometheus:
    """Debian's prometheus on a loopback port of its own, scraping `targets` ({job: host:port})
    every second."""

    def __init__(self, directory: Path, targets: dict[str, str]) -> None:
        self.directory = directory
        self.config = directory / "prometheus.yml"
        jobs = "".join(JOB.format(name=name, target=target) for name, target in targets.items())
        self.config.write_text(CONFIG.format(jobs=jobs))
        self.proc: subprocess.Popen[bytes] | None = None
        self.base = ""

    def start(self) -> None:
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
            if (
                wait_for(lambda: self.proc.poll() is not None or self._answers(), timeout=120)
                and self.proc.poll() is None
            ):
                return
            self.stop()
        raise AssertionError("prometheus did not start: " + self.logs())

    def _answers(self) -> bool:
        try:
            return get(self.base + "/-/ready", timeout=5)[0] == 200
        except OSError:
            return False

    def has(self, promql: str, count: int) -> bool:
        query = urllib.parse.urlencode({"query": promql})
        try:
            status, _, body = get(f"{self.base}/api/v1/query?{query}")
        except OSError:
            return False
        return status == 200 and len(json.loads(body)["data"]["result"]) >= count

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


@contextmanager
def exporter_over_demo() -> Iterator[str]:
    """`gputui export --listen` over a fresh demo (demo-a 4 GPUs, demo-b 8): its host:port."""
    proc = start("--demo", "--listen", "127.0.0.1:0", "--interval", "1")
    try:
        yield urllib.parse.urlsplit(served_url(proc)).netloc
    finally:
        assert stop(proc) == 0

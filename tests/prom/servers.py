"""What the Prometheus source's tests serve to a real Prometheus (tests/support/prometheus.py) beside
`gputui export --listen` (tests/support/exporter.py): a static exposition in dcgm-exporter's format
served by `python -m http.server`, a process the test starts, ended by its PID and reaped.

The exposition is dcgm-exporter's as it writes it (3.x, default counters, in Kubernetes): its
names, HELP and TYPE lines, and labels `gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`,
`Hostname`, `DCGM_FI_DRIVER_VERSION`, and the pod labels `container`, `namespace`, `pod` on a GPU
a pod was given.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.support.exporter import exporter_over_demo, get, wait_for
from tests.support.prometheus import Prometheus, free_port

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


@contextlib.contextmanager
def prometheus_over(directory: Path, dcgm: str, dcgm_series: int) -> Iterator[Prometheus]:
    """A real Prometheus scraping `dcgm` (an exposition, served by a StaticTarget) and the demo's
    exporter (demo-a and demo-b: 12 GPUs), once it holds `dcgm_series` dcgm GPUs and the demo's."""
    target = StaticTarget(directory / "dcgm", dcgm)
    try:
        with exporter_over_demo() as exporter:
            server = Prometheus(directory, {"dcgm": target.target, "gputui": exporter})
            server.start()
            try:
                scraped = wait_for(
                    lambda: (
                        server.has("DCGM_FI_DEV_FB_USED", dcgm_series)
                        and server.has("gputui_gpu_memory_used_bytes", 12)
                    ),
                    timeout=180,
                )
                assert scraped, "the series never showed up: " + server.logs()
                yield server
            finally:
                server.stop()
    finally:
        target.stop()

"""Host views built as the fleet builds them (HostFacts.from_hello, Sample.from_wire, record), for the
tests of what the fleet's state becomes as Prometheus families: `gputui export`'s
(tests/metrics/test_metrics.py) and the hub's kept /metrics text (tests/serve/test_metrics_text.py),
which must agree line for line on the same fleet."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gputui.fleet.session import CONNECTING, DOWN, LIVE, HostView
from gputui.model import HostFacts, Sample

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GiB = 1 << 30


def hello(**host: Any) -> dict[str, Any]:
    return {
        "type": "hello",
        "v": 1,
        "probe_version": "0.1.0",
        "reader": "sim",
        "read_only": True,
        "host": {"hostname": "node1", "driver_version": "580.1", **host},
        "error": None,
    }


def gpu(index: int, util: int | None = 0, used: int = 0, **extra: Any) -> dict[str, Any]:
    """A GPU record of an H200; `extra` adds or replaces fields (a preflight, an error, None readings)."""
    return {
        "index": index,
        "uuid": f"GPU-{index:04d}",
        "pci_bus_id": f"00000000:{0x18 + index:02X}:00.0",
        "name": "NVIDIA H200",
        "memory_total": 140 * GiB,
        "memory_used": used,
        "memory_baseline": 0,
        "util_gpu": util,
        "util_mem": util,
        "temperature": 40,
        "power_draw": 100.0,
        "power_limit": 700.0,
        "accounting": {"baseline": 0, "processes": used},
        **extra,
    }


def proc(
    pid: int, kind: str, memory: dict[int, int], gpus: list[int] | None = None, **extra: Any
) -> dict[str, Any]:
    """A process record holding `memory` (GPU index -> bytes), on those GPUs unless `gpus` says."""
    return {
        "pid": pid,
        "start_time": 1000 + pid,
        "kind": kind,
        "name": "python",
        "user": "alice",
        "gpus": sorted(memory) if gpus is None else gpus,
        "gpu_memory": {str(k): v for k, v in memory.items()},
        **extra,
    }


def renew(v: HostView, sample: dict[str, Any], seq: int) -> None:
    """`sample`'s fields as the host's sample number `seq`."""
    v.record(Sample.from_wire({"type": "sample", "v": 1, "seq": seq, "time": float(seq), **sample}))


def view(name: str, sample: dict[str, Any] | None, status: str = LIVE, **host: Any) -> HostView:
    """A host that connected once, with `sample` as its first one (none: not sampled yet)."""
    v = HostView(name=name)
    v.facts = HostFacts.from_hello(hello(**host))
    if sample is not None:
        renew(v, sample, 1)
    v.status = status
    v.connects = 1
    return v


def replayed_host(name: str) -> HostView:
    """A live host that has seen every sample of a recorded fixture (its preflights kept)."""
    records = [json.loads(line) for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines() if line]
    v = HostView(name=name)
    v.facts = HostFacts.from_hello(records[0])
    for record in records:
        if record["type"] == "sample":
            v.record(Sample.from_wire(record))
    v.status = LIVE
    v.connects = 2
    return v


def a_fleet_of_every_kind() -> list[HostView]:
    """Recorded hosts (demo, jobs, MIG, MPS, preflight) and the cases a recording does not show:
    holders in a Slurm job and a container, a throttling GPU with ECC errors and a lost one, a host
    down, one without a driver, one connecting, one trying again, hostile text."""
    hosts = [replayed_host(n) for n in ("demo-a", "demo-b", "jobs", "mig", "mps", "preflight")]
    preflight = {
        "throttle": ["hw-slowdown", "sw-thermal", "hw-slowdown"],
        "ecc_corrected": 12,
        "ecc_uncorrected": 3,
        "remap_pending": True,
        "remap_failed": False,
        "retired_pending": None,
    }
    held = {
        "gpus": [gpu(0, util=80, used=20 * GiB, preflight=preflight), gpu(1, util=None, used=GiB),
                 gpu(2, temperature=None, power_draw=None, error="gpu-lost")],
        "processes": [
            proc(4242, "user", {0: 20 * GiB}, job="4200", container="docker/abc",
                 gpu_util={"0": {"sm": 75, "mem": 10}}),
            proc(13, "hidden", {1: GiB}), proc(14, "monitor", {}, gpus=[0, 1]),
            proc(15, "user", {1: 0}, user='mal"lory\\\n' + "x" * 1000),
        ],
        "jobs": [{"id": "4200", "root": 4200, "members": [4242], "gpus": [0], "slurm_job": "771"}],
    }  # fmt: skip
    nodriver = view("bare", None, status=DOWN)
    nodriver.facts = HostFacts.from_hello({**hello(), "error": {"code": "no-driver", "message": "x"}})
    retrying = view("again", None, status=CONNECTING)
    retrying.last_down = "unreachable"
    return [
        *hosts,
        view('n1"\n', held),
        view("gone", held, status=DOWN),
        nodriver,
        view("new", None, status=CONNECTING),
        retrying,
    ]

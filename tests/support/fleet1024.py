"""A generated fleet of 1,024 hosts for the fleet view's tests and snapshots (issue 21).

Sixteen racks of 64 hosts (`gpu0001`...`gpu1024`, group `rack01`...`rack16`, as a config's [groups]
would name them), eight H200s each, busy with one training process per GPU. A few hosts have the
troubles the fleet view puts first, each on a fixed host so every run draws the same screen:
- down: three hosts never answer (the first attempt fails, later ones never end);
- ghost memory, orphaned memory, an idle holder (a notebook kernel at 0 % SM for 15 minutes: two
  samples 15 minutes apart), throttling, ECC trouble, a GPU that differs from its siblings (an
  A100 among H200s), a host whose driver differs from its rack's.
Every sample is built as a probe sends it (docs/PROTOCOL.md) and replayed by ReplayLink; times are
the samples' own, so the idle streaks do not depend on how fast the test runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gputui.fleet.fleet import Fleet
from gputui.recording.player import ReplayLink
from gputui.transport.base import TransportError
from gputui.ui.app import GpuTuiApp
from gputui.ui.factory import make_app
from gputui.ui.screens.main import MainScreen
from tests.support.apps import FROZEN, OPERATOR, QUIET, scratch_log
from tests.support.pilot import wait_for

HOSTS = 1024
RACK = 64
GPUS = 8
GiB = 1 << 30
TOTAL = 150754820096  # H200 (GPU_FACTS "Memory figures")
T0 = FROZEN - 900.0  # the first sample, 15 minutes before the second
USERS = ("alice", "bob", "carol", "dave", "erin", "frank", "grace")
DRIVER = "580.159.04"

DOWN = (300, 301, 777)
GHOST = (5, 420)  # GPU 3: a dead PID's memory
ORPHANED = (64,)  # GPU 1: memory nothing holds
IDLE = (17, 600, 901)  # GPU 5: a notebook kernel at 0 % SM for 15 minutes
THROTTLE = (130,)  # GPU 6: hw-thermal
ECC = (333,)  # GPU 2: an uncorrected ECC error, a row remap pending
ODD_GPU = (512,)  # GPU 7: an A100 among H200s
ODD_DRIVER = (700,)  # its rack runs DRIVER
FREE_EVERY = 5  # GPU 0 of every fifth host is free


def name(i: int) -> str:
    return f"gpu{i:04d}"


def rack(i: int) -> str:
    return f"rack{(i - 1) // RACK + 1:02d}"


def hello(i: int) -> dict[str, Any]:
    driver = "570.86.15" if i in ODD_DRIVER else DRIVER
    return {
        "type": "hello", "v": 1, "probe_version": "0.1.0", "pid": 900000 + i, "read_only": False,
        "reader": "nvml", "capabilities": ["plan"],
        "host": {"hostname": name(i), "kernel": "6.8.0", "driver_version": driver, "nvml_version": "13." + driver,
                 "cuda_driver_version": 13000, "python": "3.12.3", "uid": 0, "in_container": False,
                 "host_pid_namespace": True, "clock_ticks": 100},
        "error": None,
    }  # fmt: skip


def _account(processes: int, ghost: int = 0, orphaned: int = 0) -> dict[str, Any]:
    return {
        "baseline": 0, "processes": processes, "ghost": ghost, "container": 0, "unreported": 0, "hidden": 0,
        "orphaned": orphaned, "outside": 0, "unknown": 0, "ghosts": [4999] if ghost else [], "suspects": [],
        "containers": [], "unreported_pids": [],
    }  # fmt: skip


def _preflight(i: int, g: int) -> dict[str, Any]:
    throttle = ["hw-thermal"] if i in THROTTLE and g == 6 else []
    ecc = i in ECC and g == 2
    return {
        "persistence": True, "compute_mode": "default", "mig": False, "mig_pending": False,
        "sm_clock": 1980, "sm_clock_max": 1980, "mem_clock": 3201, "mem_clock_max": 3201,
        "sm_app_clock": 1980, "sm_app_clock_default": 1980, "mem_app_clock": 3201,
        "mem_app_clock_default": 3201, "power_limit": 700.0, "power_default": 700.0,
        "throttle": throttle, "fan": None, "ecc_corrected": 0, "ecc_uncorrected": 1 if ecc else 0,
        "retired_pending": False, "remap_pending": ecc, "remap_failed": False,
        "pcie_gen": 5, "pcie_gen_max": 5, "pcie_width": 16, "pcie_width_max": 16,
        "display_active": False, "nvlink_peers": [],
    }  # fmt: skip


def sample(i: int, seq: int, t: float) -> dict[str, Any]:
    gpus: list[dict[str, Any]] = []
    procs: list[dict[str, Any]] = []
    for g in range(GPUS):
        pid = 10000 + g
        free = g == 0 and i % FREE_EVERY == 0
        idle = i in IDLE and g == 5
        odd = i in ODD_GPU and g == 7
        held = 0 if free else (40 + (i * 7 + g * 13) % 80) * GiB
        if odd:
            held = min(held, 70 * GiB)
        ghost = 20 * GiB if i in GHOST and g == 3 else 0
        orphaned = int(2.1 * GiB) if i in ORPHANED and g == 1 else 0
        util = 0 if (free or idle) else 80 + (i + g * 3) % 20
        temp = 88 if i in THROTTLE and g == 6 else 35 + util // 3
        gpus.append(
            {
                "index": g, "minor": g, "uuid": f"GPU-{i:04d}{g:02d}-0000-0000-0000-000000000000",
                "name": "NVIDIA A100-SXM4-80GB" if odd else "NVIDIA H200",
                "memory_total": 80 * GiB if odd else TOTAL, "memory_used": held + ghost + orphaned,
                "memory_reserved": 644874240, "memory_baseline": 0, "memory_version": 2,
                "util_gpu": util, "util_mem": util * 3 // 5, "temperature": temp,
                "power_draw": 75.0 + 6.0 * util, "power_limit": 700.0, "persistence": True,
                "mig_instances": None, "error": None,
                "accounting": _account(held, ghost, orphaned), "preflight": _preflight(i, g),
            }
        )  # fmt: skip
        if free:
            continue
        user = USERS[(i // 3 + g) % len(USERS)] if not idle else "grace"
        command = (
            ["python", "notebook_kernel.py", "-f", "kernel.json"]
            if idle
            else ["python", "train.py", "--rank", str(g)]
        )
        procs.append(
            {
                "pid": pid, "start_time": 5000 + g, "name": "python", "command": command, "user": user,
                "uid": 1000 + USERS.index(user), "state": "S", "ppid": 9000, "pgid": pid, "sid": 9000,
                "cpu_percent": 0.0 if idle else 98.0, "rss": 4 * GiB, "elapsed": 7200.0 + t - T0,
                "holds": [f"/dev/nvidia{g}", "/dev/nvidiactl", "/dev/nvidia-uvm"],
                "gpu_memory": {str(g): held}, "gpus": [g], "kind": "user", "reason": None, "links": [],
                "protected": None, "nspid": None, "container": None, "job": str(pid),
                "gpu_util": {str(g): {"sm": util, "mem": util * 3 // 5, "enc": 0, "dec": 0}},
                "mig": [], "mps": None,
            }
        )  # fmt: skip
        if ghost:
            procs.append(
                {
                    "pid": 4999, "start_time": None, "name": None, "command": [], "user": None, "uid": None,
                    "state": None, "ppid": None, "pgid": None, "sid": None, "cpu_percent": None, "rss": None,
                    "elapsed": None, "holds": [], "gpu_memory": {str(g): ghost}, "gpus": [g], "kind": "ghost",
                    "reason": "dead", "links": [], "protected": None, "nspid": None, "container": None,
                    "job": None, "gpu_util": None, "mig": [], "mps": None,
                }
            )  # fmt: skip
    return {
        "type": "sample", "v": 1, "seq": seq, "time": t, "gpus": gpus, "processes": procs,
        "processes_omitted": 0, "jobs": [], "jobs_omitted": 0, "parents": [],
        "host": {"cpu_percent": 40.0 + i % 50, "cpus": 128, "load1": 50.0, "load5": 48.0, "load15": 45.0,
                 "memory_total": 2 << 40, "memory_used": (1 << 40) + i * GiB, "swap_total": 0, "swap_used": 0,
                 "uptime": 864000.0},
        "scan": {"full": seq == 1, "age": 5.0, "worst_age": 30.0, "unreadable": 0},
        "proc_util": {"state": "on", "every": 5.0, "age": 1.0},
        "cost_ms": {"reader": 0.2, "holders": 0.8, "total": 1.3},
    }  # fmt: skip


def records(i: int) -> list[dict[str, Any]]:
    return [hello(i), sample(i, 1, T0), sample(i, 2, FROZEN)]


class NeverAnswers:
    """A host that does not answer: the first attempt fails at once (the host is down), and every
    later one waits for good (it stays down-and-trying, never flickering between the two)."""

    hello = None
    failure = None

    def __init__(self, first: bool) -> None:
        self.first = first

    async def open(self) -> None:
        if self.first:
            raise TransportError("unreachable", "ssh: connect to host port 22: No route to host")
        await asyncio.Event().wait()

    async def recv(self) -> dict[str, Any] | None:
        return None

    async def send(self, message: dict[str, Any]) -> None:
        pass

    async def close(self) -> None:
        pass


def fleet_1024(hosts: int = HOSTS) -> Fleet:
    fleet = Fleet()
    for i in range(1, hosts + 1):
        if i in DOWN:
            attempts = [NeverAnswers(True)]
            fleet.add(
                name(i),
                lambda a=attempts: a.pop() if a else NeverAnswers(False),
                interval=QUIET,
                group=rack(i),
            )
        else:
            played_back = records(i)
            fleet.add(name(i), lambda r=played_back: ReplayLink(r), interval=QUIET, group=rack(i))
    return fleet


SLOW = 600  # seconds a test of 1,024 hosts may take on a loaded machine (pytest-timeout's limit)


async def drawn(pilot: Any) -> None:
    """Until the app has drawn everything that arrived (a thousand hosts take a while on a busy
    machine: waited for, never timed)."""
    app = pilot.app
    await pilot.pause()
    await wait_for(pilot, lambda: not app._changed and not app._restyle, 300)
    await asyncio.sleep(0)
    await pilot.pause()


def played(fleet: Fleet) -> bool:
    """Every host has sent its last sample, or is down."""
    return all((v.sample is not None and v.sample.seq >= 2) or (v.last_down is not None) for v in fleet.hosts)


def app_of(fleet: Fleet) -> GpuTuiApp:
    """The dashboard on `fleet`, its clock frozen, an audit log of its own."""
    return make_app(fleet, interval=3600.0, clock=lambda: FROZEN, log_path=scratch_log(), operator=OPERATOR)


async def settled(pilot: Any) -> MainScreen:
    """The main screen once every host has played and the tables are drawn."""
    app: GpuTuiApp = pilot.app
    await wait_for(pilot, lambda: played(app.fleet), 300)
    await drawn(pilot)
    assert app._main is not None
    return app._main

"""The sim's GPUs as NVML describes them: simulated H200s (their fixed figures and looks, the record
of one GPU, its MIG instances, its preflight state) and the driver state beyond memory that every
reader of a sim shares (<base>/state.json: orphaned memory, persistence mode, ECC, MIG, ...).

Apart from the reader: what a GPU looks like is a pure function of the seed, the variant and the
state file; the reader adds the memory and utilization its contexts give.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import json
import os
import random
import threading
import time
from typing import Any, Dict, List, Optional  # noqa: F401  (used in type comments)

from ..base import instance_id
from .files import write_file

MEMORY_TOTAL = 150754820096  # H200, GPU_FACTS "Memory figures"
MEMORY_RESERVED = 644874240  # 615 MiB, reported apart from `used` by memory info v2
POWER_LIMIT = 700.0
GPU_NAME = "NVIDIA H200 (sim)"
FACTS = {
    "driver_version": "580.159.04-sim",
    "nvml_version": "13.580.159.04-sim",
    "cuda_driver_version": 13000,
}
JITTER_LEN = 97  # utilization jitter repeats after this many reads
STATE_FILE = "state.json"


def sim_topology(index, gpus):
    # type: (int, int) -> Dict[str, str]
    """How close GPU `index` of `gpus` is to each other one (docs/PROTOCOL.md `topology`), laid out
    as a PCIe server: pairs (0-1, 2-3, ...) share a switch, four GPUs a NUMA node, the rest are
    across the CPUs' interconnect."""
    out = {}  # type: Dict[str, str]
    for peer in range(gpus):
        if peer != index:
            same = "switch" if peer // 2 == index // 2 else "node" if peer // 4 == index // 4 else "system"
            out[str(peer)] = same
    return out


def _uuid(prefix, bits):
    # type: (str, int) -> str
    """A UUID as NVML writes one ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"), from 128 random bits."""
    h = "%032x" % bits
    return "%s-%s-%s-%s-%s-%s" % (prefix, h[:8], h[8:12], h[12:16], h[16:20], h[20:])


class GpuLooks(object):
    """What tells a sim's GPUs apart, all from the seed and variant (so every reader of a sim, and
    every screenshot, sees the same): UUIDs, temperature offsets, utilization jitter."""

    def __init__(self, gpus, seed, variant):
        # type: (int, int, int) -> None
        self.seed = seed
        rng = random.Random("gputui-sim-gpus:%d:%d" % (seed, variant))
        self.uuids = []  # type: List[str]
        self.offsets = []  # type: List[int]
        self.jitter = []  # type: List[List[int]]
        for _ in range(gpus):
            self.uuids.append(_uuid("GPU", rng.getrandbits(128)))
            self.offsets.append(rng.randint(0, 3))
            self.jitter.append([rng.randint(-3, 3) for _ in range(JITTER_LEN)])
        self.topology = [sim_topology(i, gpus) for i in range(gpus)]

    def record(self, index, used, util, reads, knobs):
        # type: (int, int, int, int, Dict[str, Any]) -> Dict[str, object]
        """GPU `index`'s record (docs/PROTOCOL.md) with `used` bytes and `util` percent, after
        `reads` readings, under the driver state `knobs` (its entry in state.json)."""
        if util > 0:
            # Jitter by read count, not wall time, so screenshots are reproducible.
            util = max(1, min(100, util + self.jitter[index][reads % JITTER_LEN]))
        offset = self.offsets[index]
        temperature = 30 + offset + util // 3
        cooling = knobs.get("cooling")
        if cooling:
            # A GPU that ran hot and cools slowly: from `from` degrees at `rate` per second.
            since = max(0.0, time.time() - float(cooling["since"]))
            temperature = max(temperature, round(float(cooling["from"]) - float(cooling["rate"]) * since))
        return {
            "index": index,
            "minor": index,
            "uuid": self.uuids[index],
            "pci_bus_id": "00000000:%02X:00.0" % (0x18 + 0x10 * index),
            "name": GPU_NAME,
            "memory_total": MEMORY_TOTAL,
            "memory_used": used,
            "memory_reserved": MEMORY_RESERVED,
            "memory_version": 2,
            "util_gpu": util,
            "util_mem": (util * 3) // 5,
            "temperature": temperature,
            "power_draw": round(min(POWER_LIMIT, 75.0 + 0.7 * offset + 6.0 * util), 1),
            "power_limit": POWER_LIMIT,
            "persistence": knobs.get("persistence", True),
            "error": None,
            "topology": self.topology[index],
        }

    def mig_layout(self, state, index):
        # type: (Dict[str, Any], int) -> Optional[List[Dict[str, Any]]]
        """GPU `index`'s MIG instances as the sim's state sets them (knob `mig_instances`: a list of
        {gi, ci, memory_total, name}), with UUIDs; None where MIG is off."""
        raw = state.get(str(index), {}).get("mig_instances")
        if not isinstance(raw, list):
            return None
        out = []  # type: List[Dict[str, Any]]
        for inst in raw:
            if not isinstance(inst, dict) or instance_id(inst.get("gi")) is None:
                continue
            gi, ci = int(inst["gi"]), instance_id(inst.get("ci"))
            h = random.Random("gputui-sim-mig:%d:%d:%d:%s" % (self.seed, index, gi, ci)).getrandbits(128)
            out.append(
                {
                    "gi": gi,
                    "ci": ci,
                    "uuid": _uuid("MIG", h),
                    "name": inst.get("name"),
                    "memory_total": inst.get("memory_total"),
                }
            )
        return out


def preflight_record(knobs):
    # type: (Dict[str, Any]) -> Dict[str, Any]
    """One GPU's preflight state (docs/PROTOCOL.md "preflight") under the driver state `knobs`: an
    H200's defaults where the state says nothing."""
    locked = knobs.get("sm_clock_locked")
    return {
        "persistence": knobs.get("persistence", True),
        "compute_mode": knobs.get("compute_mode", "default"),
        "mig": bool(knobs.get("mig", False) or knobs.get("mig_instances")),
        "mig_pending": bool(knobs.get("mig", False) or knobs.get("mig_instances")),
        "sm_clock": locked or 1980,
        "sm_clock_max": 1980,
        "mem_clock": 3201,
        "mem_clock_max": 3201,
        "sm_app_clock": locked or 1980,
        "sm_app_clock_default": 1980,
        "mem_app_clock": 3201,
        "mem_app_clock_default": 3201,
        "power_limit": knobs.get("power_limit", POWER_LIMIT),
        "power_default": POWER_LIMIT,
        "throttle": list(knobs.get("throttle", [])),
        "fan": None,  # H200: no fan of its own (NVML: not supported)
        "ecc_corrected": knobs.get("ecc_corrected", 0),
        "ecc_uncorrected": knobs.get("ecc_uncorrected", 0),
        "retired_pending": False,
        "remap_pending": knobs.get("remap_pending", False),
        "remap_failed": False,
        "pcie_gen": 5,
        "pcie_gen_max": 5,
        "pcie_width": 16,
        "pcie_width_max": 16,
        "display_active": knobs.get("display", False),
        "nvlink_peers": list(knobs.get("nvlink_peers", [])),
    }


class DriverState(object):
    """The sim's driver state by GPU ("0": {...}), shared by every reader of the sim through
    <base>/state.json (read again only when it changed): orphaned memory, persistence mode,
    clock-event reasons, ECC counts, a cooling curve, locked clocks, MIG, display, NVLink."""

    def __init__(self, directory):
        # type: (str) -> None
        self.path = os.path.join(directory, STATE_FILE)
        self._stamp = None  # type: Optional[int]
        self._cache = {}  # type: Dict[str, Any]
        self._write_lock = threading.Lock()  # one change at a time: each rewrites the whole file

    def read(self):
        # type: () -> Dict[str, Any]
        """The state of every GPU the state names ({} when none has any)."""
        try:
            stamp = os.stat(self.path).st_mtime_ns
        except OSError:
            return {}
        if stamp != self._stamp:
            try:
                with open(self.path) as f:
                    loaded = json.load(f)
            except (OSError, ValueError):
                return self._cache
            self._cache = loaded.get("gpus", {}) if isinstance(loaded, dict) else {}
            self._stamp = stamp
        return self._cache

    def set(self, index, knobs):
        # type: (int, Dict[str, Any]) -> None
        """Change GPU `index`'s state: each knob set to its value, or removed where it is None."""
        with self._write_lock:
            state = json.loads(json.dumps(self.read()))
            gpu = state.setdefault(str(index), {})
            for key, value in knobs.items():
                if value is None:
                    gpu.pop(key, None)
                else:
                    gpu[key] = value
            write_file(self.path, json.dumps({"version": 1, "gpus": state}), 0o644)
            self._stamp = None  # read it again, whatever the clock's resolution

"""The real driver, through pynvml (nvidia-ml-py).

Costs measured on H200 (GPU_FACTS.md "Costs"): memory info 6-8 us, utilization/power/temperature
1-2 us, running-process lists 7-16 us each (one driver call a list: nvml_lists.py).
nvmlDeviceGetProcessUtilization costs 2.5 ms and is not called per sample. Static facts (name, UUID,
minor, total memory, power limit) are read once.

Stdlib + pynvml only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple  # noqa: F401  (type comments)

from .base import Listed, Reader, ReaderError, Tags, instance_id  # noqa: F401  (type comments)
from .nvml_lists import ProcessLists
from .nvml_preflight import COMPUTE_MODES, THROTTLE_BITS, PreflightReads, _text, throttle_names  # noqa: F401

GPU_LOST = "gpu-lost"
# How close two GPUs are, by NVML's common-ancestor level (nvml.h nvmlGpuTopologyLevel_t: stable
# values), in the words of common.TOPOLOGY_LEVELS; an NVLink between them (P2P over NVLink) is closer.
TOPOLOGY_BY_LEVEL = {0: "board", 10: "switch", 20: "switches", 30: "bridge", 40: "node", 50: "system"}
P2P_CAPS_NVLINK = 2  # NVML_P2P_CAPS_INDEX_NVLINK
P2P_STATUS_OK = 0  # NVML_P2P_STATUS_OK
RESET_TIMEOUT_S = 120.0
# The shortest span a first per-process utilization reading covers: the driver samples a process
# every 1/6 s to 1 s (by GPU), so a shorter one could miss a process that is busy right now.
MIN_UTIL_WINDOW_S = 1.0
# MIG: the instances of a GPU (which exist, their ids, UUIDs and sizes) are read again every this
# many readings (an operator may create or destroy one at any time); their memory every reading.
MIG_LAYOUT_EVERY = 30


def _percent(value):
    # type: (Any) -> int
    """A utilization figure as NVML gives it, in 0..100 (anything else, a driver's "not available"
    marker, counts as 0)."""
    return value if isinstance(value, int) and 0 <= value <= 100 else 0


def _nvidia_smi(args):
    # type: (List[str]) -> Tuple[bool, str]
    """nvidia-smi with these arguments (a list: no shell); (succeeded, what it said)."""
    import shutil
    import subprocess

    program = shutil.which("nvidia-smi")
    if program is None:
        return False, "nvidia-smi is not on this host's PATH"
    try:
        done = subprocess.run(
            [program, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=RESET_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return False, "nvidia-smi %s: %s" % (" ".join(args), exc)
    words = done.stdout.decode("utf-8", "replace").strip()[-500:]
    return done.returncode == 0, words or "nvidia-smi exited with %d" % done.returncode


def _bus_id(info):
    # type: (Any) -> Optional[str]
    """A GPU's PCI bus id (`00000000:18:00.0`) from nvmlDeviceGetPciInfo's answer; None if empty."""
    return _text(getattr(info, "busId", "")) or None


class NvmlReader(PreflightReads, Reader):
    name = "nvml"
    device_prefix = "/dev/nvidia"

    def __init__(self, clock=time.time):
        # type: (Callable[[], float]) -> None
        """`clock`: Unix time in seconds, the clock the driver stamps its utilization samples with
        (CPU time in microseconds since the epoch)."""
        PreflightReads.__init__(self)
        self._clock = clock
        self._memory_v2 = True
        self._util_seen = {}  # type: Dict[int, int]  # GPU index -> newest utilization sample read (µs)
        self._util_unsupported = set()  # type: Set[int]  # GPUs whose driver refuses per-process util
        self._mig_unsupported = set()  # type: Set[int]  # GPUs (or a pynvml) without MIG: not asked again
        # GPU index -> (the reading it was taken at, MIG mode on, its instances' fixed facts)
        self._mig_layout = {}  # type: Dict[int, Tuple[int, bool, List[Dict[str, Any]]]]
        self._reads = 0
        self._tags = {}  # type: Tags
        self._lists = None  # type: Any  # ProcessLists, once open

    def open(self):
        # type: () -> Dict[str, object]
        try:
            import pynvml
        except ImportError:
            raise ReaderError("no-library", "pynvml (nvidia-ml-py) is not installed on this host") from None
        self._nv = nv = pynvml
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            raise self._init_error(exc) from None
        try:
            count = nv.nvmlDeviceGetCount()
        except nv.NVMLError as exc:
            raise ReaderError("no-driver", "NVIDIA driver error: %s" % (exc,)) from None
        if count == 0:
            raise ReaderError("no-gpu", "the NVIDIA driver is loaded but sees no GPU")
        self._gpus = [self._static(i) for i in range(count)]
        self._lists = ProcessLists(nv)
        self._read_topology()
        return {
            "driver_version": self._call(nv.nvmlSystemGetDriverVersion, _text),
            "nvml_version": self._call(nv.nvmlSystemGetNVMLVersion, _text),
            "cuda_driver_version": self._call(nv.nvmlSystemGetCudaDriverVersion),
        }

    def _init_error(self, exc):
        # type: (Any) -> ReaderError
        nv = self._nv
        code = getattr(exc, "value", None)
        if code in (nv.NVML_ERROR_LIBRARY_NOT_FOUND, nv.NVML_ERROR_DRIVER_NOT_LOADED):
            return ReaderError("no-driver", "no NVIDIA driver (%s)" % (exc,))  # the app names the host
        if code == nv.NVML_ERROR_NO_PERMISSION:
            return ReaderError("no-permission", "no permission to open the NVIDIA driver (%s)" % (exc,))
        return ReaderError("no-driver", "NVML failed to start: %s" % (exc,))

    def _call(self, fn, convert=None, *args):
        # type: (Any, Any, Any) -> Any
        """One NVML query; None where the GPU (or this pynvml) does not support it (never an exception)."""
        if fn is None:
            return None
        try:
            value = fn(*args)
        except self._nv.NVMLError:
            return None
        return convert(value) if convert else value

    def _static(self, index):
        # type: (int) -> Dict[str, Any]
        nv = self._nv
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        limit = self._call(nv.nvmlDeviceGetEnforcedPowerLimit, None, handle)
        return {
            "handle": handle,
            "index": index,
            "minor": self._call(nv.nvmlDeviceGetMinorNumber, None, handle),
            "uuid": self._call(nv.nvmlDeviceGetUUID, _text, handle),
            "pci_bus_id": self._call(getattr(nv, "nvmlDeviceGetPciInfo", None), _bus_id, handle),
            "name": self._call(nv.nvmlDeviceGetName, _text, handle),
            "power_limit": limit / 1000.0 if limit is not None else None,
        }

    def _read_topology(self):
        # type: () -> None
        """Each GPU's `topology` ({"peer index": level}) into its static facts: read once, as the
        layout of a host's GPUs does not change while the driver is loaded (a pair costs two NVML
        calls). None on every GPU where the driver or pynvml tells nothing of any pair."""
        nv = self._nv
        ancestor = getattr(nv, "nvmlDeviceGetTopologyCommonAncestor", None)
        p2p = getattr(nv, "nvmlDeviceGetP2PStatus", None)
        links = {}  # type: Dict[int, Dict[str, str]]
        for i, a in enumerate(self._gpus):
            for b in self._gpus[i + 1 :]:
                status = self._call(p2p, None, a["handle"], b["handle"], P2P_CAPS_NVLINK)
                level = "nvlink" if status == P2P_STATUS_OK else None
                level = level or TOPOLOGY_BY_LEVEL.get(self._call(ancestor, None, a["handle"], b["handle"]))
                if level is not None:
                    links.setdefault(a["index"], {})[str(b["index"])] = level
                    links.setdefault(b["index"], {})[str(a["index"])] = level
        known = bool(links) or (len(self._gpus) == 1 and ancestor is not None)
        for static in self._gpus:
            static["topology"] = links.get(static["index"], {}) if known else None

    def _memory(self, handle):
        # type: (Any) -> Tuple[Optional[int], Optional[int], Optional[int], int]
        nv = self._nv
        if self._memory_v2:
            try:
                m = nv.nvmlDeviceGetMemoryInfo(handle, version=nv.nvmlMemory_v2)
                return m.total, m.used, m.reserved, 2
            except (nv.NVMLError, AttributeError, TypeError):
                self._memory_v2 = False  # old driver or binding: v1 from now on
        try:
            m = nv.nvmlDeviceGetMemoryInfo(handle)
            return m.total, m.used, None, 1
        except nv.NVMLError:
            return None, None, None, 1

    def _processes(self, handle, index, listed, tags, mig):
        # type: (Any, int, Listed, Tags, bool) -> None
        """NVML's process lists of one GPU into `listed`; MIG placements (where `mig`: the GPU is in
        MIG mode, so the ids mean something) and MPS clients (the MPS list) into `tags`."""
        for entries, mps in self._lists.read(handle):
            for pid, used, gi_id, ci_id in entries:
                mem = listed.setdefault(pid, {})
                # A process in several lists (compute and graphics) is counted once, largest figure.
                if index not in mem or (used is not None and (mem[index] or 0) < used):
                    mem[index] = used
                if mps:
                    tags.setdefault(pid, {})["mps"] = True
                gi = instance_id(gi_id) if mig else None
                if gi is not None:
                    place = (index, gi, instance_id(ci_id))
                    places = tags.setdefault(pid, {}).setdefault("mig", [])
                    if place not in places:
                        places.append(place)

    def _mig(self, static):
        # type: (Dict[str, Any]) -> Optional[List[Dict[str, Any]]]
        """The MIG instances of a GPU in MIG mode, each with its memory now; None where MIG is off,
        unsupported (the GPU, the driver or this pynvml), or cannot be read."""
        index = static["index"]
        if index in self._mig_unsupported:
            return None
        layout = self._mig_layout.get(index)
        if layout is None or self._reads - layout[0] >= MIG_LAYOUT_EVERY:
            layout = self._read_mig_layout(static)
            if layout is None:
                return None
        if not layout[1]:
            return None
        instances = []  # type: List[Dict[str, Any]]
        for fixed in layout[2]:
            total, used = self._mig_memory(fixed["handle"])
            if total is None:
                # The instance is gone (destroyed since the layout was read): read it again next time.
                self._mig_layout.pop(index, None)
                continue
            record = dict((k, v) for k, v in fixed.items() if k != "handle")
            record.update(memory_total=total, memory_used=used)
            instances.append(record)
        return instances

    def _read_mig_layout(self, static):
        # type: (Dict[str, Any]) -> Optional[Tuple[int, bool, List[Dict[str, Any]]]]
        nv = self._nv
        index, handle = static["index"], static["handle"]
        get_mode = getattr(nv, "nvmlDeviceGetMigMode", None)
        if get_mode is None:
            self._mig_unsupported.add(index)
            return None
        try:
            mode = get_mode(handle)
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) in (
                getattr(nv, "NVML_ERROR_NOT_SUPPORTED", 3),
                getattr(nv, "NVML_ERROR_FUNCTION_NOT_FOUND", 13),
            ):
                self._mig_unsupported.add(index)
            return None
        on = bool(mode[0]) if isinstance(mode, (list, tuple)) and mode else False
        fixed = []  # type: List[Dict[str, Any]]
        count = self._call(getattr(nv, "nvmlDeviceGetMaxMigDeviceCount", None), None, handle) if on else 0
        by_index = getattr(nv, "nvmlDeviceGetMigDeviceHandleByIndex", None)  # type: Any
        for slot in range(count if isinstance(count, int) and by_index is not None else 0):
            try:
                mig = by_index(handle, slot)
            except nv.NVMLError:
                continue  # NOT_FOUND: no instance in this slot
            fixed.append(
                {
                    "handle": mig,
                    "gi": instance_id(self._call(getattr(nv, "nvmlDeviceGetGpuInstanceId", None), None, mig)),
                    "ci": instance_id(
                        self._call(getattr(nv, "nvmlDeviceGetComputeInstanceId", None), None, mig)
                    ),
                    "uuid": self._call(nv.nvmlDeviceGetUUID, _text, mig),
                    "name": self._call(nv.nvmlDeviceGetName, _text, mig),
                }
            )
        fixed.sort(key=lambda f: (f["gi"] is None, f["gi"] or 0, f["ci"] is None, f["ci"] or 0))
        layout = (self._reads, on, fixed)
        self._mig_layout[index] = layout
        return layout

    def _mig_memory(self, handle):
        # type: (Any) -> Tuple[Optional[int], Optional[int]]
        nv = self._nv
        if self._memory_v2:
            try:
                m = nv.nvmlDeviceGetMemoryInfo(handle, version=nv.nvmlMemory_v2)
                return m.total, m.used
            except (nv.NVMLError, AttributeError, TypeError):
                pass
        try:
            m = nv.nvmlDeviceGetMemoryInfo(handle)
            return m.total, m.used
        except nv.NVMLError:
            return None, None

    def process_tags(self):
        # type: () -> Tags
        return self._tags

    def read(self):
        # type: () -> Tuple[List[Dict[str, Any]], Listed]
        nv = self._nv
        gpus = []  # type: List[Dict[str, Any]]
        listed = {}  # type: Listed
        tags = {}  # type: Tags
        self._reads += 1
        for static in self._gpus:
            handle = static["handle"]
            record = {k: v for k, v in static.items() if k != "handle"}  # type: Dict[str, Any]
            total, used, reserved, version = self._memory(handle)
            if total is None and self._lost(handle):
                record.update(_empty(GPU_LOST))
                gpus.append(record)
                continue
            util = self._call(nv.nvmlDeviceGetUtilizationRates, None, handle)
            power = self._call(nv.nvmlDeviceGetPowerUsage, None, handle)
            persistence = self._call(nv.nvmlDeviceGetPersistenceMode, None, handle)
            record.update(
                memory_total=total,
                memory_used=used,
                memory_reserved=reserved,
                memory_version=version,
                util_gpu=util.gpu if util is not None else None,
                util_mem=util.memory if util is not None else None,
                temperature=self._call(nv.nvmlDeviceGetTemperature, None, handle, nv.NVML_TEMPERATURE_GPU),
                power_draw=power / 1000.0 if power is not None else None,
                persistence=bool(persistence) if persistence is not None else None,
                error=None,
            )
            record["mig_instances"] = mig = self._mig(static)
            gpus.append(record)
            self._processes(handle, static["index"], listed, tags, mig is not None)
        self._tags = tags
        return gpus, listed

    def process_utilization(self, window=None, gpus=None):
        # type: (Optional[float], Optional[Set[int]]) -> Optional[Dict[int, Dict[int, Dict[str, Optional[int]]]]]
        """nvmlDeviceGetProcessUtilization on each GPU, averaged per process over the driver's
        samples newer than the last call's (NVML_ERROR_NOT_FOUND: none since, nothing ran).

        Until a GPU has given a sample, it is asked for the last `window` seconds only (the time
        between two readings; at least MIN_UTIL_WINDOW_S), not from timestamp 0: 0 returns the
        driver's whole buffer, and a process whose one start-up kernel ran long before the probe
        started would show 1 % SM in the first reading and not be idle. The driver filters by the
        timestamp (only samples newer than it come back), so nothing older is copied out."""
        nv = self._nv
        query = getattr(nv, "nvmlDeviceGetProcessUtilization", None)
        if query is None:
            return None
        out = {}  # type: Dict[int, Dict[int, Dict[str, Optional[int]]]]
        supported = False
        span = max(MIN_UTIL_WINDOW_S, window if window is not None else MIN_UTIL_WINDOW_S)
        since = max(0, int((self._clock() - span) * 1e6))  # the driver's clock: µs since the epoch
        for static in self._gpus:
            index = static["index"]
            if index in self._util_unsupported:
                continue
            if gpus is not None and index not in gpus:
                supported = True  # not asked: nothing there to share it out to
                continue
            try:
                samples = query(static["handle"], self._util_seen.get(index, since))
            except nv.NVMLError as exc:
                code = getattr(exc, "value", None)
                if code == nv.NVML_ERROR_NOT_FOUND:
                    supported = True  # no sample newer than the last: nothing ran there
                elif code in (nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_NO_PERMISSION):
                    self._util_unsupported.add(index)
                continue
            supported = True
            sums = {}  # type: Dict[int, List[int]]
            newest = self._util_seen.get(index, since)
            for s in samples:
                newest = max(newest, int(s.timeStamp))
                acc = sums.setdefault(int(s.pid), [0, 0, 0, 0, 0])
                acc[0] += 1
                for i, value in enumerate((s.smUtil, s.memUtil, s.encUtil, s.decUtil), 1):
                    acc[i] += _percent(value)
            self._util_seen[index] = newest
            for pid, (n, sm, mem, enc, dec) in sums.items():
                out.setdefault(pid, {})[index] = {
                    "sm": sm // n,
                    "mem": mem // n,
                    "enc": enc // n,
                    "dec": dec // n,
                }
        return out if supported else None

    def reset(self, index):
        # type: (int) -> Tuple[bool, str]
        """nvidia-smi --gpu-reset, with this reader's own hold on the driver let go for it (an NVML
        client holds every device file), taken again after."""
        uuid = self._uuid(index)
        nv = self._nv
        try:
            nv.nvmlShutdown()
        except nv.NVMLError:
            pass
        try:
            return _nvidia_smi(["--gpu-reset", "-i", uuid])
        finally:
            self._mig_layout = {}  # handles from before the reset are stale
            self._steady, self._nvlink, self._unsupported = {}, {}, set()  # asked again after a reset
            try:
                nv.nvmlInit()
                self._gpus = [self._static(i) for i in range(nv.nvmlDeviceGetCount())]
            except nv.NVMLError:
                self._gpus = []

    def set_persistence(self, index, on):
        # type: (int, bool) -> Tuple[bool, str]
        return _nvidia_smi(["-i", self._uuid(index), "-pm", "1" if on else "0"])

    def _uuid(self, index):
        # type: (int) -> str
        """nvidia-smi's -i takes an index in its own order or a UUID: the UUID is unambiguous."""
        for static in self._gpus:
            if static["index"] == index and static.get("uuid"):
                return str(static["uuid"])
        return str(index)

    def _lost(self, handle):
        # type: (Any) -> bool
        nv = self._nv
        try:
            nv.nvmlDeviceGetMemoryInfo(handle)
        except nv.NVMLError as exc:
            lost = getattr(exc, "value", None) == nv.NVML_ERROR_GPU_IS_LOST  # type: bool
            return lost
        return False

    def close(self):
        # type: () -> None
        if self._nv is not None and self._gpus:
            try:
                self._nv.nvmlShutdown()
            except self._nv.NVMLError:
                pass
            self._gpus = []


def _empty(error):
    # type: (str) -> Dict[str, Any]
    fields = ("memory_total", "memory_used", "memory_reserved", "util_gpu", "util_mem", "temperature")
    record = dict.fromkeys(fields)  # type: Dict[str, Any]
    record.update(power_draw=None, persistence=None, memory_version=None, mig_instances=None, error=error)
    return record

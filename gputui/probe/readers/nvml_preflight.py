"""The NVML reader's preflight reading (readers/nvml.py): the state a benchmark log records, as
steps the probe spreads over samples; what cannot change while the driver runs read once, and what a
GPU does not support asked once.

Stdlib + pynvml only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

from typing import Any, Callable, Dict, List, Optional, Set, Tuple  # noqa: F401  (type comments)

COMPUTE_MODES = {0: "default", 1: "exclusive-thread", 2: "prohibited", 3: "exclusive-process"}
# Clock-event (throttle) reasons, by NVML's bit (nvml.h nvmlClocksEventReason*): stable values.
THROTTLE_BITS = (
    (0x1, "gpu-idle"),
    (0x2, "applications-clocks"),
    (0x4, "sw-power-cap"),
    (0x8, "hw-slowdown"),
    (0x10, "sync-boost"),
    (0x20, "sw-thermal"),
    (0x40, "hw-thermal"),
    (0x80, "hw-power-brake"),
    (0x100, "display-clocks"),
)


def throttle_names(mask):
    # type: (int) -> List[str]
    """The active clock-event reasons, idle left out (an idle GPU is not throttled)."""
    return [name for bit, name in THROTTLE_BITS if mask & bit and name != "gpu-idle"]


def _watts(milliwatts):
    # type: (Optional[int]) -> Optional[float]
    return milliwatts / 1000.0 if milliwatts is not None else None


def _text(value):
    # type: (Any) -> str
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class PreflightReads(object):
    """NvmlReader's preflight part: uses the reader's pynvml module (`_nv`), its GPUs (`_gpus`),
    its `_call`, and the three caches it clears after a reset."""

    def __init__(self):
        # type: () -> None
        self._nv = None  # type: Any
        self._gpus = []  # type: List[Dict[str, Any]]
        self._steady = {}  # type: Dict[int, Dict[str, Any]]  # GPU index -> preflight facts read once
        self._nvlink = {}  # type: Dict[int, bool]  # GPU index -> False: no NVLink, not asked again
        # Preflight queries a GPU answered NOT_SUPPORTED, by GPU index (a handle is a ctypes pointer:
        # it cannot be hashed), query and arguments.
        self._unsupported = set()  # type: Set[Tuple[int, str, Tuple[Any, ...]]]

    def _call(self, fn, convert=None, *args):
        # type: (Any, Any, Any) -> Any
        raise NotImplementedError

    def preflight(self):
        # type: () -> Dict[int, Dict[str, Any]]
        out = {}  # type: Dict[int, Dict[str, Any]]
        for step in self.preflight_steps():
            for index, fields in step().items():
                out.setdefault(index, {}).update(fields)
        return out

    def preflight_steps(self):
        # type: () -> List[Callable[[], Dict[int, Dict[str, Any]]]]
        """A reading in one NVML query a step (on a GPU run by its GSP firmware each is a round trip
        to it, tens to hundreds of microseconds): the probe spreads them over samples. What cannot
        change while the driver runs (maximum and default clocks, the default power limit, the
        link's maximum, whether the GPU has NVLink at all) is read by the first reading only."""
        steps = []  # type: List[Callable[[], Dict[int, Dict[str, Any]]]]
        for static in self._gpus:
            index, h = static["index"], static["handle"]
            known = self._steady.get(index)
            if known is None:
                steps.append(self._step(index, self._steady_facts, h, index))
            else:
                steps.append(self._step(index, lambda known=known: dict(known)))
            for query in self._preflight_queries(index, h):
                steps.append(self._step(index, query))
            if self._nvlink.get(index, True):
                steps.append(self._step(index, self._nvlink_step, h, index))
            else:
                steps.append(self._step(index, lambda: {"nvlink_peers": None}))
        return steps

    @staticmethod
    def _step(index, read, *args):
        # type: (int, Callable[..., Dict[str, Any]], Any) -> Callable[[], Dict[int, Dict[str, Any]]]
        return lambda: {index: read(*args)}

    def _preflight_queries(self, index, h):
        # type: (int, Any) -> List[Callable[[], Dict[str, Any]]]
        """The fields of a reading that can change, each from one query."""
        nv = self._nv
        call = self._call
        sm, mem = getattr(nv, "NVML_CLOCK_SM", 1), getattr(nv, "NVML_CLOCK_MEM", 2)

        def one(key, name, convert=None, *args):
            # type: (str, str, Any, Any) -> Callable[[], Dict[str, Any]]
            return lambda: {key: self._supported(index, h, name, convert, *args)}

        def mig():
            # type: () -> Dict[str, Any]
            mode = self._supported(index, h, "nvmlDeviceGetMigMode")
            return {
                "mig": bool(mode[0]) if mode is not None else None,
                "mig_pending": bool(mode[1]) if mode is not None else None,
            }

        def remap():
            # type: () -> Dict[str, Any]
            rows = self._supported(index, h, "nvmlDeviceGetRemappedRows")
            return {
                "remap_pending": bool(rows[2]) if rows is not None else None,
                "remap_failed": bool(rows[3]) if rows is not None else None,
            }

        reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        return [
            one("persistence", "nvmlDeviceGetPersistenceMode", bool),
            one("compute_mode", "nvmlDeviceGetComputeMode", COMPUTE_MODES.get),
            mig,
            one("sm_clock", "nvmlDeviceGetClockInfo", None, sm),
            one("mem_clock", "nvmlDeviceGetClockInfo", None, mem),
            one("sm_app_clock", "nvmlDeviceGetApplicationsClock", None, sm),
            one("mem_app_clock", "nvmlDeviceGetApplicationsClock", None, mem),
            one("power_limit", "nvmlDeviceGetEnforcedPowerLimit", _watts),
            lambda: {"throttle": call(reasons, throttle_names, h)},
            one("fan", "nvmlDeviceGetFanSpeed"),
            lambda: {"ecc_corrected": self._ecc(h, 0)},
            lambda: {"ecc_uncorrected": self._ecc(h, 1)},
            one("retired_pending", "nvmlDeviceGetRetiredPagesPendingStatus", bool),
            remap,
            one("pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration"),
            one("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth"),
            one("display_active", "nvmlDeviceGetDisplayActive", bool),
        ]

    def _supported(self, index, h, name, convert=None, *args):
        # type: (int, Any, str, Any, Any) -> Any
        """A preflight query, as `_call`; one the GPU answered NOT_SUPPORTED is not asked again
        (a GPU does not grow a fan or a display: on an H100 each such answer cost 0.15-0.3 ms)."""
        key = (index, name, args)
        if key in self._unsupported:
            return None
        nv = self._nv
        fn = getattr(nv, name, None)
        if fn is None:
            return None
        try:
            value = fn(h, *args)
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) == getattr(nv, "NVML_ERROR_NOT_SUPPORTED", 3):
                self._unsupported.add(key)
            return None
        return convert(value) if convert else value

    def _steady_facts(self, h, index):
        # type: (Any, int) -> Dict[str, Any]
        """The reading's fields that hold while the driver runs, read once (the first reading)."""
        nv = self._nv
        call = self._call
        sm, mem = getattr(nv, "NVML_CLOCK_SM", 1), getattr(nv, "NVML_CLOCK_MEM", 2)
        facts = {
            "sm_clock_max": call(getattr(nv, "nvmlDeviceGetMaxClockInfo", None), None, h, sm),
            "mem_clock_max": call(getattr(nv, "nvmlDeviceGetMaxClockInfo", None), None, h, mem),
            "sm_app_clock_default": call(
                getattr(nv, "nvmlDeviceGetDefaultApplicationsClock", None), None, h, sm
            ),
            "mem_app_clock_default": call(
                getattr(nv, "nvmlDeviceGetDefaultApplicationsClock", None), None, h, mem
            ),
            "power_default": _watts(
                call(getattr(nv, "nvmlDeviceGetPowerManagementDefaultLimit", None), None, h)
            ),
            "pcie_gen_max": call(getattr(nv, "nvmlDeviceGetMaxPcieLinkGeneration", None), None, h),
            "pcie_width_max": call(getattr(nv, "nvmlDeviceGetMaxPcieLinkWidth", None), None, h),
        }  # type: Dict[str, Any]
        self._steady[index] = facts
        return dict(facts)

    def _nvlink_step(self, h, index):
        # type: (Any, int) -> Dict[str, Any]
        peers = self._nvlink_peers(h)
        if peers is None:
            self._nvlink[index] = False  # no NVLink on this GPU: not asked again (18 failing queries)
        return {"nvlink_peers": peers}

    def _ecc(self, h, kind):
        # type: (Any, int) -> Optional[int]
        """Volatile ECC error counts (since the driver loaded): kind 0 corrected, 1 uncorrected."""
        nv = self._nv
        count = self._call(getattr(nv, "nvmlDeviceGetTotalEccErrors", None), None, h, kind, 0)  # type: Optional[int]
        return count

    def _nvlink_peers(self, h):
        # type: (Any) -> Optional[List[str]]
        """PCI bus ids of the devices this GPU's active NVLinks lead to (a reset must take them too)."""
        nv = self._nv
        state = getattr(nv, "nvmlDeviceGetNvLinkState", None)
        remote = getattr(nv, "nvmlDeviceGetNvLinkRemotePciInfo_v2", None) or getattr(
            nv, "nvmlDeviceGetNvLinkRemotePciInfo", None
        )
        if state is None or remote is None:
            return None
        peers = []  # type: List[str]
        supported = False
        for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
            active = self._call(state, None, h, link)
            if active is None:
                continue
            supported = True
            if active:
                info = self._call(remote, None, h, link)
                bus = _text(getattr(info, "busId", b"")) if info is not None else ""
                if bus and bus not in peers:
                    peers.append(bus)
        return peers if supported else None

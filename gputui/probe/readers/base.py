"""What every GPU reader gives the probe.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

from typing import Any, Callable, Dict, List, Optional, Set, Tuple  # noqa: F401  (type comments)

# {pid: {nvml_index: bytes or None}}: the union of NVML's compute, graphics and MPS process lists.
Listed = Dict[int, Dict[int, Optional[int]]]
# {pid: {"mig": [(nvml_index, gpu instance id, compute instance id or None)], "mps": True}}: what the
# latest reading said of a listed process beyond its memory (see Reader.process_tags).
Tags = Dict[int, Dict[str, Any]]
# A GPU instance or compute instance id the driver gives for "none" (nvml.h: 0xFFFFFFFF).
NO_INSTANCE = 0xFFFFFFFF


def instance_id(value):
    # type: (Any) -> Optional[int]
    """A MIG GPU or compute instance id as the driver gives it; None for "none" or nonsense."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < NO_INSTANCE:
        return None
    return value


class ReaderError(Exception):
    """The reader cannot work on this host; `code` is one of the protocol's hello error codes."""

    def __init__(self, code, message):
        # type: (str, str) -> None
        Exception.__init__(self, message)
        self.code = code
        self.message = message


class Reader(object):
    """A source of GPU state. Subclasses: readers.nvml.NvmlReader, readers.sim.SimReader."""

    name = "base"
    # Every path that starts with this is a GPU device file ("/dev/nvidia" matches /dev/nvidia0,
    # /dev/nvidiactl, /dev/nvidia-uvm and /dev/nvidia-caps/nvidia-cap1).
    device_prefix = "/dev/nvidia"
    # Whether the PIDs this reader lists are of the host's PID namespace as the probe sees it. None:
    # the probe reads /proc (procfs.in_init_pid_namespace). False: the reader knows better (the sim's
    # "neighbour" scenario plays a probe inside an LXC guest): memory listed for nobody that nothing
    # here holds is then another namespace's ("outside"), never orphaned. Set by open() at the latest.
    host_pid_namespace = None  # type: Optional[bool]
    # Whether the probe runs inside a container, where the reader knows (None: the probe guesses).
    in_container = None  # type: Optional[bool]
    # A reader that plays a Kubernetes node (the sim's "kubepods" scenario): its /var/log/pods
    # (probe/pods.py), and `cgroup` gives the cgroup text of the processes it puts in pods.
    pod_logs = None  # type: Optional[str]

    def cgroup(self, pid):
        # type: (int) -> Optional[str]
        """The /proc/PID/cgroup text this reader plays for `pid`; None: the probe reads /proc."""
        return None

    def init_pids(self):
        # type: () -> List[int]
        """Processes of the reader's own that adopt and reap the processes it runs, as init does (the
        sim's session process, a subreaper): a job's root is found below them, never above."""
        return []

    def open(self):
        # type: () -> Dict[str, object]
        """Start; return host facts (driver_version, nvml_version, cuda_driver_version).

        Raises ReaderError when the host has no usable GPU."""
        raise NotImplementedError

    def read(self):
        # type: () -> Tuple[List[Dict[str, Any]], Listed]
        """One reading: the GPU records of docs/PROTOCOL.md (without memory_baseline, which the
        probe keeps; with `mig_instances`, null where MIG is off or unknown) and the processes NVML
        lists, by pid. Cheap: called every sample and every few tens of milliseconds while verifying
        a kill."""
        raise NotImplementedError

    def process_tags(self):
        # type: () -> Tags
        """What the latest read() said of the listed processes beyond their memory: the MIG
        instances each runs in ("mig": [(index, gi, ci)], where MIG is on) and whether NVML lists it
        as an MPS client ("mps": True). Processes with nothing to say are left out."""
        return {}

    def preflight(self):
        # type: () -> Dict[int, Dict[str, Any]]
        """The state a benchmark log should record, by GPU index (docs/PROTOCOL.md "preflight"):
        persistence, clocks, power limits, clock-event reasons, ECC, PCIe, compute and MIG modes,
        display, NVLink peers. Slower than read(): the probe asks for it now and then, or on
        request. A field the GPU does not support is None; never an exception."""
        return {}

    def preflight_steps(self):
        # type: () -> List[Callable[[], Dict[int, Dict[str, Any]]]]
        """The same reading as steps, each giving some fields of some GPUs (merged, they are
        `preflight()`): the probe spreads a due reading over samples, a few steps in each. By
        default one step, the whole reading."""
        return [self.preflight]

    def process_utilization(self, window=None, gpus=None):
        # type: (Optional[float], Optional[Set[int]]) -> Optional[Dict[int, Dict[int, Dict[str, Optional[int]]]]]
        """Each process's share of each GPU since the last call, in percent: {pid: {gpu index:
        {"sm", "mem", "enc", "dec"}}} (a value the driver does not give is None); the first call
        covers the last `window` seconds (the time between two readings), not all the driver kept.
        `gpus`: only these GPUs (None: every one). Slow on some drivers (2.5 ms on 2 x H200, 1.8 ms a
        GPU on an H100): the probe reads it every few samples, on the GPUs where processes are
        listed. None: not supported."""
        return None

    def reset(self, index):
        # type: (int) -> Tuple[bool, str]
        """Reset one GPU (the driver's reset: memory nothing else can free comes back). Returns
        (done, what happened in words). Only after the probe found no blocker; never automatic."""
        return False, "this reader cannot reset a GPU"

    def set_persistence(self, index, on):
        # type: (int, bool) -> Tuple[bool, str]
        """Turn persistence mode on or off (the reset ladder turns it off first, then back on)."""
        return False, "this reader cannot change persistence mode"

    def close(self):
        # type: () -> None
        pass

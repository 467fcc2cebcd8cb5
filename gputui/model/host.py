"""What is known of a host itself, apart from its GPUs and processes: the facts its probe's hello
states once (kernel, driver, the probe's reader and mode, why it cannot read GPUs) and the load each
sample reports (CPU, memory, swap, uptime). Separate because both front ends ask these of a host
before, or beside, any sample.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..probe.wire import HOST_LIMITS
from .decode import as_dict, as_float, as_int, as_pid, as_str, read_fields, wire_fields

# The hello's error codes that mean the host has no GPU to read (no driver, no GPU, no NVML, no
# access): a host that says one is empty, not failing (snapshot, wait and the kill flow all ask).
NO_GPU_CODES = ("no-driver", "no-gpu", "no-library", "no-permission")
# A host as the fleet sees it: its link is being made, samples come, they stopped coming, it is gone.
HOST_STATUSES = ("connecting", "live", "stale", "down")
# Why a signal or a GPU reset is refused on a host read through a hub (its hello's `hub`): the hub
# runs kill plans from its own scan, and sends neither (the link and the dashboard both say so).
# The version of the hub's event stream (docs/SERVE.md), its `hub` frame's `v`: the hub sends it,
# a viewer reads no other.
HUB_PROTOCOL = 1
NOT_THROUGH_A_HUB = (
    "{what} are not sent through a hub: run them on the hub's side (gputui on the hub's host, or "
    "`gputui clean HOST`)"
)


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What a probe's hello says about its host (and why it cannot read GPUs, if it cannot)."""

    hostname: str
    kernel: str | None = None
    driver_version: str | None = None
    nvml_version: str | None = None
    cuda_driver_version: int | None = None
    python: str | None = None
    uid: int | None = None
    in_container: bool = False
    # Whether the probe sees the host's PID namespace (None: an older probe did not say). False:
    # memory nobody here holds is another container's or the host's (`outside`), never orphaned.
    host_pid_namespace: bool | None = None
    probe_version: str | None = None
    probe_pid: int | None = None
    reader: str = "nvml"
    read_only: bool = False
    # The hub this host is read through (its URL; None: read directly): what the hub does not
    # relay (signals, resets, the environment) is refused at once.
    hub: str | None = None
    error_code: str | None = None
    error_message: str | None = None

    @classmethod
    def from_hello(cls, hello: dict[str, Any]) -> HostFacts:
        err = as_dict(hello.get("error"))
        return cls(
            **read_fields(as_dict(hello.get("host")), _HELLO_HOST),
            probe_version=as_str(hello.get("probe_version")),
            probe_pid=as_pid(hello.get("pid")),
            reader=as_str(hello.get("reader")) or "nvml",
            # Anything but an explicit false keeps a probe read-only: refusing is the safe reading.
            read_only=hello.get("read_only") is not False,
            hub=as_str(hello.get("hub")),
            error_code=as_str(err.get("code")),
            error_message=as_str(err.get("message")),
        )


# The fields of the hello's `host` object; the rest are the hello's own.
_HOST_NAMES = ("hostname", "kernel", "driver_version", "nvml_version", "cuda_driver_version", "python", "uid",
               "in_container", "host_pid_namespace")  # fmt: skip
_HELLO_HOST = wire_fields(HostFacts, only=_HOST_NAMES, hostname=lambda value: as_str(value) or "?")


@dataclass(frozen=True, slots=True)
class HostMetrics:
    """The host's own load in a sample (docs/PROTOCOL.md `sample.host`); None where not known.

    Each field is taken only within gputui.probe.wire.HOST_LIMITS (the probe's bounds too), and a
    used figure only when it is at most its total."""

    cpu_percent: float | None = None  # busy share of all CPUs, 0-100
    cpus: int | None = None
    load1: float | None = None  # load averages over 1, 5 and 15 minutes
    load5: float | None = None
    load15: float | None = None
    memory_total: int | None = None  # bytes
    memory_used: int | None = None
    swap_total: int | None = None
    swap_used: int | None = None
    uptime: float | None = None  # seconds

    @classmethod
    def from_wire(cls, d: Any) -> HostMetrics | None:
        if not isinstance(d, dict):
            return None
        values: dict[str, Any] = {}
        get = d.get
        for name, (low, high, kind) in HOST_LIMITS.items():
            value = get(name)
            if type(value) is kind:  # as JSON gives it (every sample of every host)
                values[name] = value if low <= value <= high else None  # (NaN and infinities: None)
                continue
            number = as_int(value, low, high) if kind is int else as_float(value, low)
            values[name] = number if number is None or number <= high else None
        for used, total in (("memory_used", "memory_total"), ("swap_used", "swap_total")):
            if values[used] is not None and (values[total] is None or values[used] > values[total]):
                values[used] = None
        return cls(**values)

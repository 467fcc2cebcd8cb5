"""The headless API: gputui from a script, without the dashboard or the CLI's argument parsing.
What `gputui clean` and the dashboard do, as calls (bench/ uses it the same way):

    import asyncio
    from gputui import api

    async def free_gpu_3() -> None:
        fleet = api.fleet(api.hosts(["gpu01"]))          # hosts as the command line names them
        ops = api.operations(fleet)                      # the audit log and the kill flow
        views = await api.sample(fleet)                  # every host's first sample (or its trouble)
        planned = await ops.plan([api.Request("gpu01", "gpus", gpus=(3,))])
        for verdict in await ops.run_all(planned.plans):  # staged kill, then verify; logged ahead
            print(api.status_of(verdict))
        await fleet.stop()

Everything named in `__all__` is the API; the modules behind it may move. Beside the fleet (what
`fleet.listen` callbacks are given: one `FleetEvent`, `SampleArrived` and its siblings) and the
kill flow, it names what benchmarks and tools take apart: the probe in this process (`Probe` over a
`SimReader` or `NvmlReader`, `HolderScanner`, the reaper's `execute`), the wire (`decode`,
`SampleEncoder`, `apply`, `SampleIntake`), recordings, the links and their start-up, the metric
families. Those load on first use, not with the API (the command line imports this module).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from .config.file import Config, ConfigError, HostSpec
from .config.killoptions import KillOptions
from .fleet.deltas import DELTAS_EVERY, SampleIntake
from .fleet.fleet import Fleet
from .fleet.session import (
    DOWN,
    HISTORY,
    LIVE,
    ErrorArrived,
    EventArrived,
    FleetEvent,
    HelloArrived,
    HostView,
    SampleArrived,
    StatusChanged,
)
from .inventory.specs import host_specs
from .kill.auditlog import default_log_path
from .kill.operate import Operations, Planned, Request, SignalRequest, status_of
from .kill.plan.planner import PlanOptions, plan_for_gpus, plan_for_pids
from .kill.plan.record import Plan
from .model import IDLE_SLACK, Event, Gpu, PlanVerdict, Proc, Sample
from .probe.delta import SampleEncoder, apply
from .probe.wire import PROBE_TYPES, decode
from .transport import make_link
from .views.readiness import Conditions, unready

# The names below load on first use (`__getattr__`, PEP 562): the command line imports this module at
# every start, and these pull in the probe, recordings and links (measured: docs/BENCHMARKS.md §15).
# Imported here for the type checker and the import contracts only.
if TYPE_CHECKING:
    from .probe.core import Probe, fit_line
    from .probe.holders import HolderScanner
    from .probe.readers.nvml import NvmlReader
    from .probe.readers.sim import SimReader, create_context, open_devices, signal_checked
    from .probe.run.reaper import execute
    from .recording.format import RecordingReader, RecordingWriter, size_words, state_at
    from .recording.playback import PlaybackLink, Recording
    from .recording.player import ReplayLink, load_recording
    from .transport.bootstrap import boot_argv, build_payload
    from .transport.headstart import local_argv, probe_argv
    from .transport.ssh import SshLink
    from .views.metrics import families

__all__ = [
    "DELTAS_EVERY",
    "DOWN",
    "HISTORY",
    "IDLE_SLACK",
    "LIVE",
    "PROBE_TYPES",
    "Conditions",
    "Config",
    "ConfigError",
    "ErrorArrived",
    "Event",
    "EventArrived",
    "Fleet",
    "FleetEvent",
    "Gpu",
    "HelloArrived",
    "HolderScanner",
    "HostSpec",
    "HostView",
    "KillOptions",
    "NvmlReader",
    "Operations",
    "Plan",
    "PlanOptions",
    "PlanVerdict",
    "Planned",
    "PlaybackLink",
    "Probe",
    "Proc",
    "Recording",
    "RecordingReader",
    "RecordingWriter",
    "ReplayLink",
    "Request",
    "Sample",
    "SampleArrived",
    "SampleEncoder",
    "SampleIntake",
    "SignalRequest",
    "SimReader",
    "SshLink",
    "StatusChanged",
    "apply",
    "boot_argv",
    "build_payload",
    "create_context",
    "decode",
    "default_log_path",
    "execute",
    "families",
    "fit_line",
    "fleet",
    "hosts",
    "load_recording",
    "local_argv",
    "open_devices",
    "operations",
    "plan_for_gpus",
    "plan_for_pids",
    "probe_argv",
    "sample",
    "signal_checked",
    "size_words",
    "state_at",
    "status_of",
    "unready",
]

# Loaded on first use: the command line imports this module at every start, and these would cost it
# SSH's crypto, prometheus_client, NVML's bindings, the sim's and the recordings' modules.
_LAZY = {
    ".probe.core": ("Probe", "fit_line"),
    ".probe.holders": ("HolderScanner",),
    ".probe.readers.nvml": ("NvmlReader",),
    ".probe.readers.sim": ("SimReader", "create_context", "open_devices", "signal_checked"),
    ".probe.run.reaper": ("execute",),
    ".recording.format": ("RecordingReader", "RecordingWriter", "size_words", "state_at"),
    ".recording.playback": ("PlaybackLink", "Recording"),
    ".recording.player": ("ReplayLink", "load_recording"),
    ".transport.bootstrap": ("boot_argv", "build_payload"),
    ".transport.headstart": ("local_argv", "probe_argv"),
    ".transport.ssh": ("SshLink",),
    ".views.metrics": ("families",),
}
_LAZY_FROM = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str) -> object:
    """A name of `_LAZY`, imported when it is first asked for (PEP 562)."""
    module = _LAZY_FROM.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __package__), name)
    globals()[name] = value
    return value


def hosts(names: Sequence[str] = (), config: Config | None = None, read_only: bool = False) -> list[HostSpec]:
    """The hosts `names` mean, as the command line takes them: a name of the config's first, a host
    spec (`gpu[001-128]`, `@file:PATH`, `@ssh:PATTERN`, `@slurm:PARTITION`, a group: gputui/inventory),
    else `[user@]host[:port]`; no names: the config's hosts, else this machine. Raises ConfigError for
    a name given twice or one that cannot be a host, InventoryError for a spec that names none."""
    config = config if config is not None else Config()
    if names:
        specs = host_specs(names, config)
    elif config.hosts:
        specs = list(config.hosts)
    else:
        specs = [HostSpec(name="local")]
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ConfigError(None, None, f"host {spec.name!r} is named twice")
        seen.add(spec.name)
    if read_only or config.read_only:
        specs = [replace(s, read_only=True) for s in specs]
    return specs


def fleet(specs: Sequence[HostSpec], interval: float = 1.0) -> Fleet:
    """A fleet of `specs`, each reached by its own link (local, SSH, or a simulated host); not started:
    `sample` or `Fleet.start` starts it, `Fleet.stop` ends every probe."""
    built = Fleet()
    for spec in specs:
        # A factory, not a link: the session makes a new link each time it reconnects.
        built.add(
            spec.name,
            functools.partial(make_link, spec, interval),
            read_only=spec.read_only,
            group=spec.group,
            interval=interval,
        )
    return built


async def sample(fleet: Fleet, timeout: float = 10.0) -> list[HostView]:
    """Start `fleet` (if need be) and wait up to `timeout` for every host's first sample or its
    trouble; the hosts as they are then (`HostView.sample`, `.status`, `.facts`)."""
    fleet.start()
    await fleet.wait_first_samples(timeout)
    return fleet.hosts


def operations(
    fleet: Fleet,
    log_path: str | Path | None = None,
    *,
    kill: KillOptions | None = None,
    operator: str | None = None,
) -> Operations:
    """The kill flow over `fleet`, writing ahead to the audit log at `log_path` (the user's by
    default). The one way both front ends build it."""
    return Operations.open(fleet, log_path, kill=kill, operator=operator)

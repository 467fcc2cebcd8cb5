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

Everything named in `__all__` is the API; the modules behind it may move.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from .config.file import Config, ConfigError, HostSpec
from .config.killoptions import KillOptions
from .fleet.fleet import Fleet
from .fleet.session import HostView
from .inventory.specs import host_specs
from .kill.auditlog import default_log_path
from .kill.operate import Operations, Planned, Request, SignalRequest, status_of
from .kill.plan.planner import PlanOptions
from .kill.plan.record import Plan
from .model import Event, Gpu, PlanVerdict, Proc, Sample
from .transport import make_link
from .views.readiness import Conditions, unready

__all__ = [
    "Conditions",
    "Config",
    "ConfigError",
    "Event",
    "Fleet",
    "Gpu",
    "HostSpec",
    "HostView",
    "KillOptions",
    "Operations",
    "Plan",
    "PlanOptions",
    "PlanVerdict",
    "Planned",
    "Proc",
    "Request",
    "Sample",
    "SignalRequest",
    "default_log_path",
    "fleet",
    "hosts",
    "operations",
    "sample",
    "status_of",
    "unready",
]


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

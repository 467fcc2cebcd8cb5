"""The hosts a command names and the fleet over them: config names first, then ssh-style hosts,
else the config's, else this machine (gputui.api.hosts); with --demo, the live demo's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from .. import api
from ..config.file import Config, HostSpec
from ..fleet.fleet import Fleet


def resolve_hosts(
    names: Sequence[str], demo: bool, config: Config, read_only: bool = False
) -> list[HostSpec]:
    """Hosts named on the command line (config names first, then ssh-style), else the config's, else
    local (gputui.api.hosts); with --demo, the live demo's."""
    if demo:
        # Imported for --demo only: the live demo's control and its sims' modules are some 17 ms of
        # every other command's start (`clean --all --dry-run`, python -X importtime).
        from .democtl import demo_hosts

        specs = demo_hosts(names)  # attached to the live demo, started if need be (gputui/cli/demod.py)
        return [replace(s, read_only=True) for s in specs] if read_only or config.read_only else specs
    return api.hosts(names, config, read_only)


def build_fleet(specs: Sequence[HostSpec], interval: float) -> Fleet:
    return api.fleet(specs, interval)

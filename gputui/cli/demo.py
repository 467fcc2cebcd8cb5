"""The demo cluster: two local hosts of simulated GPUs whose memory is owned by real processes.

Each host is a real probe subprocess running the `sim` reader (gputui/probe/readers/sim/), reached
through the same local transport and bootstrap as any host, so the demo exercises the real paths.

Two ways to run it (GPUTUI_DEMO):
- "live" (the default): one cluster per user, run by a daemon (gputui/cli/demod.py) that the first
  `--demo` command (or `gputui demo start`) starts; every `--demo` command's probes attach to its
  sims, so a clean's effect is what the next command sees, and its jobs come and go.
- "fresh": each `--demo` command runs its own sims, with every job as the scenario starts it, and
  ends them when it exits: deterministic, for tests and screenshots.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..config.file import ConfigError, HostSpec
from . import democtl
from .democtl import DemoError
from .exits import Exit

DEMO_HOSTS = (
    HostSpec(name="demo-a", reader="sim", sim_scenario="demo", sim_variant=0, sim_seed=1),
    HostSpec(name="demo-b", reader="sim", sim_scenario="demo", sim_variant=1, sim_seed=2),
)
ENV_DEMO = "GPUTUI_DEMO"
DEMO_LIVE, DEMO_FRESH = "live", "fresh"  # the two values of GPUTUI_DEMO


def demo_specs(read_only: bool = False) -> list[HostSpec]:
    """The demo's hosts, each with sims of its own (a fresh demo)."""
    if not read_only:
        return list(DEMO_HOSTS)
    return [replace(spec, read_only=True) for spec in DEMO_HOSTS]


def demo_names() -> list[str]:
    return [spec.name for spec in DEMO_HOSTS]


def demo_mode(environ: Mapping[str, str] = os.environ) -> str:
    """DEMO_LIVE or DEMO_FRESH, from GPUTUI_DEMO (unset or empty: DEMO_LIVE)."""
    mode = environ.get(ENV_DEMO, "").strip() or DEMO_LIVE
    if mode not in (DEMO_LIVE, DEMO_FRESH):
        raise DemoError(
            f"{ENV_DEMO}={mode!r} is neither {DEMO_LIVE!r} (one demo that every --demo command attaches to; "
            f"the default) nor {DEMO_FRESH!r} (each command runs its own)",
            Exit.USAGE,
        )
    return mode


def demo_hosts(names: Sequence[str]) -> list[HostSpec]:
    """The demo hosts `names` (all of them when none), attached to the live demo (started if it
    is not running) unless GPUTUI_DEMO=fresh. An unknown name is a ConfigError; a demo that cannot
    run is a DemoError (gputui/cli/democtl.py)."""
    by_name = {s.name: s for s in DEMO_HOSTS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ConfigError(
            None,
            None,
            f"the demo has no host {', '.join(map(repr, unknown))} (its hosts: {', '.join(by_name)})",
        )
    specs = [by_name[n] for n in names] if names else list(DEMO_HOSTS)
    if demo_mode() == DEMO_FRESH:
        return specs
    directory = democtl.demo_directory()
    state, _ = democtl.ensure_running(directory, say=lambda line: print(line, file=sys.stderr))
    democtl.touch_used(directory)
    sims = state.get("hosts") or {}
    out = []
    for spec in specs:
        sim = sims.get(spec.name) or {}
        where = sim.get("directory")
        if not isinstance(where, str) or os.path.dirname(where) != os.path.realpath(directory):
            raise DemoError(f"the demo in {directory} runs no sim for {spec.name}")
        out.append(replace(spec, sim_dir=where))
    return out

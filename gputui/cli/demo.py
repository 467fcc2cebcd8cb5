"""The demo cluster: two local hosts of simulated GPUs whose memory is owned by real processes.

Each host is a real probe subprocess running the `sim` reader (gputui/probe/readers/sim/), reached
through the same local transport and bootstrap as any host, so the demo exercises the real paths.

Two ways to run it (GPUTUI_DEMO):
- "live" (the default): one cluster per name (GPUTUI_DEMO_NAME, else one per installation:
  gputui/cli/democtl.py), run by a daemon (gputui/cli/demod.py) that the first `--demo` command (or
  `gputui demo start`) starts; every `--demo` command's probes attach to its sims, so a clean's
  effect is what the next command sees, and its jobs come and go.
- "fresh": each `--demo` command runs its own sims, with every job as the scenario starts it, and
  ends them when it exits: deterministic, for tests and screenshots.

This module is what every command may need of the demo without starting it (its hosts, its mode, its
error, which main catches); gputui/cli/democtl.py attaches the hosts to the live demo (demo_hosts).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..config.file import ConfigError, HostSpec
from .exits import Exit

DEMO_HOSTS = (
    HostSpec(name="demo-a", reader="sim", sim_scenario="demo", sim_variant=0, sim_seed=1),
    HostSpec(name="demo-b", reader="sim", sim_scenario="demo", sim_variant=1, sim_seed=2),
)
ENV_DEMO = "GPUTUI_DEMO"
DEMO_LIVE, DEMO_FRESH = "live", "fresh"  # the two values of GPUTUI_DEMO


class DemoError(Exception):
    """Why the live demo cannot be used: one line for the user, and the exit code (1: it did not
    start or end; 2: bad usage; 4: its directory is not private, refused)."""

    def __init__(self, message: str, code: int = Exit.FAILED) -> None:
        super().__init__(message)
        self.code = code


def demo_specs(read_only: bool = False) -> list[HostSpec]:
    """The demo's hosts, each with sims of its own (a fresh demo)."""
    if not read_only:
        return list(DEMO_HOSTS)
    return [replace(spec, read_only=True) for spec in DEMO_HOSTS]


def demo_names() -> list[str]:
    return [spec.name for spec in DEMO_HOSTS]


def check_demo_names(names: Sequence[str]) -> None:
    """ConfigError for a name that is none of the demo's hosts (said before the demo is started)."""
    unknown = [n for n in names if n not in demo_names()]
    if unknown:
        raise ConfigError(
            None,
            None,
            f"the demo has no host {', '.join(map(repr, unknown))} (its hosts: {', '.join(demo_names())})",
        )


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

"""The demo cluster: two local hosts of simulated GPUs whose memory is owned by real processes.

Each host is a real probe subprocess running the `sim` reader (gputui/probe/readers/sim.py), reached
through the same local transport and bootstrap as any host, so the demo exercises the real paths.
"""

from __future__ import annotations

from .config import HostSpec

DEMO_HOSTS = (
    HostSpec(name="demo-a", reader="sim", sim_scenario="demo", sim_variant=0, sim_seed=1),
    HostSpec(name="demo-b", reader="sim", sim_scenario="demo", sim_variant=1, sim_seed=2),
)


def demo_specs(read_only: bool = False) -> list[HostSpec]:
    if not read_only:
        return list(DEMO_HOSTS)
    from dataclasses import replace

    return [replace(spec, read_only=True) for spec in DEMO_HOSTS]

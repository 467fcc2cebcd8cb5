"""Host specs the tests use: a probe that needs no GPU (the sim, no jobs), the "preflight" sim host."""

from __future__ import annotations

from gputui.config.file import HostSpec

PREFLIGHT_HOST = "p"  # the name of preflight_spec()'s host


def probe_host(name: str = "local", **fields: object) -> HostSpec:
    """A host whose probe needs no GPU: the simulated reader, scenario "empty" (no jobs)."""
    return HostSpec(name=name, reader="sim", sim_scenario="empty", **fields)  # type: ignore[arg-type]


def preflight_spec(scenario: str = "preflight", name: str = PREFLIGHT_HOST) -> HostSpec:
    """A seeded sim host: by default the "preflight" scenario (four GPUs, each unready in its own way)."""
    return HostSpec(name=name, reader="sim", sim_scenario=scenario, sim_seed=7)


def sim_host_toml(name: str, scenario: str, seed: int) -> str:
    """A config file's sim host on this machine (`[[hosts]]`), of `scenario` with `seed`: what the
    real CLI reads with --config."""
    return (
        f'\n[[hosts]]\nname = "{name}"\naddress = "local"\nreader = "sim"\n'
        f'sim_scenario = "{scenario}"\nsim_seed = {seed}\n'
    )


def mig_uuids(host: dict[str, object]) -> dict[str, str]:
    """GPU 0's MIG instances by label (`1.0`), from a host of `snapshot --json`: the sim's "mig"
    scenario gives them UUIDs from its seed, the same in every command of one seed."""
    gpus = host["gpus"]
    assert isinstance(gpus, list)
    return {f"{i['gi']}.{i['ci']}": i["uuid"] for i in gpus[0]["mig_instances"]}

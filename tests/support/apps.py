"""Apps for the UI tests: the demo's recordings (tests/fixtures) replayed into fleets and apps, on a
frozen clock and with an audit log of their own (what most UI tests, the screenshots and some
benchmarks start from); one live sim host; a host that cannot be reached."""

from __future__ import annotations

import tempfile
import uuid
from functools import cache
from pathlib import Path
from typing import Any

from gputui.config.file import HostSpec
from gputui.fleet.fleet import Fleet
from gputui.recording.player import ReplayLink, load_recording
from gputui.transport.base import TransportError
from gputui.transport.local import LocalLink
from gputui.ui import GpuTuiApp, make_app
from tests.support.paths import FIXTURES

FROZEN = 1764430000.0  # 2025-11-29 15:26:40 UTC: every sample age reads 0.0 s
QUIET = 3600.0  # a fleet interval longer than any test, so a finished recording never looks stale
HOSTS = ("demo-a", "demo-b")
OPERATOR = "root"  # who owns the recorded processes: no "not yours" warnings in fixed screens


@cache
def recording(name: str) -> tuple[dict[str, Any], ...]:
    return tuple(load_recording(FIXTURES / f"{name}.jsonl"))


# The last sample of what each host name replays in the latest fleet built (its recording, or the
# records a test gave it): what `settle` waits for.
_LAST_SEQ: dict[str, int] = {}


def last_seq(name: str) -> int:
    if name in _LAST_SEQ:
        return _LAST_SEQ[name]
    return max(r["seq"] for r in recording(name) if r["type"] == "sample")


def replay_fleet(
    hosts: tuple[str, ...] = HOSTS,
    *,
    records: dict[str, list[dict[str, Any]]] | None = None,
    loop: bool = False,
    rate: float | None = None,
    interval: float = QUIET,
) -> Fleet:
    fleet = Fleet()
    for name in hosts:
        recs = list(records[name]) if records and name in records else list(recording(name))
        seqs = [r["seq"] for r in recs if r.get("type") == "sample"]
        if seqs:
            _LAST_SEQ[name] = max(seqs)
        fleet.add(name, lambda recs=recs: ReplayLink(recs, loop=loop, rate=rate), interval=interval)
    return fleet


def scratch_log() -> Path:
    """A fresh audit log path for one app (created only if a plan is confirmed): an app built here
    never reads or writes the user's audit log, nor another app's."""
    return Path(tempfile.gettempdir()) / f"gputui-ui-{uuid.uuid4().hex[:12]}" / "actions.jsonl"


def build_app(hosts: tuple[str, ...] = HOSTS, *, interval: float = QUIET, **kwargs: Any) -> GpuTuiApp:
    fleet_kwargs = {k: kwargs.pop(k) for k in ("records", "loop", "rate") if k in kwargs}
    fleet = replay_fleet(hosts, interval=interval, **fleet_kwargs)
    kwargs.setdefault("clock", lambda: FROZEN)
    kwargs.setdefault("log_path", scratch_log())
    kwargs.setdefault("operator", OPERATOR)
    return make_app(fleet, interval=interval, **kwargs)


# -- live hosts ---------------------------------------------------------------------------------

LIVE_INTERVAL = 0.2  # a live sim host's sampling interval in the UI tests


def live_app(tmp_path: Path, spec: HostSpec, interval: float = LIVE_INTERVAL, **kwargs: Any) -> GpuTuiApp:
    """An app on one real sim probe (a subprocess through the local transport), its audit log in
    tmp_path. Every process the sim starts ends with its probe when the app stops the fleet."""
    fleet = Fleet()
    fleet.add(spec.name, lambda: LocalLink(spec, interval=interval), interval=interval)
    return make_app(fleet, interval=interval, log_path=tmp_path / "actions.jsonl", **kwargs)


def sim_app(tmp_path: Path, interval: float = LIVE_INTERVAL, **kwargs: Any) -> GpuTuiApp:
    """Host demo-a live: the demo scenario's first variant, seeded."""
    spec = HostSpec(name="demo-a", reader="sim", sim_scenario="demo", sim_variant=0, sim_seed=1)
    return live_app(tmp_path, spec, interval, **kwargs)


class Unreachable:
    """A link whose host cannot be reached: what an SSH host that refuses the connection gives, at
    every attempt (the same reason: the host's state stays as it is)."""

    hello = None
    failure = None

    def __init__(self, message: str = "ssh: connect to host gpu-9 port 22: Connection refused") -> None:
        self.message = message

    async def open(self) -> None:
        raise TransportError("unreachable", self.message)

    async def recv(self) -> dict[str, Any] | None:
        return None

    async def send(self, message: dict[str, Any]) -> None:
        pass

    async def close(self) -> None:
        pass

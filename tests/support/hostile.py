"""A hostile fake probe for tests, reached the way a real probe is: through the bootstrap and the
local transport (gputui/transport/local.py), so every byte goes through the app's own line reader,
decoder, fleet and UI.

    link = HostileLink("escapes")  # a Link, for Fleet.add(name, lambda: ...) or make_app's fleet
    fleet, view, links = hostile_fleet("nested", mix=True)  # a Fleet with one hostile host, not started
    await stop_fleet(fleet, links)  # quit, then stop; the probe killed by its PID if it still hangs

Keywords (see options()): mix (good samples between the bad lines), interval (the probe's),
variant, count and compact (huge), after ("hello" or "plan", for silence), rate (slow, bytes/s);
hostile_fleet also takes fleet_interval and read_only. Samples the wire must refuse carry a
seq >= BAD_SEQ; the GPU user of the good samples is USER_PID/USER_START; a forged verdict names
FORGED_PIDS; NASTY is the string the escapes mode appends to every string field.

The probe's behaviour is tests/support/hostile_probe.py (its docstring lists the modes). Each link starts a
fresh subprocess (its own session); closing the link stops it (quit, EOF, then SIGKILL to its PID).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

from gputui.config.file import HostSpec
from gputui.fleet.fleet import Fleet
from gputui.fleet.session import HostView
from gputui.transport.bootstrap import build_payload
from gputui.transport.local import LocalLink
from tests.support.hostile_probe import BAD_SEQ, FORGED_PIDS, MODES, NASTY, USER_PID, USER_START  # noqa: F401

SOURCE = Path(__file__).with_name("hostile_probe.py")
ENTRY = "gputui_hostile_probe"
NAME = "hostile"  # the hostile host's name unless a test gives one
PATIENCE = 20.0  # seconds a test gives a hostile host to show what it waits for (a busy CI machine)


def options(
    mix: bool = False,
    interval: float = 0.2,
    variant: int = 0,
    count: int = 15_000,
    compact: bool = False,
    after: str = "hello",
    rate: float = 200.0,
) -> list[str]:
    argv = ["--interval", repr(interval), "--variant", str(variant), "--count", str(count)]
    argv += ["--after", after, "--rate", repr(rate)]
    if mix:
        argv.append("--mix")
    if compact:
        argv.append("--compact")
    return argv


def hostile_payload(mode: str, **kw: object) -> bytes:
    """The bootstrap payload that runs the hostile probe in `mode` (see options() for the rest)."""
    if mode not in MODES:
        raise ValueError(f"unknown hostile mode {mode!r} (known: {', '.join(MODES)})")
    source = SOURCE.read_text(encoding="utf-8")
    return build_payload(["--mode", mode, *options(**kw)], modules={ENTRY: (False, source)}, entry=ENTRY)


class HostileLink(LocalLink):
    """A LocalLink whose probe is the hostile one. `mode` is one of MODES; keywords as options()."""

    def __init__(self, mode: str, name: str = NAME, *, hello_timeout: float = 30.0, **kw: object) -> None:
        self.mode = mode
        super().__init__(
            HostSpec(name=name),
            python=sys.executable,
            payload=hostile_payload(mode, **kw),
            hello_timeout=hello_timeout,
        )


def hostile_fleet(
    mode: str, name: str = NAME, fleet_interval: float = 0.2, read_only: bool = False, **kw: object
) -> tuple[Fleet, HostView, list[HostileLink]]:
    """A Fleet (not started) with one hostile host; the links it made, newest last."""
    links: list[HostileLink] = []

    def make() -> HostileLink:
        link = HostileLink(mode, name, **kw)
        links.append(link)
        return link

    fleet = Fleet()
    view = fleet.add(name, make, read_only=read_only, interval=fleet_interval)
    return fleet, view, links


async def stop_fleet(fleet: Fleet, links: list[HostileLink]) -> None:
    """Stop the fleet, which closes the link (quit, EOF, then SIGKILL to the probe's PID only).

    A probe that floods is asked to quit first: while lines keep coming, Fleet.stop() does not
    return on Python 3.11 (see test_fleet_stops_while_a_probe_floods). Should it still hang, the
    probe this test started is killed, by its PID, and the link reaps it."""
    with contextlib.suppress(Exception):
        await fleet.sessions[NAME].send({"type": "quit", "v": 1})
    try:
        await asyncio.wait_for(fleet.stop(), 60)
    except asyncio.TimeoutError:
        for link in links:
            if link.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(link.pid, signal.SIGKILL)
        await asyncio.wait_for(fleet.stop(), 60)

"""The options several commands share, each defined once: the hosts (HOST, --demo, --config),
--idle-minutes, --timeout, --interval and --log; and what the shared ones mean (`idle_after`).

Light on purpose: a command builds its parser from these before the probe's head start
(gputui/cli/main.py), so nothing here may import the fleet, the transport or asyncio.
"""

from __future__ import annotations

import argparse

from ..config.file import Config
from ..config.file import idle_threshold as threshold
from . import argtypes

# The sample interval of each command's fleet; a head start (gputui/cli/main.py) starts the probe
# with it, and `wait`'s --interval defaults to it.
INTERVALS = {"snapshot": 1.0, "clean": 1.0, "wait": 0.25}
# `--demo` without [idle] in the config or --idle-minutes: its notebook kernels hold memory at 0 % SM
# from the start, and a demo should show an idle holder within a minute, not ten.
DEMO_IDLE_MINUTES = 1.0
HOST_HELP = "local, a config name, alias, user@host[:port]"


def add_hosts(p: argparse.ArgumentParser) -> None:
    """HOST..., --demo and --config: which hosts a command watches."""
    p.add_argument("hosts", nargs="*", metavar="HOST", help=HOST_HELP)
    p.add_argument("--demo", action="store_true", help="a simulated cluster: real processes, no GPU needed")
    add_config(p)


def add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config", metavar="PATH", help="TOML config (default: $GPUTUI_CONFIG, then the user dir)"
    )


def add_idle_minutes(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--idle-minutes",
        type=argtypes.minutes,
        default=None,
        metavar="M",
        help="a process holding GPU memory at 0%% SM this long is an idle holder (default: [idle] "
        "minutes in the config, else 10; 1 with --demo)",
    )


def add_timeout(p: argparse.ArgumentParser, help: str = "wait this long for each host") -> None:
    p.add_argument("--timeout", type=argtypes.seconds, default=20.0, metavar="S", help=help)


def add_interval(p: argparse.ArgumentParser, default: float | None, help: str) -> None:
    """The sample interval (the protocol's bounds, as the probe and the config check them)."""
    p.add_argument("--interval", type=argtypes.interval, default=default, metavar="S", help=help)


def add_log(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--log", metavar="PATH", help=help)


def idle_after(args: argparse.Namespace, config: Config) -> float:
    """Seconds at 0 % SM that make an idle holder: --idle-minutes, the config's [idle] minutes, 1 for
    the demo, else the default (gputui/fleet/idle.py)."""
    minutes = getattr(args, "idle_minutes", None) or config.idle_minutes
    if minutes is None and getattr(args, "demo", False):
        minutes = DEMO_IDLE_MINUTES
    return threshold(minutes)

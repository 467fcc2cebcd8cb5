"""The hosts a command names and the fleet over them: config names first, then ssh-style hosts,
else the config's, else this machine (gputui.api.hosts); with --demo, the live demo's; with --hub,
a hub's (`gputui serve`), each read from its events stream."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from dataclasses import replace

from .. import api
from ..config.file import Config, HostSpec
from ..config.hostlist import word_problem
from ..config.userfile import FileRefused, open_regular
from ..fleet.fleet import Fleet
from ..inventory.base import InventoryError
from ..model.textsafe import printable
from ..transport import make_link
from ..transport.base import TransportError
from .streams import warn


def resolve_hosts(
    names: Sequence[str],
    demo: bool,
    config: Config,
    read_only: bool = False,
    *,
    hub: str | None = None,
    token_file: str | None = None,
) -> list[HostSpec]:
    """Hosts named on the command line (config names first, then ssh-style), else the config's, else
    local (gputui.api.hosts); with --demo, the live demo's; with `hub` (--hub URL), the hub's."""
    if hub is not None:
        if names or demo:
            raise InventoryError("--hub reads the hub's hosts: it takes no HOST and no --demo")
        return hub_hosts(hub, token_file, read_only or config.read_only)
    if demo:
        # Imported for --demo only: the live demo's control and its sims' modules are some 17 ms of
        # every other command's start (`clean --all --dry-run`, python -X importtime).
        from .democtl import demo_hosts

        specs = demo_hosts(names)  # attached to the live demo, started if need be (gputui/cli/demod.py)
        return [replace(s, read_only=True) for s in specs] if read_only or config.read_only else specs
    return api.hosts(names, config, read_only)


def build_fleet(specs: Sequence[HostSpec], interval: float) -> Fleet:
    return api.fleet(specs, interval)


def over_ssh(
    fleet: Fleet, specs: Sequence[HostSpec], interval: float, read_only: bool
) -> dict[str, Callable[[], str]]:
    """Each host of `specs` read from Prometheus (no holders, no actions) -> what adds the same host,
    over SSH, to `fleet` (the dashboard's `enter` on it: gputui/ui/oversh.py)."""
    return {
        s.name: functools.partial(_open_over_ssh, fleet, s, interval, read_only)
        for s in specs
        if s.feed is not None and s.feed.startswith("prometheus:")
    }


def _open_over_ssh(fleet: Fleet, spec: HostSpec, interval: float, read_only: bool) -> str:
    """`spec`'s host over SSH as "NAME (ssh)", added to the running `fleet` once: its address (its
    name, or the address its source gave) through the user's ssh_config, like any SSH host's.
    ValueError when it cannot be."""
    name = f"{spec.name} (ssh)"
    if name in fleet.sessions:
        return name
    problem = word_problem(spec.address)
    if problem is not None or spec.is_local():
        raise ValueError(f"its address {printable(spec.address[:80])!r} is not one SSH can reach")
    twin = replace(spec, name=name, feed=None, read_only=read_only)
    fleet.add(
        name,
        functools.partial(make_link, twin, interval),
        read_only=read_only,
        interval=interval,
        group=spec.group,
    )
    fleet.start()
    return name


def hub_hosts(url: str, token_file: str | None, read_only: bool = False) -> list[HostSpec]:
    """The hosts of the hub at `url` (`--hub`), each read from its events stream (transport/hub.py),
    read-only unless the hub lets this token act (or `read_only`). The token: `token_file`'s first
    line, else $GPUTUI_HUB_TOKEN. Raises InventoryError: a bad URL or token file (usage), a hub that
    cannot be read (unavailable, as a host that is down)."""
    # Imported here: aiohttp and the hub's link are about 110 ms of a start (-X importtime, dev VM)
    # that no command without --hub should pay.
    from ..transport.hub import PREFIX, UrlError, check_url, read_hub, remember_token

    try:
        base = check_url(url)
    except UrlError as exc:
        raise InventoryError(f"--hub: {exc}") from None
    if token_file is not None:
        remember_token(base, _read_token(token_file))
    try:
        info = asyncio.run(read_hub(base))
    except TransportError as exc:
        raise InventoryError(exc.message, unavailable=True) from None
    specs = []
    for name in dict.fromkeys(info.hosts):
        if not _host_name(name):
            warn(f"the hub names a host that cannot be one, left out: {printable(name[:80])!r}")
            continue
        specs.append(
            HostSpec(name=name, address=name, read_only=read_only or not info.actions, feed=f"{PREFIX}{base}")
        )
    if not specs:
        raise InventoryError(f"the hub {base} has no hosts", unavailable=True)
    return specs


def _read_token(path: str) -> str:
    """The token: the first line of the regular file at `path` (a FIFO is refused, never waited on)."""
    try:
        with open(open_regular(path), encoding="utf-8") as file:
            token = file.readline(4096).strip()
    except FileRefused as exc:
        raise InventoryError(f"--hub-token-file {path}: {exc.reason}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError(f"--hub-token-file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not token or not token.isprintable() or " " in token:
        raise InventoryError(f"--hub-token-file {path}: its first line is not a token")
    return token


def _host_name(name: str) -> bool:
    """A name the hub gives a host is shown and typed as any host's: the one rule of host names."""
    return word_problem(name) is None

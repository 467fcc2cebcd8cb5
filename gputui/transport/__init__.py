"""Transports connect the app to probes: `local` (a subprocess) and `ssh` (asyncssh).

Both speak the same protocol through the same bootstrap, so everything works alike on one host or
a hundred. `make_link` picks one for a host entry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config.file import HostSpec
    from .base import Link


def make_link(spec: HostSpec, interval: float | None = None) -> Link:
    # Each transport is imported where a host needs it, so a command pays only for the ones it uses
    # (-X importtime on the dev VM, beyond what every command loads: the hub's link 112 ms and the
    # Prometheus link 114 ms, both aiohttp; the SSH link 106-114 ms, asyncssh; the local one 17 ms).
    if spec.feed is not None and spec.feed.startswith("hub:"):
        from .hub import HubLink, feed_url

        return HubLink(feed_url(spec.feed), spec.name)
    if spec.feed is not None and spec.feed.startswith("prometheus:"):
        from .prometheus import PromLink

        return PromLink(spec, interval=interval)
    if spec.is_local():
        from .local import LocalLink

        return LocalLink(spec, interval=interval)
    from .ssh import SshLink

    return SshLink(spec, interval=interval)

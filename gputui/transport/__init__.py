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
    if spec.feed is not None and spec.feed.startswith("hub:"):
        from .hub import HubLink, feed_url  # aiohttp, ~110 ms: only a fleet read from a hub pays it

        return HubLink(feed_url(spec.feed), spec.name)
    if spec.feed is not None and spec.feed.startswith("prometheus:"):
        from .prometheus import PromLink  # aiohttp: only a Prometheus feed pays it

        return PromLink(spec, interval=interval)
    if spec.is_local():
        from .local import LocalLink

        return LocalLink(spec, interval=interval)
    # asyncssh costs a noticeable import: only hosts that need it pay for it.
    from .ssh import SshLink

    return SshLink(spec, interval=interval)

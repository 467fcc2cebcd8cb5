"""`@prometheus:URL[#SELECTOR]`: the hosts that have GPU series in a Prometheus.

One instant query (gputui/config/promql.py `hosts_query`) for one series a GPU, gputui's own
(`gputui_gpu_memory_used_bytes`, the host its `host` label) or dcgm-exporter's (`DCGM_FI_DEV_FB_USED`,
the host its `Hostname` label, else `instance` without its port). Each host is read from then on
through the same Prometheus (HostSpec.feed, gputui/transport/prometheus.py): read-only, no process
list; its address is its name, so that the dashboard can open it over SSH (ssh_config applies).

A host name a series gives is untrusted: one that could not be an SSH argument (spaces, control
characters, a leading dash, over 255 characters) is left out, and the rest are listed.
"""

from __future__ import annotations

from ..config.hostlist import word_problem
from ..config.promql import PromError, host_of, parse_feed, query_now
from .base import InventoryError, ResolvedHost
from .tool import label


def prometheus_hosts(arg: str, source: str | None = None) -> list[ResolvedHost]:
    spec = source or f"@prometheus:{arg}"
    where = label(spec)
    try:
        feed = parse_feed(arg)
    except PromError as exc:
        raise InventoryError(f"{where}: {exc.message}") from None
    try:
        points = query_now(feed, feed.hosts_query())
    except PromError as exc:
        raise InventoryError(f"{where}: {exc.message}", unavailable=True) from None
    names: dict[str, None] = {}
    for point in points:
        name = _host(point.labels)
        if name is not None:
            names.setdefault(name, None)
    if not names:
        raise InventoryError(
            f"{where}: no host has gputui's or dcgm-exporter's GPU series there "
            "(gputui_gpu_memory_used_bytes, DCGM_FI_DEV_FB_USED)"
        )
    return [ResolvedHost(n, n, source=spec, feed=feed.feed) for n in names]


def _host(labels: dict[str, str]) -> str | None:
    name = host_of(labels)
    return name if name is not None and word_problem(name) is None else None

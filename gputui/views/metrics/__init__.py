"""The fleet's latest state as Prometheus metric families: what `gputui export` serves and writes.

Pure over the fleet's host views (no CLI, no I/O, no clock but a sample's age). One collector per
family group (node_exporter's `collector/`), each in its module with its descriptors beside the code
that fills them, registered by itself (scrape.py's `collector`): build, host, gpu (memory,
utilization, temperature, power), ready (readiness, idle holders), health (errors, preflight),
holders (who holds each GPU). `families(views)` runs them all over what the fleet holds now, and
`FleetCollector` hands them to a prometheus_client registry at scrape time, so a scrape always sees
the newest sample of each host and nothing is kept between scrapes (a host, GPU or process that is
gone is simply not listed: Prometheus marks its series stale).

Names are in base units (bytes, seconds, ratios 0-1, watts, celsius) with the `gputui_` prefix.
Labels are kept few (dcgm-exporter#585): a GPU's series carry `host`, `gpu` (its index), `uuid` and
`pci_bus_id`; who holds a GPU is one info series per (GPU, process), joined by `uuid` (or `host`,
`gpu`) and `pid`, not a job label on every series. Every metric is documented in docs/MONITORING.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from ...fleet.session import HostView

# Each group's module registers its collector when it is imported: importing them is the point.
from . import build, gpu, health, holders, host, ready  # noqa: F401
from .ready import idle_holders_now
from .scrape import GPU_LABELS, HOST_STATES, Family, IdleCount, Scrape, all_heard, collectors, host_state

__all__ = [
    "GPU_LABELS",
    "HOST_STATES",
    "Family",
    "FleetCollector",
    "IdleCount",
    "all_heard",
    "families",
    "host_state",
    "idle_holders_now",
    "registry",
    "tables",
]


def families(views: Sequence[HostView], idle: IdleCount = idle_holders_now) -> list[Metric]:
    """Every metric family of the fleet as it is now (docs/MONITORING.md lists them)."""
    return [family.metric() for family in tables(views, idle)]


def tables(views: Sequence[HostView], idle: IdleCount = idle_holders_now) -> list[Family]:
    """The same families as plain rows (what the hub writes as text itself)."""
    scrape = Scrape(views, idle)
    return [family for collect in collectors() for family in collect(scrape)]


class FleetCollector:
    """A prometheus_client collector over the fleet's host views: the families are built from the
    views `source` returns, at each collect (a scrape, a textfile write)."""

    def __init__(self, source: Callable[[], Sequence[HostView]], idle: IdleCount = idle_holders_now) -> None:
        self.source = source
        self.idle = idle

    def collect(self) -> Iterable[Metric]:
        return families(self.source(), self.idle)

    def describe(self) -> Iterable[Metric]:
        """The families without samples: their names, for the registry (a scrape's `name[]=`
        selects among them)."""
        return families([], self.idle)


def registry(collector: Collector) -> CollectorRegistry:
    """A registry of its own holding `collector` alone: no process or platform metrics of this
    Python (node_exporter's textfile collector would find them clashing with its own)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    return reg

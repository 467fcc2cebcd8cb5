"""/metrics of the hub: the exporter's families (gputui/views/metrics), encoded host by host and each
host's text kept until that host changes (a sample, a hello, its status).

`gputui export` builds every family of every host at each scrape (3.2 s of CPU at 1,024 hosts,
docs/BENCHMARKS.md). Here a scrape joins texts already made: only the hosts that changed since the
last scrape are encoded again, and the families whose value is a clock reading (a sample's age) are
read at the scrape. The text is Prometheus' format 0.0.4, as prometheus_client writes it: each host's
families are encoded by it, and their sample lines put under one HELP/TYPE header a family.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest

from ..fleet.session import HostView
from ..views.metrics import families
from ..views.metrics.scrape import is_up, label

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Families read at every scrape: their value is a clock's reading, stale the moment it is kept.
AGE = "gputui_host_sample_age_seconds"
LIVE = frozenset({AGE})

Blocks = dict[str, str]  # a family's HELP and TYPE lines: its sample lines


class _Families:
    """A collector over a given list of families (what generate_latest reads)."""

    def __init__(self, found: list[Metric]) -> None:
        self.found = found

    def collect(self) -> Iterable[Metric]:
        return self.found


def blocks(found: list[Metric]) -> Blocks:
    """The text of `found` split by family: header lines -> sample lines."""
    text = generate_latest(_Families(found)).decode("utf-8")
    out: Blocks = {}
    header: list[str] = []
    body: list[str] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("# HELP "):
            if header:
                out["".join(header)] = "".join(body)
            header, body = [line], []
        elif line.startswith("# TYPE ") and len(header) == 1:
            header.append(line)
        else:
            body.append(line)
    if header:
        out["".join(header)] = "".join(body)
    return out


def _name(found: Metric) -> str:
    return found.name


class MetricsCache:
    """The exposition of a fleet, each host's part kept while its `version` is the same."""

    def __init__(self) -> None:
        empty = families([])
        fleet_wide = blocks(empty)  # every header, in order; the build's info sample
        self.docs = {f.name: f.documentation for f in empty if f.name in LIVE}
        self.order: list[str] = list(fleet_wide)
        self.fleet_wide = fleet_wide
        self.kept: dict[str, tuple[int, Blocks]] = {}

    def host_blocks(self, view: HostView, version: int) -> Blocks:
        kept = self.kept.get(view.name)
        if kept is not None and kept[0] == version:
            return kept[1]
        found = [f for f in families([view]) if _name(f) not in LIVE]
        made = blocks(found)
        for header in list(made):
            if self.fleet_wide.get(header):
                del made[header]  # the build's info: once for the fleet, not once a host
            elif header not in self.fleet_wide:
                self.order.append(header)
                self.fleet_wide[header] = ""
        self.kept[view.name] = (version, made)
        return made

    def text(self, views: Sequence[HostView], versions: dict[str, int]) -> bytes:
        """The whole exposition: every family's header, the fleet's and then each host's lines."""
        per_host = [self.host_blocks(v, versions.get(v.name, 0)) for v in views]
        live = blocks(self._ages(views))
        names = {v.name for v in views}
        for gone in set(self.kept) - names:
            del self.kept[gone]
        out: list[str] = []
        for header in self.order:
            out.append(header)
            out.append(self.fleet_wide[header])
            if header in live:
                out.append(live[header])
                continue
            for host in per_host:
                body = host.get(header)
                if body:
                    out.append(body)
        return "".join(out).encode("utf-8")

    def _ages(self, views: Sequence[HostView]) -> list[Metric]:
        """Each host's sample age, as the host collector reads it (views/metrics/host.py)."""
        age = GaugeMetricFamily(AGE, self.docs[AGE], labels=["host"])
        for view in views:
            seconds = view.age
            if view.sample is not None and is_up(view) and seconds is not None:
                age.add_metric([label(view.name)], max(0.0, seconds))
        return [age]

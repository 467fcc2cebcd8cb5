"""/metrics of the hub: the exporter's families (gputui/views/metrics), encoded host by host and each
host's text kept until that host changes (a sample, a hello, its status).

`gputui export` builds every family of every host at each scrape (3.2 s of CPU at 1,024 hosts,
docs/BENCHMARKS.md). Here a scrape joins texts already made: only the hosts that changed since the
last scrape are encoded again, and the families whose value is a clock reading (a sample's age) are
read at the scrape. The text is Prometheus' format 0.0.4, as prometheus_client writes it: each host's
families are encoded by it, and their sample lines put under one HELP/TYPE header a family.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import cast

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.utils import floatToGoString as _untyped_go

from ..fleet.session import HostView
from ..views.metrics import families
from ..views.metrics.scrape import is_up, label

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Families read at every scrape: their value is a clock's reading, stale the moment it is kept.
AGE = "gputui_host_sample_age_seconds"
LIVE = frozenset({AGE})

# How prometheus_client writes a value (Go's float format: +Inf, NaN, 1.0); typed here.
floatToGoString = cast(Callable[[float], str], _untyped_go)
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


def sample_lines(found: Metric, memo: dict[tuple[str, ...], str] | None = None) -> str:
    """The sample lines of one family, as prometheus_client's text format writes them (labels in
    name order, values as Go writes floats), written here: its writer checks every label name of
    every sample again, most of a scrape's cost, and these names are the collectors' own. `memo`:
    label sets already written (a GPU's recur in every family of it)."""
    out: list[str] = []
    memo = {} if memo is None else memo
    order: list[str] | None = None
    for s in found.samples:
        labels = s.labels
        if not labels:
            out.append(f"{s.name} {floatToGoString(s.value)}\n")
            continue
        if order is None or len(order) != len(labels):
            order = sorted(labels)
        key = (*order, *(labels.get(k, "") for k in order))
        inner = memo.get(key)
        if inner is None:
            inner = memo[key] = ",".join([f'{k}="{_escape(labels[k])}"' for k in order])
        out.append(f"{s.name}{{{inner}}} {floatToGoString(s.value)}\n")
    return "".join(out)


def _escape(value: str) -> str:
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return value


class MetricsCache:
    """The exposition of a fleet, each host's part kept while its `version` is the same."""

    def __init__(self) -> None:
        empty = families([])
        # Each family's HELP and TYPE lines, by its name, in the exposition's order (as
        # prometheus_client writes them: a counter's name with _total, an info's with _info).
        self.headers = {f.name: next(iter(blocks([_bare(f)]))) for f in empty}
        self.fleet_wide = {f.name: sample_lines(f) for f in empty}  # the build's info
        self.docs = {f.name: f.documentation for f in empty if f.name in LIVE}
        self.kept: dict[str, tuple[int, dict[str, str]]] = {}

    def host_lines(self, view: HostView, version: int) -> dict[str, str]:
        """The host's sample lines by family name, made again only when its version moved."""
        kept = self.kept.get(view.name)
        if kept is not None and kept[0] == version:
            return kept[1]
        memo: dict[tuple[str, ...], str] = {}
        made = {
            f.name: sample_lines(f, memo)
            for f in families([view])
            if f.name not in LIVE and not self.fleet_wide.get(f.name) and f.samples
        }
        self.kept[view.name] = (version, made)
        return made

    def text(self, views: Sequence[HostView], versions: dict[str, int]) -> bytes:
        """The whole exposition: every family's header, the fleet's and then each host's lines."""
        per_host = [self.host_lines(v, versions.get(v.name, 0)) for v in views]
        live = {f.name: sample_lines(f) for f in self._ages(views)}
        names = {v.name for v in views}
        for gone in set(self.kept) - names:
            del self.kept[gone]
        out: list[str] = []
        for name, header in self.headers.items():
            out.append(header)
            out.append(self.fleet_wide[name])
            if name in live:
                out.append(live[name])
                continue
            for host in per_host:
                lines = host.get(name)
                if lines:
                    out.append(lines)
        return "".join(out).encode("utf-8")

    def _ages(self, views: Sequence[HostView]) -> list[Metric]:
        """Each host's sample age, as the host collector reads it (views/metrics/host.py)."""
        age = GaugeMetricFamily(AGE, self.docs[AGE], labels=["host"])
        for view in views:
            seconds = view.age
            if view.sample is not None and is_up(view) and seconds is not None:
                age.add_metric([label(view.name)], max(0.0, seconds))
        return [age]


def _bare(found: Metric) -> Metric:
    """`found` without its samples (for its header alone)."""
    bare = Metric(found.name, found.documentation, found.type, found.unit)
    return bare

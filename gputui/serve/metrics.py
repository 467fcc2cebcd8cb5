"""/metrics of the hub: the exporter's families (gputui/views/metrics), written host by host and each
host's text kept while what its families read stays the same.

`gputui export` builds every family of every host at each scrape and has prometheus_client write them
(3.2 s of CPU at 1,024 hosts, docs/BENCHMARKS.md). In a busy fleet most hosts send a new sample every
second, so here the work a changed host costs is what is cut (docs/BENCHMARKS.md §17.2):
- the collectors fill plain rows (`views.metrics.tables`), not prometheus_client's samples;
- a family whose rows are what they were at the last scrape keeps its text: a sample with new
  readings on some GPUs rewrites only the families those readings are in, and a sample that brought
  only a new seq, time or a process's elapsed time rewrites nothing;
- each series' `name{labels} ` is made once and kept while the series is there, and a value's text
  is looked up (a fleet's figures repeat: 0, 1, the same memory totals);
- a host whose version (the hub's count of its changes: a sample, a hello, its status) did not move
  is not read at all.
The families whose value is a clock reading (a sample's age) are written at every scrape. The text
is Prometheus' format 0.0.4 as prometheus_client writes it (labels in name order, values as Go
writes floats), line for line (tests/serve/test_metrics_text.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import cast

from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.utils import floatToGoString as _untyped_go

from ..fleet.session import HostView
from ..views.metrics import Family, IdleCount, idle_holders_now, tables
from ..views.metrics.scrape import INFO, gauge, is_up, label

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Families read at every scrape: their value is a clock's reading, stale the moment it is kept.
AGE = "gputui_host_sample_age_seconds"
LIVE = frozenset({AGE})
VALUES_KEPT = 1 << 16  # value texts looked up before the table starts again (a bound on its memory)

# How prometheus_client writes a value (Go's float format: +Inf, NaN, 1.0); typed here.
floatToGoString = cast(Callable[[float], str], _untyped_go)
Key = tuple[object, ...]  # a series of a family: its label values (an info series': and its labels)


class _Families:
    """A collector over a given list of families (what generate_latest reads)."""

    def __init__(self, found: list[Metric]) -> None:
        self.found = found

    def collect(self) -> Iterable[Metric]:
        return self.found


def header(family: Family) -> bytes:
    """The family's HELP and TYPE lines, as prometheus_client writes them."""
    bare = family.metric()
    bare.samples = []
    return generate_latest(_Families([bare]))


class Values:
    """Each value's text as Go writes the float, looked up: a scrape writes the same few thousand
    figures over and over."""

    def __init__(self) -> None:
        self.known: dict[float, str] = {}

    def text(self, value: float) -> str:
        if not value:  # 0.0 and -0.0 are one key of a dict and two texts
            return "0.0" if math.copysign(1.0, value) > 0 else "-0.0"
        found = self.known.get(value)
        if found is None:
            if len(self.known) >= VALUES_KEPT:
                self.known.clear()
            found = self.known[value] = floatToGoString(value)
        return found


class Block:
    """One family's lines of one host, with the rows they were written from and each series'
    `name{labels} ` (kept while the series is there)."""

    __slots__ = ("prefixes", "rows", "text")

    def __init__(self, family: Family, values: Values, kept: Block | None) -> None:
        self.rows = family.rows
        old = kept.prefixes if kept is not None else {}
        self.prefixes: dict[Key, str] = {}
        name = family.sample_name
        lines: list[str] = []
        for labels, value in family.rows:
            if family.kind == INFO:
                assert not isinstance(value, float)
                key: Key = (labels, *value.items())
                number = "1.0"
            else:
                assert isinstance(value, float)
                key, number = labels, values.text(value)
            prefix = old.get(key)
            if prefix is None:
                prefix = series(name, family.labels, labels, value if family.kind == INFO else None)
            self.prefixes[key] = prefix
            lines.append(prefix + number + "\n")
        self.text = "".join(lines).encode("utf-8")  # bytes: a scrape joins them as they are


def series(name: str, names: Sequence[str], labels: Sequence[str], more: object) -> str:
    """`name{a="1",b="2"} `: the labels in name order, escaped as the text format wants."""
    pairs = list(zip(names, labels, strict=True))
    if isinstance(more, Mapping):
        pairs += list(more.items())
    if not pairs:
        return f"{name} "
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(pairs))
    return f"{name}{{{inner}}} "


def _escape(value: str) -> str:
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return value


class HostText:
    """A host's blocks by family name, and the version of the host they were made at."""

    __slots__ = ("blocks", "version")

    def __init__(self) -> None:
        self.version: int | None = None
        self.blocks: dict[str, Block] = {}


class MetricsCache:
    """The exposition of a fleet, each host's part kept while its `version` is the same, and each
    family's part of a host while its rows are."""

    def __init__(self, idle: IdleCount = idle_holders_now) -> None:
        self.idle = idle
        self.values = Values()
        empty = tables([], idle)
        # Each family's HELP and TYPE lines, by its name, in the exposition's order.
        self.headers = {f.name: header(f) for f in empty}
        # The families an empty fleet has rows of (the build's info): written once, not per host.
        self.fleet_wide = {f.name: Block(f, self.values, None).text for f in empty if f.rows}
        self.docs = {f.name: f.documentation for f in empty}
        self.kept: dict[str, HostText] = {}

    def host(self, view: HostView, version: int | None) -> HostText:
        """The host's blocks, read again unless its version is the one they were made at (None: no
        version known, read every time)."""
        kept = self.kept.get(view.name)
        if kept is None:
            kept = self.kept[view.name] = HostText()
        elif version is not None and kept.version == version:
            return kept
        old = kept.blocks
        blocks: dict[str, Block] = {}
        for family in tables([view], self.idle):
            name = family.name
            if not family.rows or name in LIVE or name in self.fleet_wide:
                continue
            block = old.get(name)
            blocks[name] = (
                block
                if block is not None and block.rows == family.rows
                else Block(family, self.values, block)
            )
        kept.blocks, kept.version = blocks, version
        return kept

    def text(self, views: Sequence[HostView], versions: Mapping[str, int]) -> bytes:
        """The whole exposition: every family's header, the fleet's and then each host's lines."""
        hosts = [self.host(v, versions.get(v.name)).blocks for v in views]
        live = {AGE: self._ages(views)}
        if len(self.kept) > len(views):
            names = {v.name for v in views}
            for gone in set(self.kept) - names:
                del self.kept[gone]
        out: list[bytes] = []
        for name, head in self.headers.items():
            out.append(head)
            out.append(self.fleet_wide.get(name, b""))
            if name in live:
                out.append(live[name])
                continue
            for blocks in hosts:
                block = blocks.get(name)
                if block is not None:
                    out.append(block.text)
        return b"".join(out)

    def _ages(self, views: Sequence[HostView]) -> bytes:
        """Each host's sample age, as the host collector reads it (views/metrics/host.py)."""
        age = gauge(AGE, self.docs[AGE], ["host"])
        for view in views:
            seconds = view.age
            if view.sample is not None and is_up(view) and seconds is not None:
                age.add_metric((label(view.name),), max(0.0, seconds))
        return Block(age, self.values, None).text

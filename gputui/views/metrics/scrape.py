"""What every metric collector shares: the scrape it reads, its label rules, the walk over the GPUs of
the hosts that are up, and the register of collectors (node_exporter's `registerCollector`).

A collector is one family group (the host's, a GPU's figures, readiness, health, holders): a function
that builds its families, descriptors first, fills them from one scrape and returns them. It
registers itself under its group's name with `@collector(name)`; `collectors()` hands them out in
ORDER, the order of the exposition.

A family is a `Family`: its rows as plain tuples (label values, value). `gputui export` turns each
into prometheus_client's family (`Family.metric`); the hub (gputui/serve/metrics.py) writes the rows
as text itself and keeps what did not change, which prometheus_client's objects would cost it
(a sample's label dict, checked again when written) at every scrape of a thousand hosts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric

from ...fleet.session import CONNECTING, DOWN, LIVE, STALE, HostView
from ...model import NO_GPU_CODES, Gpu, Proc, Sample

NO_GPU = "no-gpu"
HOST_STATES = (CONNECTING, LIVE, STALE, DOWN, NO_GPU)
GPU_LABELS = ("host", "gpu", "uuid", "pci_bus_id")
# A label value is a host's text (a user name, a container's cgroup): bounded, so one odd value
# cannot grow a scrape. Every string is printable already (gputui.model escapes it).
MAX_LABEL = 128
# The groups in the order of the exposition: a textfile that node_exporter reads, or a diff of two
# scrapes, keeps its families where they were whichever module registers first.
ORDER = ("build", "host", "gpu", "ready", "health", "holders")

IdleCount = Callable[[HostView, Sample, Gpu], int | None]
GAUGE, COUNTER, INFO = "gauge", "counter", "info"
# A row's value: a figure, or an info series' labels (its value is 1).
Value = float | Mapping[str, str]
Row = tuple[tuple[str, ...], Value]


class Family:
    """One metric family of a scrape: its name (without a counter's `_total` or an info's `_info`),
    help text, kind (GAUGE, COUNTER, INFO), label names and rows (label values, value), in the
    order they were added."""

    __slots__ = ("documentation", "kind", "labels", "name", "rows")

    def __init__(self, name: str, documentation: str, kind: str, labels: Sequence[str]) -> None:
        self.name = name
        self.documentation = documentation
        self.kind = kind
        self.labels = tuple(labels)
        self.rows: list[Row] = []

    @property
    def sample_name(self) -> str:
        """The name its samples carry in the text (what prometheus_client writes)."""
        return self.name + ("_total" if self.kind == COUNTER else "_info" if self.kind == INFO else "")

    def add_metric(self, labels: Sequence[str], value: Value) -> None:
        """A row: `labels` in the family's label order; an info family's value is its labels."""
        self.rows.append((tuple(labels), value))

    def metric(self) -> Metric:
        """prometheus_client's family with the same samples (what `gputui export` serves)."""
        if self.kind == INFO:
            info = InfoMetricFamily(self.name, self.documentation, labels=self.labels)
            for labels, value in self.rows:
                assert not isinstance(value, float)
                info.add_metric(list(labels), dict(value))
            return info
        kind = CounterMetricFamily if self.kind == COUNTER else GaugeMetricFamily
        family = kind(self.name, self.documentation, labels=self.labels)
        for labels, value in self.rows:
            assert isinstance(value, float)
            family.add_metric(list(labels), value)
        return family


def gauge(name: str, documentation: str, labels: Sequence[str]) -> Family:
    return Family(name, documentation, GAUGE, labels)


def counter(name: str, documentation: str, labels: Sequence[str]) -> Family:
    return Family(name, documentation, COUNTER, labels)


def info(name: str, documentation: str, labels: Sequence[str] = ()) -> Family:
    return Family(name, documentation, INFO, labels)


@dataclass(frozen=True, slots=True)
class GpuRow:
    """One GPU of a host that is up, with the labels every GPU series carries and the processes
    that use or hold it (in the sample's order)."""

    view: HostView
    sample: Sample
    gpu: Gpu
    labels: tuple[str, ...]
    processes: tuple[Proc, ...]


@dataclass(frozen=True, slots=True)
class Scrape:
    """What one collect reads: the fleet's host views as they are now, and how idle holders are
    counted (a hook: the exporter counts them in the sample at hand). `gpus`: the GPU rows, walked
    once for every collector."""

    views: Sequence[HostView]
    idle: IdleCount
    gpus: list[GpuRow] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", list(gpu_rows(self.views)))


Collect = Callable[[Scrape], list[Family]]
_REGISTERED: dict[str, Collect] = {}


def collector(group: str) -> Callable[[Collect], Collect]:
    """Register the decorated function as the collector of `group` (one of ORDER)."""
    if group not in ORDER:
        raise ValueError(f"no place in the exposition for the group {group!r}: add it to ORDER")

    def register(collect: Collect) -> Collect:
        _REGISTERED[group] = collect
        return collect

    return register


def collectors() -> list[Collect]:
    """Every group's collector, in the order of the exposition."""
    return [_REGISTERED[group] for group in ORDER]


def label(value: object) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"


def host_state(view: HostView) -> str:
    """One of HOST_STATES: the fleet's status of the host, or `no-gpu` where its probe runs but
    reads no GPU (no driver, no GPU, no NVML library, no permission). A host that went down stays
    `down` while it tries again, until it is live: an alert on it is not reset by every attempt."""
    if view.facts is not None and view.facts.error_code in NO_GPU_CODES:
        return NO_GPU
    return view.shown_status


def is_up(view: HostView) -> bool:
    """Samples come from the host: its GPUs are listed (a stale host's last sample is at most
    DOWN_AFTER intervals old; past that the fleet calls it down and reconnects)."""
    return view.sample is not None and host_state(view) in (LIVE, STALE)


def all_heard(views: Sequence[HostView]) -> bool:
    """Every host has sent a sample or been judged down (or GPU-less): the first scrape would list
    the whole fleet. What `gputui export --listen`'s readiness endpoint answers."""
    return all(v.sample is not None or host_state(v) in (DOWN, NO_GPU) for v in views)


def gpu_rows(views: Sequence[HostView]) -> Iterator[GpuRow]:
    """The GPUs of the hosts that are up, host by host (a down host's last sample is not today's
    state, so its GPUs are not listed)."""
    for view in views:
        sample = view.sample
        if sample is None or not is_up(view):
            continue
        host = label(view.name)
        on: dict[int, list[Proc]] = {}
        for p in sample.processes:
            for index in dict.fromkeys(p.gpus):
                on.setdefault(index, []).append(p)
        for gpu in sample.gpus:
            labels = (host, str(gpu.index), label(gpu.uuid), label(gpu.pci_bus_id))
            yield GpuRow(view, sample, gpu, labels, tuple(on.get(gpu.index, ())))


def gpu_gauge(name: str, documentation: str, *extra: str) -> Family:
    """A gauge of one GPU: the GPU labels, then `extra` ones."""
    return gauge(name, documentation, [*GPU_LABELS, *extra])


def put(family: Family, labels: Sequence[str], value: float | None) -> None:
    """A sample where the figure is known: a figure the driver did not give is absent, never 0."""
    if value is not None:
        family.add_metric(labels, float(value))


def flag(family: Family, labels: Sequence[str], value: bool | None) -> None:
    """1 or 0 where the state is known, absent where it is not."""
    if value is not None:
        family.add_metric(labels, 1.0 if value else 0.0)

"""Hosts read from a Prometheus (HostSpec.feed `prometheus:URL[#SELECTOR]`): one read-only Link a host,
all the links of one feed sharing one poller.

The poller runs two instant queries a round for every host of the feed at once (gputui/config/promql.py:
every series gputui reads, and the time of each GPU's newest point), at the fleet's interval (the
`configure` its links are sent; never below MIN_POLL), and hands each of its hosts a whole sample:
the probe's wire records (docs/PROTOCOL.md), built from the series, so the fleet, the views, `wait`,
`snapshot`, `export` and `serve` take them as any host's. A sample's `time` is its newest point's: it
says how old the series are.

A host whose series stopped (absent from the answer, as Prometheus drops a target's series at its
first failed scrape; or no point newer than STOP_STEPS of its scrape steps) gets no sample: the
fleet calls it stale, and after STOP_ROUNDS rounds without one its link fails ("series-stopped"),
so the host is down and its session tries again (a link opens only for a host with series). A round
that fails (no answer, garbage, too large) gives no host a sample and says why once to each link,
one line; the other feeds and the SSH hosts of the fleet are not touched.

A GPU in the series of several exporters (SOURCE_LABELS differ) is one GPU where they agree; a value
they give differently is unknown and the GPU's error is CONFLICT, said once to the host's log
(`_merged`, `conflicts`): which of them is right cannot be told, so none is shown as if it were.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from .. import __version__
from ..config.file import HostSpec
from ..config.promql import DCGM_KEY, PREFIX, Point, PromError, PromFeed, feed_of, host_of, query
from ..model.textsafe import cut
from ..text.units import MIB
from ..text.words import count, listed
from .base import TransportError

MIN_POLL = 0.5  # seconds between two rounds, whatever the fleet asks
STOP_ROUNDS = 4  # rounds without a point before a host's link fails (the fleet is stale at 2.5)
STOP_STEPS = 3  # scrape steps (the shortest seen between two points of the host) a point may be old
OPEN_TIMEOUT = 30.0  # seconds a link waits for the first round that answers
QUEUE = 4  # records waiting for a slow reader; older samples are dropped for newer ones
POD_LABELS = ("namespace", "pod", "container")  # dcgm-exporter's, where it maps GPUs to pods
MAX_VALUE = float(1 << 63)  # past an exporter's int64, a value is not a reading: it is refused
SOURCE_LABELS = ("job", "instance")  # the labels Prometheus gives a scrape target: which exporter
CONFLICT = "series-conflict"  # the error of a GPU whose exporters' series differ (`_merged`)


def is_prometheus(spec: HostSpec) -> bool:
    return spec.feed is not None and spec.feed.startswith(PREFIX)


@dataclass(slots=True)
class _Host:
    """What the poller knows of one host between rounds."""

    newest: float = 0.0  # its newest point's time
    step: float | None = None  # the shortest gap seen between two of its newest points
    missed: int = 0  # rounds since it last had a fresh point
    links: set[PromLink] = field(default_factory=set)


class Poller:
    """The rounds of one feed on one event loop, for every link attached to it."""

    def __init__(self, feed: PromFeed) -> None:
        self.feed = feed
        self.hosts: dict[str, _Host] = {}
        self.interval: float | None = None
        self.round = 0
        self.problem: str | None = None  # the last round's failure, None when it answered
        self.done = asyncio.Event()  # set after each round (and cleared before the next)
        self.task: asyncio.Task[None] | None = None
        self.session: aiohttp.ClientSession | None = None

    def attach(self, link: PromLink) -> None:
        self.hosts.setdefault(link.name, _Host()).links.add(link)
        if self.task is None:
            self.task = asyncio.create_task(self._run(), name=f"prometheus {self.feed.url}")

    async def detach(self, link: PromLink) -> None:
        host = self.hosts.get(link.name)
        if host is not None:
            host.links.discard(link)
            if not host.links:
                del self.hosts[link.name]
        if not self.hosts:
            _POLLERS.pop((self.feed.feed, id(asyncio.get_running_loop())), None)
            task, self.task = self.task, None
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if self.session is not None:
                await self.session.close()
                self.session = None

    def ask(self, interval: float) -> None:
        self.interval = interval if self.interval is None else min(self.interval, interval)

    def _links(self) -> Iterable[PromLink]:
        return [link for host in self.hosts.values() for link in host.links]

    async def _run(self) -> None:
        self.session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None), headers={"User-Agent": f"gputui/{__version__}"}
        )
        while True:
            began = time.monotonic()
            await self._round()
            interval = max(MIN_POLL, self.interval or 1.0, *(link.interval for link in self._links()))
            await asyncio.sleep(max(0.0, began + interval - time.monotonic()))

    async def _round(self) -> None:
        assert self.session is not None
        self.done.clear()
        try:
            series, times = await asyncio.gather(
                query(self.session, self.feed, self.feed.series_query()),
                query(self.session, self.feed, self.feed.times_query()),
            )
            self.problem = None
            self._hand_out(series, times)
        except PromError as exc:
            self._failed(exc.message)
        # The poller is every host's of the feed: one round that fails in a way nobody foresaw must
        # not end it (its hosts would sit "connecting", then down with "no answer", and say nothing).
        except Exception as exc:
            self._failed(f"Prometheus at {self.feed.url}: cannot read its answer ({type(exc).__name__})")
        self.round += 1
        self.done.set()

    def _failed(self, problem: str) -> None:
        self.problem = problem
        for link in self._links():
            link.note(problem)

    def _hand_out(self, series: list[Point], times: list[Point]) -> None:
        by_host: dict[str, list[Point]] = {}
        for point in series:
            name = host_of(point.labels)
            if name in self.hosts:
                by_host.setdefault(name, []).append(point)
        newest: dict[str, float] = {}
        for point in times:
            name = host_of(point.labels)
            if name in self.hosts and point.value is not None:
                newest[name] = max(newest.get(name, 0.0), point.value)
        now = time.time()
        for name, host in self.hosts.items():
            stamp = newest.get(name)
            if stamp is not None and stamp > host.newest:
                if host.newest:
                    gap = stamp - host.newest
                    host.step = gap if host.step is None else min(host.step, gap)
                host.newest = stamp
            fresh = stamp is not None and name in by_host
            if fresh and host.step is not None and now - host.newest > STOP_STEPS * host.step:
                fresh = False  # a series that stays, with no new point (a frozen timestamp)
            host.missed = 0 if fresh else host.missed + 1
            if fresh:
                gpus = gpus_of(by_host[name])
                records, conflict = host_records(name, gpus, host.newest, self.feed), conflicts(name, gpus)
            for link in host.links:
                if fresh:
                    link.take(records, conflict)
                elif host.missed >= STOP_ROUNDS:
                    link.stop(host.newest, now)


_POLLERS: dict[tuple[str, int], Poller] = {}


def poller_for(feed: PromFeed) -> Poller:
    """The one poller of `feed` on the running loop."""
    key = (feed.feed, id(asyncio.get_running_loop()))
    poller = _POLLERS.get(key)
    if poller is None:
        poller = _POLLERS[key] = Poller(feed)
    return poller


# --------------------------------------------------------------------------- series to records


@dataclass(slots=True)
class _Gpu:
    index: int
    labels: dict[str, str] = field(default_factory=dict)
    values: dict[str, float | None] = field(default_factory=dict)
    differ: tuple[str, ...] = ()  # what its exporters' series say differently (SOURCE_LABELS apart)
    sources: tuple[tuple[str, ...], ...] = ()  # those exporters, where several give its series


def host_records(
    name: str, gpus: dict[int, _Gpu], newest: float, feed: PromFeed
) -> tuple[dict[str, Any], ...]:
    """The hello and the whole sample of one host, from its GPUs (`gpus_of`): (hello, sample)."""
    records = [_gpu_record(gpus[i]) for i in sorted(gpus)]
    driver = next((g.labels.get("DCGM_FI_DRIVER_VERSION") for g in gpus.values()), None)
    hello = {
        "type": "hello",
        "v": 1,
        "probe_version": __version__,
        "pid": None,
        "read_only": True,
        "reader": "prometheus",
        "capabilities": [],
        "host": {"hostname": name, "driver_version": driver},
        "error": None if records else {"code": "no-gpu", "message": f"no GPU series for {name}"},
        "feed": feed.feed,
    }
    sample = {
        "type": "sample",
        "v": 1,
        "seq": 0,
        "time": newest,
        "gpus": records,
        "processes": [],
        "processes_omitted": 0,
        "jobs": [],
        "jobs_omitted": 0,
        "host": None,
        "series": {"url": feed.url, "time": newest},
    }
    return hello, sample


def conflicts(name: str, gpus_by_index: dict[int, _Gpu]) -> str | None:
    """Words on the GPUs of a host whose exporters' series differ (None: none do), for its log."""
    gpus = [g for _, g in sorted(gpus_by_index.items()) if g.differ]
    if not gpus:
        return None
    said = [
        f"GPU {g.index} is in the series of {len(g.sources)} exporters"
        f" ({_sources_words(g.sources)}), which differ in"
        f" {listed(g.differ, 3)}"
        for g in gpus[:2]
    ]
    more = f"; so are {count(len(gpus) - 2, 'more GPU')}" if len(gpus) > 2 else ""
    return (
        f"{name}: {'; '.join(said)}{more}: shown unknown ({CONFLICT}) rather than one picked;"
        ' a selector keeps one: @prometheus:URL#{job="..."}'
    )


def _sources_words(sources: tuple[tuple[str, ...], ...], shown: int = 3) -> str:
    """`job="a" instance="x:9400"; job="b" instance="y:9400"`, the first `shown` and how many more."""
    said = [
        " ".join(f'{label}="{cut(value, 60)}"' for label, value in zip(SOURCE_LABELS, s, strict=True))
        for s in sources
    ]
    more = f" and {len(said) - shown} more" if len(said) > shown else ""
    return "; ".join(said[:shown]) + more


def gpus_of(points: list[Point]) -> dict[int, _Gpu]:
    """Each GPU of a host's points, its exporters' (SOURCE_LABELS) series made one (`_merged`)."""
    each: dict[int, dict[tuple[str, ...], _Gpu]] = {}
    for point in points:
        index = _index(point.labels.get("gpu"))
        if index is None:
            continue
        source = tuple(point.labels.get(label, "") for label in SOURCE_LABELS)
        gpu = each.setdefault(index, {}).setdefault(source, _Gpu(index))
        metric = point.labels.get("__name__", "")
        if metric in ("gputui_gpu_info", DCGM_KEY) or not gpu.labels:
            gpu.labels = point.labels
        key = metric
        if metric in ("gputui_gpu_error", "gputui_gpu_ecc_errors_total"):
            key = f"{metric}:{point.labels.get('code') or point.labels.get('type', '')}"
        gpu.values[key] = point.value
    return {index: _merged(index, sources) for index, sources in each.items()}


def _merged(index: int, sources: dict[tuple[str, ...], _Gpu]) -> _Gpu:
    """One GPU of several exporters' series (two jobs, two instances giving one host's GPU): a value
    they all give alike is read; one they give differently is unknown, and the GPU's error says
    CONFLICT. Which exporter is right cannot be told: a value picked would be a guess shown as fact."""
    ordered = [sources[key] for key in sorted(sources)]
    if len(ordered) == 1:
        return ordered[0]
    values: dict[str, float | None] = {}
    differ: list[str] = []
    for key in sorted({k for gpu in ordered for k in gpu.values}):
        given = {gpu.values[key] for gpu in ordered if key in gpu.values}
        if len(given) == 1:
            values[key] = given.pop()
        else:
            values[key] = None
            differ.append(key.removeprefix("DCGM_FI_DEV_"))
    labels = dict(ordered[0].labels)
    for label in ("UUID", "uuid"):
        if len({gpu.labels.get(label) for gpu in ordered}) > 1:
            differ.insert(0, label)
            labels.pop(label, None)
    return _Gpu(index, labels, values, tuple(differ), tuple(sorted(sources)))


def _index(text: str | None) -> int | None:
    """A GPU's `gpu` label as its index; None for one that is no index. ASCII digits only: `²` is a
    digit to str.isdigit that int() refuses (it raised, and the whole feed's round failed), `٣` one
    it reads as 3."""
    if text is None or not text.isascii() or not text.isdecimal() or len(text) > 4:
        return None
    return int(text)


def _int(value: float | None, scale: float = 1.0) -> int | None:
    """A series' value as a whole number in the wire's units; None (unknown) for none, a negative, or
    one past MAX_VALUE: 1e308 MiB is a finite float, but in bytes it is infinity (round() raises)."""
    if value is None or value < 0:
        return None
    scaled = value * scale
    return round(scaled) if scaled <= MAX_VALUE else None


def _gpu_record(gpu: _Gpu) -> dict[str, Any]:
    record = _gputui_gpu(gpu) if gpu.labels.get("__name__", "").startswith("gputui_") else _dcgm_gpu(gpu)
    if gpu.differ:
        record["error"] = CONFLICT
    return record


def _dcgm_gpu(gpu: _Gpu) -> dict[str, Any]:
    v, labels = gpu.values, gpu.labels
    used, free, reserved = v.get(DCGM_KEY), v.get("DCGM_FI_DEV_FB_FREE"), v.get("DCGM_FI_DEV_FB_RESERVED")
    total = None if used is None or free is None else used + free + (reserved or 0.0)
    xid = _int(v.get("DCGM_FI_DEV_XID_ERRORS"))
    record: dict[str, Any] = {
        "index": gpu.index,
        "uuid": labels.get("UUID"),
        "name": labels.get("modelName"),
        "pci_bus_id": labels.get("pci_bus_id"),
        "memory_total": _int(total, MIB),
        "memory_used": _int(used, MIB),
        "memory_reserved": _int(reserved, MIB),
        "memory_baseline": None,
        "util_gpu": _int(v.get("DCGM_FI_DEV_GPU_UTIL")),
        "util_mem": _int(v.get("DCGM_FI_DEV_MEM_COPY_UTIL")),
        "temperature": _int(v.get("DCGM_FI_DEV_GPU_TEMP")),
        "power_draw": v.get("DCGM_FI_DEV_POWER_USAGE"),
        "power_limit": None,
        "error": f"xid-{xid}" if xid else None,
        "accounting": None,
        "preflight": _ecc(v.get("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"), v.get("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")),
    }
    pod = "/".join(labels[k] for k in POD_LABELS if labels.get(k))
    if labels.get("pod"):
        record["pod"] = pod
    return record


def _gputui_gpu(gpu: _Gpu) -> dict[str, Any]:
    v, labels = gpu.values, gpu.labels
    errors = [k.partition(":")[2] for k, value in v.items() if k.startswith("gputui_gpu_error:") and value]
    util, copy = v.get("gputui_gpu_utilization_ratio"), v.get("gputui_gpu_memory_copy_utilization_ratio")
    return {
        "index": gpu.index,
        "uuid": labels.get("uuid"),
        "name": labels.get("name"),
        "pci_bus_id": labels.get("pci_bus_id"),
        "memory_total": _int(v.get("gputui_gpu_memory_total_bytes")),
        "memory_used": _int(v.get("gputui_gpu_memory_used_bytes")),
        "memory_baseline": _int(v.get("gputui_gpu_memory_baseline_bytes")),
        "util_gpu": _int(util, 100.0),
        "util_mem": _int(copy, 100.0),
        "temperature": _int(v.get("gputui_gpu_temperature_celsius")),
        "power_draw": v.get("gputui_gpu_power_watts"),
        "power_limit": v.get("gputui_gpu_power_limit_watts"),
        "error": min(errors) if errors else None,
        "accounting": None,
        "preflight": _ecc(
            v.get("gputui_gpu_ecc_errors_total:corrected"), v.get("gputui_gpu_ecc_errors_total:uncorrected")
        ),
    }


def _ecc(corrected: float | None, uncorrected: float | None) -> dict[str, Any] | None:
    if corrected is None and uncorrected is None:
        return None
    return {"ecc_corrected": _int(corrected), "ecc_uncorrected": _int(uncorrected)}


# --------------------------------------------------------------------------- the link


class PromLink:
    """One host of a feed, as the fleet reads any host (gputui/transport/base.py Link): read-only,
    no processes; a plan is refused, a `detail` not answered."""

    def __init__(self, spec: HostSpec, interval: float | None = None) -> None:
        assert spec.feed is not None
        self.name = spec.name
        self.feed = feed_of(spec.feed)
        self.interval = interval or 0.0
        self.hello: dict[str, Any] | None = None
        self.failure: TransportError | None = None
        self._queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._poller: Poller | None = None
        self._seq = 0
        self._first: tuple[dict[str, Any], ...] | None = None
        self._said: str | None = None  # the last problem said (once, until it changes)
        self._conflict: str | None = None  # the series' conflict said (once, until it changes)
        self._first_conflict: str | None = None

    async def open(self) -> None:
        poller = self._poller = poller_for(self.feed)
        if self.interval:
            poller.ask(self.interval)
        poller.attach(self)
        deadline = time.monotonic() + OPEN_TIMEOUT
        while self._first is None:
            left = deadline - time.monotonic()
            if left <= 0 or self.failure is not None:
                raise self.failure or TransportError("timeout", f"{self.feed.url}: {poller.problem}")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(poller.done.wait(), min(left, 1.0))
            if poller.done.is_set() and self._first is None and poller.round and poller.problem:
                raise TransportError("unreachable", poller.problem)
            if poller.done.is_set() and self._first is None:
                await asyncio.sleep(0.05)  # the round is over for everyone; the next one clears it
        hello, sample = self._first
        self.hello = hello
        self._queue.put_nowait(self._numbered(sample))
        self._say_conflict(self._first_conflict)

    def take(self, records: tuple[dict[str, Any], ...], conflict: str | None = None) -> None:
        """This round's hello and sample for the host, and what its exporters' series say
        differently (`conflicts`), said once until it changes."""
        self._said = None
        if self.hello is None:
            self._first, self._first_conflict = records, conflict
            return
        if self._queue.qsize() >= QUEUE:  # a reader that fell behind gets the newest
            with contextlib.suppress(asyncio.QueueEmpty):
                self._queue.get_nowait()
        self._queue.put_nowait(self._numbered(records[1]))
        self._say_conflict(conflict)

    def _say_conflict(self, conflict: str | None) -> None:
        if conflict != self._conflict:
            self._conflict = conflict
            if conflict is not None:
                self._queue.put_nowait({"type": "error", "v": 1, "code": CONFLICT, "message": conflict})

    def note(self, problem: str) -> None:
        """A round failed: said once to the fleet (an `error` record), until it changes."""
        if problem != self._said and self.hello is not None:
            self._said = problem
            self._queue.put_nowait({"type": "error", "v": 1, "code": "prometheus", "message": problem})

    def stop(self, newest: float, now: float) -> None:
        """The host's series stopped: the link fails."""
        since = f"its newest point is {now - newest:.0f} s old" if newest else "it has no point"
        self.failure = TransportError(
            "series-stopped", f"series stopped: {self.name} is no longer in {self.feed.url} ({since})"
        )
        self._queue.put_nowait(None)

    def _numbered(self, sample: dict[str, Any]) -> dict[str, Any]:
        self._seq += 1
        return {**sample, "seq": self._seq}

    async def recv(self) -> dict[str, Any] | None:
        record = await self._queue.get()
        if record is None:
            self._queue.put_nowait(None)  # every later recv() ends too
        return record

    async def send(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        interval = message.get("interval")
        if kind == "configure" and isinstance(interval, int | float) and self._poller is not None:
            self.interval = float(interval)
            self._poller.ask(self.interval)
        elif kind == "plan":
            self._queue.put_nowait(
                {
                    "type": "error",
                    "v": 1,
                    "code": "read-only",
                    "plan": message.get("id"),
                    "message": "a host read from Prometheus allows no action: open it over SSH",
                }
            )

    async def close(self) -> None:
        poller, self._poller = self._poller, None
        if poller is not None:
            await poller.detach(self)
        self._queue.put_nowait(None)

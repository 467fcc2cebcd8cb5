"""One host's session, its latest state and bounded history: what the UI and the CLI read of a host.

One asyncio task per host owns that host's link: it connects, reads records, notices a silent link,
and reconnects with exponential backoff and jitter. A slow or dead host only ever blocks its own task.
Plans are sent through the host's link; their events come back on the same stream and are routed to
whoever waits on that plan (gputui/fleet/fleet.py sends them and waits).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ..model import HOST_STATUSES, Event, HostFacts, Preflight, Sample, done_event
from ..model.textsafe import shortened
from ..probe.wire import MAX_PROCESSES
from ..transport.base import Link, TransportError
from .deltas import DELTAS_EVERY, DeltaError, SampleIntake
from .history import HostReadings, ProcHistories, Readings
from .idle import HostIdle
from .news import has_news

HISTORY = 300  # samples kept per GPU: sparklines show >= 120, the rest is headroom for wide panes
PROCS_KEPT = 16  # processes of one host whose history is kept (history.ProcHistories): 82 KB a host
SLOPE_SPAN = 30.0  # seconds of temperature readings a slope is taken over
BACKOFF_FIRST = 0.5
BACKOFF_CAP = 30.0
STALE_AFTER = 2.5  # intervals without a sample before a live host is called stale
DOWN_AFTER = 3.0  # intervals of silence after which the link is dropped and rebuilt
SECOND_LOOK = 0.25  # seconds: a link past its silence limit is looked at once more before it is silent
NOTES_PER_SECOND = 20  # error lines (and events of plans nobody waits for) passed on per host per
# second; the rest are counted and reported as one line: a flooding probe cannot grow the app
YIELD_EVERY = 32  # records read back to back before a host's task lets the others run
RECORDS_PER_SECOND = 200  # records one host may have decoded a second; past that its task waits
# (the link's buffers fill and the probe blocks on its writes): one host's volume cannot starve the
# loop. Samples (10 a second at most) stay far below it; a running plan's own events do not count.
BUSY_PER_SECOND = 0.05  # seconds of the loop one host's records may take a second (huge samples)
PLAN_EVENTS_MAX = 10_000  # events of one plan waiting for its reader; past that they are counted, not
# kept (a flooding probe), except `done`, which always gets through
PROBLEM_CHARS = 300  # the last problem a host reported, kept for its status line
# Seconds of silence a link whose source judges the host itself (a hub: `watch_status`) may keep
# before this session calls it dead: its source says stale or down, and its stream has its own limit.
RELAYED_SILENCE = 3600.0
# Seconds apart two readings' times may be and still be one reading: a hub's history gives its times
# to the millisecond, so a point seeded from it may be a sample the ring already holds, rounded.
SAME_READING = 0.001

CONNECTING, LIVE, STALE, DOWN = HOST_STATUSES

REASONS = {
    "unreachable": "unreachable",
    "auth-failed": "auth failed",
    "host-key-unknown": "host key unknown",
    "host-key-changed": "host key CHANGED",
    "no-python": "python3 missing",
    "probe-crashed": "probe crashed",
    "passphrase-needed": "key needs a passphrase (use ssh-agent)",
    "timeout": "no answer",
    "closed": "connection closed",
    "silent": "no data (link dead?)",
    "no-driver": "no NVIDIA driver",
    "no-gpu": "no GPU",
    "no-library": "pynvml missing",
    "no-permission": "no permission for NVML",
    "refused": "samples refused",
    "series-stopped": "series stopped",  # a host read from Prometheus (gputui/transport/prometheus.py)
}


class GpuHistory(Readings):
    """A GPU's recent readings, for the sparklines and graphs: utilization and memory in percent,
    temperature in °C and power in W (None where the driver gave none), each with its time. One row
    of ten bytes a sample (gputui/fleet/history.py): 3 KB a GPU, not the 48 of deques of floats."""

    __slots__ = ()

    def __init__(self, size: int = HISTORY) -> None:
        super().__init__(size)

    def temperature_slope(self, span: float = SLOPE_SPAN) -> float | None:
        """°C per minute over the last `span` seconds (a least-squares line, so one odd reading
        does not swing it); None with fewer than three readings or under a fifth of the span."""
        times = self.times
        if not times:
            return None
        since = times[-1] - span
        points = [
            (t, c) for t, c in zip(times, self.temperature, strict=True) if t >= since and c is not None
        ]
        if len(points) < 3 or points[-1][0] - points[0][0] < span / 5:
            return None
        mean_t = sum(t for t, _ in points) / len(points)
        mean_c = sum(c for _, c in points) / len(points)
        spread = sum((t - mean_t) ** 2 for t, _ in points)
        if spread <= 0:
            return None
        return 60.0 * sum((t - mean_t) * (c - mean_c) for t, c in points) / spread


@dataclass(eq=False)
class HostView:
    """Everything known about one host. Mutated only by its session task (on the event loop)."""

    name: str
    read_only: bool = False
    status: str = CONNECTING
    reason: str | None = None
    detail: str | None = None
    facts: HostFacts | None = None
    sample: Sample | None = None
    received: float = 0.0  # time.monotonic() of the last sample
    interval: float = 1.0
    history: dict[int, GpuHistory] = field(default_factory=dict)
    # The host's CPU and memory, each sample; and its processes' GPU memory, SM, CPU and RSS, for
    # the PROCS_KEPT that hold the most, while `keep_processes` (the fleet decides: Fleet.follow).
    host_history: HostReadings = field(default_factory=lambda: HostReadings(HISTORY))
    processes: ProcHistories = field(default_factory=lambda: ProcHistories(PROCS_KEPT, HISTORY))
    keep_processes: bool = True
    connects: int = 0
    raw_hello: dict[str, Any] | None = None  # the records as received: `gputui snapshot --json`
    raw_sample: Mapping[str, Any] | None = None
    # The latest preflight reading of each GPU: samples carry one only now and then.
    preflight: dict[int, Preflight] = field(default_factory=dict)
    # While not live, how far its link got (gputui/transport/dial.py): "queued" (for a handshake
    # slot), "connecting", "backing off" (with why and when the next try is); None once live.
    phase: str | None = None
    phase_detail: str | None = None
    # The processes that hold GPU memory at 0 % SM, and since when (gputui/fleet/idle.py): history that
    # no one sample carries. `group`: the host's group when its source names one (else by name).
    idle: HostIdle = field(default_factory=HostIdle)
    group: str | None = None
    # Why the host was last down (the code, and the failed attempt's own words), until it is live
    # again: between two attempts it is "connecting", and the fleet view keeps it among the hosts
    # down, with its words, rather than flicker.
    last_down: str | None = None
    last_detail: str | None = None
    # Whether the last sample said something the fleet's views draw that the one before did not
    # (gputui/fleet/news.py): a sample without news still feeds the history and the idle tracker.
    news: bool = True

    @property
    def age(self) -> float | None:
        return time.monotonic() - self.received if self.received else None

    @property
    def shown_status(self) -> str:
        """The status as people are shown it (the lists, the header, the filter, the exporter): a
        host that went down stays down while it tries again ("connecting" between two attempts,
        `phase` says how far), until it is live, rather than flicker between the two."""
        return DOWN if self.status == CONNECTING and self.last_down is not None else self.status

    @property
    def down_why(self) -> str | None:
        """Why the host is down, in words (REASONS), while it is down or trying again after it
        was; None when it is not down, or when no reason is known."""
        if self.shown_status != DOWN:
            return None
        code = self.reason or self.last_down
        return REASONS.get(code, code) if code and code != "down" else None

    @property
    def shown_detail(self) -> str | None:
        """The words of what is wrong, as people are shown them: while the host tries again after it
        went down, the words of the attempt that failed."""
        if self.detail:
            return self.detail
        return self.last_detail if self.shown_status == DOWN else None

    @property
    def can_kill(self) -> bool:
        return not self.read_only and self.facts is not None and not self.facts.read_only

    def record(self, sample: Sample) -> None:
        self.news = has_news(self.sample, sample, self.preflight)
        self.sample = sample
        self.received = time.monotonic()
        # The probe's clock: a slope is not bent by the link's jitter (or a replay's speed).
        stamp = sample.time if sample.time > 0 else time.time()
        self.idle.observe(sample, stamp, self.interval)
        self._record_load(sample, stamp)
        for gpu in sample.gpus:
            if gpu.preflight is not None:
                self.preflight[gpu.index] = gpu.preflight
            h = self.history.get(gpu.index)
            if h is None:
                h = self.history[gpu.index] = GpuHistory()
            frac = gpu.memory_fraction
            h.append(
                gpu.util_gpu or 0,
                100.0 * frac if frac is not None else 0.0,
                gpu.temperature,
                gpu.power_draw,
                stamp,
            )

    def seed(self, history: Any) -> None:
        """Readings its source kept before this viewer came (a hub's hello: `{index: {"util", "memory",
        "time"}}`), taken into the GPUs' rings where newer than what they hold; malformed parts skipped."""
        if not isinstance(history, dict):
            return
        for key, series in list(history.items())[:64]:
            index = int(key) if isinstance(key, str) and key.isdigit() else None
            if index is None or not isinstance(series, dict):
                continue
            ring = self.history.get(index)
            if ring is None:
                ring = self.history[index] = GpuHistory()
            last = ring.times[-1] if ring.times else float("-inf")
            for util, memory, stamp in _points(series)[-HISTORY:]:
                if stamp > last + SAME_READING:
                    ring.append(util, memory, None, None, stamp)
                    last = stamp

    def _record_load(self, sample: Sample, stamp: float) -> None:
        """The host's CPU and memory, and (when kept) its processes' readings, into their rings."""
        metrics = sample.host
        if metrics is not None:
            total, used = metrics.memory_total, metrics.memory_used
            memory = 100.0 * used / total if used is not None and total else None
            self.host_history.append(metrics.cpu_percent, memory, stamp)
        if self.keep_processes:
            self.processes.observe(
                (
                    (p.key, p.gpu_bytes if p.gpu_memory else None, p.sm_util(), p.cpu_percent, p.rss)
                    for p in sample.processes
                ),
                stamp,
            )


# What the fleet tells its listeners, one class per kind of change: a listener dispatches on the class
# (match or isinstance), so a misspelt kind is a type error, not a branch that never runs. Frozen and
# slotted: one is made per sample, thousands a second at a thousand hosts.


@dataclass(frozen=True, slots=True)
class HostEvent:
    """What every fleet event carries: the host it is of, as the fleet holds it."""

    view: HostView


@dataclass(frozen=True, slots=True)
class StatusChanged(HostEvent):
    """The host's status, reason, detail or connection phase changed: read them on `view`."""


@dataclass(frozen=True, slots=True)
class HelloArrived(HostEvent):
    """The host's probe said hello: what it runs on, and what it can do."""

    facts: HostFacts


@dataclass(frozen=True, slots=True)
class SampleArrived(HostEvent):
    """A sample was taken and recorded on `view` (its history, idle tracker and `news` updated).
    `record`: the wire record it came as (whole, or a delta merged into the last sample), where the
    host's `raw_sample` is exactly that record applied onto the last one (gputui/probe/delta.py
    `apply`); None where it is not (a sample taken the general way, cut to the app's bounds). A
    relay passes the record on (the hub's stream), else the whole sample."""

    sample: Sample
    record: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class EventArrived(HostEvent):
    """An event of a plan: one the fleet waits for, or (rate-limited) one of no plan it knows."""

    event: Event


@dataclass(frozen=True, slots=True)
class ErrorArrived(HostEvent):
    """An error the probe sent (the record as it came, untrusted), or one the session says of the
    probe's records (code "flood": lines dropped; "bad-delta": a sample refused). Rate-limited."""

    record: dict[str, Any]


FleetEvent: TypeAlias = StatusChanged | HelloArrived | SampleArrived | EventArrived | ErrorArrived
Listener: TypeAlias = Callable[[FleetEvent], None]


class HostSession:
    def __init__(self, view: HostView, make_link: Callable[[], Link], notify: Listener) -> None:
        self.view = view
        self.make_link = make_link
        self.notify = notify
        self.link: Link | None = None
        self.waiters: dict[str, asyncio.Queue[Event | None]] = {}
        self.task: asyncio.Task[None] | None = None
        self.hello = asyncio.Event()
        self.first_sample = asyncio.Event()
        self.full_scan_waiters: list[asyncio.Future[Sample]] = []
        self.detail_waiters: dict[str, asyncio.Future[dict[str, Any] | None]] = {}
        self.opened = 0.0  # time.monotonic() when the current link came up
        self.heard = 0.0  # time.monotonic() of the link's last record (or of the last silence noted)
        self.acted = 0.0  # time.monotonic() when the last plan or reset began or ended
        self.last_problem: str | None = None  # the last error the probe (or its link) reported
        self._window = 0.0  # start of the current second of notes
        self._notes = 0  # notes passed on in it
        self._dropped = 0  # and dropped
        # Samples as this link sends them, deltas merged (gputui/fleet/deltas.py); a refused delta asks
        # the probe for a whole sample, at most once an interval.
        self.intake = SampleIntake()
        self._want_whole = False
        self._whole_asked = 0.0
        # The interval the fleet asked for since the link was made (Fleet.configure: the app's
        # `--interval`, or its pacing): a link made again asks its new probe for it too.
        self.asked: float | None = None
        # What wakes the stream (`_stream`): the reader ending, or the link silent for its limit.
        self._alarm: asyncio.Future[None] | None = None
        self._reader: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._looked_again = False  # past the silence limit once: the next look decides
        self._relayed = False  # the link's source says when the host is stale (`_relay`)

    def _set(self, status: str, reason: str | None = None, detail: str | None = None) -> None:
        v = self.view
        if status == DOWN:
            v.last_down, v.last_detail = reason or "down", detail
        elif status == LIVE:
            v.last_down = v.last_detail = None
        if (v.status, v.reason, v.detail) != (status, reason, detail):
            v.status, v.reason, v.detail = status, reason, detail
            self.notify(StatusChanged(v))

    def _phase(self, phase: str | None, detail: str | None = None) -> None:
        v = self.view
        if (v.phase, v.phase_detail) != (phase, detail):
            v.phase, v.phase_detail = phase, detail
            self.notify(StatusChanged(v))

    async def run(self) -> None:
        backoff = BACKOFF_FIRST
        while True:
            self._phase(None)
            self._set(CONNECTING, None, None)
            link = self.make_link()
            watch = getattr(link, "watch_phase", None)  # links that connect in steps say how far
            if callable(watch):
                watch(self._phase)
            relay = getattr(link, "watch_status", None)  # links whose source judges the host say so
            self._relayed = callable(relay)
            if callable(relay):
                relay(self._relay)
            try:
                await link.open()
                self._phase(None)
                self.link = link
                self.intake, self._want_whole = SampleIntake(), False
                self.view.connects += 1
                backoff = BACKOFF_FIRST
                if link.hello is not None:
                    self._dispatch(link.hello)
                    await self._configure_link(link)
                await self._stream(link)
                if link.failure is not None:
                    raise link.failure
                self._set(DOWN, "closed", "the probe ended the stream")
            except TransportError as exc:
                self._set(DOWN, exc.reason, exc.message)
            except asyncio.CancelledError:
                await self._drop(link)
                raise
            except Exception as exc:  # a bug must not kill the other hosts' sessions
                self._set(DOWN, "probe-crashed", f"{type(exc).__name__}: {exc}")
            await self._drop(link)
            # Full jitter: many hosts that failed together do not retry together.
            delay = random.uniform(backoff / 2, backoff)
            why = REASONS.get(self.view.reason or "", self.view.reason or "down")
            self._phase("backing off", f"{why}; next try in {delay:.1f} s")
            await asyncio.sleep(delay)
            backoff = min(BACKOFF_CAP, backoff * 2)

    async def _drop(self, link: Link) -> None:
        self.link = None
        self.hello.clear()
        for q in self.waiters.values():
            q.put_nowait(None)  # the plan's outcome is unknown: its waiter says so
        for future in self.detail_waiters.values():
            if not future.done():
                future.set_result(None)
        with contextlib.suppress(Exception):
            await link.close()

    async def _stream(self, link: Link) -> None:
        """Read the link until it ends, watching for silence.

        One task (`_read`) receives and takes the records, one receive at a time (a timeout never
        cuts a line in half); this one only wakes when that task ends or the link has been silent
        for its limit (`_alarm`, rung by `_look_for_silence`). A record costs no timer and no task
        of its own, and a limit one timer (a thousand hosts a second; an asyncio.wait
        each limit was some twenty objects a host, always young, for every collection to walk). A
        plain future is awaited: cancelling this task (the fleet stopping) cancels it, nothing
        swallows that."""
        self.opened = self.heard = time.monotonic()
        loop = asyncio.get_running_loop()
        reader = self._reader = asyncio.ensure_future(self._read(link))
        reader.add_done_callback(self._ring)
        try:
            while True:
                alarm = self._alarm = loop.create_future()
                self._look_for_silence()
                await alarm
                if reader.done():
                    reader.result()  # what broke the reader (a bug) ends the link
                    return
                self.heard = time.monotonic()  # the next limit runs from here
                if self.view.status == LIVE and not self.waiters:
                    self._set(STALE, "silent", f"no sample for {self._silence_limit():.1f} s")
                    continue
                if self.waiters:
                    continue  # a reset, or a plan's long scan, holds samples back; its events will come
                raise TransportError("silent", "no data from the probe")
        finally:
            self._alarm = self._reader = None
            self._looked_again = False
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if not reader.done():
                reader.cancel()  # the link is closed next (_drop), which ends it for good

    def _silence_limit(self) -> float:
        """Seconds without a record after which a live host is stale (and a stale one's link dropped)."""
        if self._relayed:
            return RELAYED_SILENCE
        return max(1.0, self.view.interval * (STALE_AFTER if self.view.status == LIVE else DOWN_AFTER))

    def _look_for_silence(self) -> None:
        """Ring the stream's alarm if nothing came for the silence limit, and still nothing a moment
        later; else look again when it would be up (records that came meanwhile moved `heard` on).

        The second look is for the app's own lag: after a stall (a busy loop, 4,096 hosts connecting
        on two cores) this timer can run before the host's bytes, already there, are handed to the
        reader; they are taken in the next turns of the loop, before the second look."""
        self._timer = None
        alarm = self._alarm
        if alarm is None or alarm.done():
            return
        left = self.heard + self._silence_limit() - time.monotonic()
        if left <= 0 and not self._looked_again:
            self._looked_again, left = True, SECOND_LOOK
        elif left > 0:
            self._looked_again = False
        if left > 0:
            self._timer = asyncio.get_running_loop().call_later(left, self._look_for_silence)
        else:
            self._looked_again = False
            alarm.set_result(None)

    def _ring(self, reader: asyncio.Future[None]) -> None:
        """A reader ended: wake its stream (not the next link's, if it ended late)."""
        alarm = self._alarm
        if reader is self._reader and alarm is not None and not alarm.done():
            alarm.set_result(None)

    async def _read(self, link: Link) -> None:
        """Take the link's records until it ends, each host within its share of the loop."""
        read = 0
        window, in_window, busy = time.monotonic(), 0, 0.0
        while True:
            record = await link.recv()
            if record is None:
                return
            self.heard = time.monotonic()
            began = time.perf_counter()
            awaited = self._dispatch(record)
            # Not kept while the next one is awaited: a whole sample decoded is a hundred objects,
            # a second in this frame for the garbage collector to walk, at every host.
            del record
            self._check_samples()
            if self._want_whole:
                await self._ask_whole()
            busy += time.perf_counter() - began
            read += 1
            # A running plan's own events are never held back: the probe would block on its
            # writes between two signals. Everything else counts against the host's share.
            in_window += 0 if awaited else 1
            if in_window >= RECORDS_PER_SECOND or (busy >= BUSY_PER_SECOND and not awaited):
                # A flood: this host has had its share of the loop for this second.
                now = time.monotonic()
                if now - window < 1.0:
                    await asyncio.sleep(1.0 - (now - window))
                window, in_window, busy = time.monotonic(), 0, 0.0
                self.heard = time.monotonic()  # held back by us, not silent
            elif read % YIELD_EVERY == 0:
                # A probe that floods the link keeps recv() ready: let the other hosts (and the
                # UI) have the loop too.
                await asyncio.sleep(0)
            if time.monotonic() - window >= 1.0:
                window, in_window, busy = time.monotonic(), 0, 0.0

    def _check_samples(self) -> None:
        """A host that keeps talking but whose samples are all refused (too long, malformed) is not
        live: its data would be frozen. The time since the last *usable* sample decides."""
        v = self.view
        if self.waiters or v.status not in (LIVE, CONNECTING) or v.facts is None:
            return
        since = time.monotonic() - max(v.received, self.opened)
        limit = max(v.interval * STALE_AFTER, 1.0)
        if since > limit:
            why = f": {self.last_problem}" if self.last_problem else ""
            self._set(STALE, "refused", f"no usable sample for {since:.1f} s{why}")

    def _relay(self, status: str, reason: str | None, detail: str | None) -> None:
        """The link's source says the host is stale (with its reason), or live again."""
        if status == STALE:
            self._set(STALE, reason or "silent", detail)
        elif status == LIVE and self.view.status == STALE:
            self._set(LIVE)

    def _note(self) -> bool:
        """Whether one more error line (or stray event) may be passed on in this second."""
        now = time.monotonic()
        if now - self._window >= 1.0:
            if self._dropped:
                message = f"{self._dropped} more lines from the probe dropped (more than {NOTES_PER_SECOND} a second)"
                self.notify(ErrorArrived(self.view, {"type": "error", "code": "flood", "message": message}))
            self._window, self._notes, self._dropped = now, 0, 0
        self._notes += 1
        if self._notes > NOTES_PER_SECOND:
            self._dropped += 1
            return False
        return True

    def _dispatch(self, record: dict[str, Any]) -> bool:
        """Take one record; whether it belonged to a plan someone waits for."""
        kind = record.get("type")
        v = self.view
        awaited = False
        if kind == "hello":
            if "history" in record:  # a hub's readings from before this link: into the rings
                record = dict(record)
                v.seed(record.pop("history"))
            v.facts = HostFacts.from_hello(record)
            v.raw_hello = record
            self.hello.set()
            self.notify(HelloArrived(v, v.facts))
            if v.facts.error_code:
                self.notify(StatusChanged(v))
        elif kind == "sample":
            try:
                sample = self.intake.take(record)
            except DeltaError as exc:
                self._refused(str(exc))
                return awaited
            self._want_whole = False
            v.record(sample)
            # The record as the probe would have sent it whole, made only when asked (deltas.py).
            v.raw_sample = self.intake.raw if self.intake.keyed else _bounded(self.intake.plain or record)
            self._set(LIVE, None, None)
            self.first_sample.set()
            if sample.full_scan and self.full_scan_waiters:
                waiters, self.full_scan_waiters = self.full_scan_waiters, []
                for future in waiters:
                    if not future.done():
                        future.set_result(sample)
            self.notify(SampleArrived(v, sample, record if self.intake.keyed else None))
        elif kind == "event":
            event = Event.from_wire(record)
            q = self.waiters.get(event.plan)
            if q is not None:
                awaited = True
                if q.qsize() < PLAN_EVENTS_MAX or event.stage == "done":
                    q.put_nowait(event)
                    self.notify(EventArrived(v, event))
            elif self._note():  # an event of no plan we wait for: informative, rate-limited
                self.notify(EventArrived(v, event))
        elif kind == "detail":
            rid = record.get("id")
            asked = self.detail_waiters.get(rid) if isinstance(rid, str) else None
            awaited = asked is not None
            if asked is not None and not asked.done():
                asked.set_result(record)
        elif kind == "error":
            plan = record.get("plan")
            q = self.waiters.get(plan) if isinstance(plan, str) else None
            if q is not None and isinstance(plan, str):
                code = record.get("code") if isinstance(record.get("code"), str) else "error"
                message = record.get("message") if isinstance(record.get("message"), str) else code
                q.put_nowait(done_event(plan, "refused", str(message), error=str(code)))
            message = record.get("message")
            if isinstance(message, str):
                self.last_problem = shortened(message, PROBLEM_CHARS)
            awaited = q is not None
            if q is not None or self._note():
                self.notify(ErrorArrived(v, record))
        return awaited

    async def _configure_link(self, link: Link) -> None:
        """Ask a new link's probe for delta samples where it can (its hello says `delta`;
        docs/PROTOCOL.md), and for the interval the fleet asked for since the link was made."""
        message: dict[str, Any] = {"type": "configure", "v": 1}
        capabilities = link.hello.get("capabilities") if link.hello is not None else None
        if isinstance(capabilities, list) and "delta" in capabilities:
            message["deltas"] = DELTAS_EVERY
        if self.asked is not None:
            message["interval"] = self.asked
        if len(message) > 2:
            with contextlib.suppress(TransportError):
                await link.send(message)

    def _refused(self, why: str) -> None:
        """A delta that cannot be merged: refused like any bad record (said, rate-limited), and the
        probe asked for a whole sample; the host keeps its last sample until one comes."""
        message = f"sample refused: {why}"
        self.last_problem = shortened(message, PROBLEM_CHARS)
        self._want_whole = True
        if self._note():
            self.notify(ErrorArrived(self.view, {"type": "error", "code": "bad-delta", "message": message}))

    async def _ask_whole(self) -> None:
        now = time.monotonic()
        if now - self._whole_asked < max(self.view.interval, 1.0):
            return
        self._whole_asked = now
        with contextlib.suppress(TransportError):
            await self.send({"type": "sample", "v": 1, "whole": True})

    async def send(self, message: dict[str, Any]) -> None:
        if self.link is None:
            raise TransportError("closed", f"{self.view.name} is not connected")
        await self.link.send(message)


def _points(series: dict[str, Any]) -> list[tuple[float, float, float]]:
    """(util, memory, time) of a seeded GPU's readings, those whose three values are numbers."""
    util, memory, times = (series.get(k) for k in ("util", "memory", "time"))
    if not (isinstance(util, list) and isinstance(memory, list) and isinstance(times, list)):
        return []
    numbers = (int, float)
    return [
        (float(u), float(m), float(t))
        for u, m, t in zip(util, memory, times, strict=False)
        if all(isinstance(x, numbers) and not isinstance(x, bool) and math.isfinite(x) for x in (u, m, t))
    ]


def _bounded(record: dict[str, Any]) -> dict[str, Any]:
    """A sample as received, for `snapshot --json`, with no more process records than the app parses
    (a probe that sends more is refused the rest; their memory is not kept either)."""
    processes = record.get("processes")
    if isinstance(processes, list) and len(processes) > MAX_PROCESSES:
        return {**record, "processes": processes[:MAX_PROCESSES]}
    return record

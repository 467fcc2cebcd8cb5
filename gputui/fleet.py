"""Per-host sessions, latest state and bounded history: what the UI and the CLI read.

One asyncio task per host owns that host's link: it connects, reads records, notices a silent link,
and reconnects with exponential backoff and jitter. A slow or dead host only ever blocks its own task.
Plans are sent through the host's link; their events come back on the same stream and are routed to
whoever waits on that plan. A link that breaks under a running plan ends it with "outcome unknown".
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from .model import Event, HostFacts, Sample
from .transport.base import Link, TransportError

HISTORY = 300  # samples kept per GPU: sparklines show >= 120, the rest is headroom for wide panes
BACKOFF_FIRST = 0.5
BACKOFF_CAP = 30.0
STALE_AFTER = 2.5  # intervals without a sample before a live host is called stale
DOWN_AFTER = 3.0  # intervals of silence after which the link is dropped and rebuilt

CONNECTING, LIVE, STALE, DOWN = "connecting", "live", "stale", "down"

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
}


@dataclass
class GpuHistory:
    util: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))
    memory: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))


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
    connects: int = 0
    raw_hello: dict[str, Any] | None = None  # the records as received: `gputui snapshot --json`
    raw_sample: dict[str, Any] | None = None

    @property
    def age(self) -> float | None:
        return time.monotonic() - self.received if self.received else None

    @property
    def can_kill(self) -> bool:
        return not self.read_only and self.facts is not None and not self.facts.read_only

    def record(self, sample: Sample) -> None:
        self.sample = sample
        self.received = time.monotonic()
        for gpu in sample.gpus:
            h = self.history.get(gpu.index)
            if h is None:
                h = self.history[gpu.index] = GpuHistory()
            h.util.append(float(gpu.util_gpu or 0))
            frac = gpu.memory_fraction
            h.memory.append(100.0 * frac if frac is not None else 0.0)


Listener = Callable[[HostView, str, Any], None]


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

    def _set(self, status: str, reason: str | None = None, detail: str | None = None) -> None:
        v = self.view
        if (v.status, v.reason, v.detail) != (status, reason, detail):
            v.status, v.reason, v.detail = status, reason, detail
            self.notify(v, "status", None)

    async def run(self) -> None:
        backoff = BACKOFF_FIRST
        while True:
            self._set(CONNECTING, None, None)
            link = self.make_link()
            try:
                await link.open()
                self.link = link
                self.view.connects += 1
                backoff = BACKOFF_FIRST
                if link.hello is not None:
                    self._dispatch(link.hello)
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
            await asyncio.sleep(random.uniform(backoff / 2, backoff))
            backoff = min(BACKOFF_CAP, backoff * 2)

    async def _drop(self, link: Link) -> None:
        self.link = None
        self.hello.clear()
        for q in self.waiters.values():
            q.put_nowait(None)  # the plan's outcome is unknown: its waiter says so
        with contextlib.suppress(Exception):
            await link.close()

    async def _stream(self, link: Link) -> None:
        while True:
            timeout = self.view.interval * (STALE_AFTER if self.view.status == LIVE else DOWN_AFTER)
            try:
                record = await asyncio.wait_for(link.recv(), timeout=max(timeout, 1.0))
            except asyncio.TimeoutError:
                if self.view.status == LIVE and not self.waiters:
                    self._set(STALE, "silent", f"no sample for {timeout:.1f} s")
                    continue
                if self.waiters:
                    continue  # a plan pauses sampling; its events will come
                raise TransportError("silent", "no data from the probe") from None
            if record is None:
                return
            self._dispatch(record)

    def _dispatch(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        v = self.view
        if kind == "hello":
            v.facts = HostFacts.from_hello(record)
            v.raw_hello = record
            self.hello.set()
            self.notify(v, "hello", v.facts)
            if v.facts.error_code:
                self.notify(v, "status", None)
        elif kind == "sample":
            v.record(Sample.from_wire(record))
            v.raw_sample = record
            self._set(LIVE, None, None)
            self.first_sample.set()
            self.notify(v, "sample", v.sample)
        elif kind == "event":
            event = Event.from_wire(record)
            q = self.waiters.get(event.plan)
            if q is not None:
                q.put_nowait(event)
            self.notify(v, "event", event)
        elif kind == "error":
            plan = record.get("plan")
            q = self.waiters.get(plan) if isinstance(plan, str) else None
            if q is not None:
                q.put_nowait(_error_event(plan, record))
            self.notify(v, "error", record)

    async def send(self, message: dict[str, Any]) -> None:
        if self.link is None:
            raise TransportError("closed", f"{self.view.name} is not connected")
        await self.link.send(message)


def _error_event(plan: str, record: dict[str, Any]) -> Event:
    return Event(
        plan=plan,
        time=time.time(),
        stage="done",
        result="refused",
        message=str(record.get("message") or record.get("code")),
        data={"clean": False, "error": record.get("code")},
    )


class Fleet:
    """All host sessions. `listen` callbacks run on the event loop, after each change."""

    def __init__(self) -> None:
        self.sessions: dict[str, HostSession] = {}
        self.listeners: list[Listener] = []

    def add(
        self, name: str, make_link: Callable[[], Link], read_only: bool = False, interval: float = 1.0
    ) -> HostView:
        view = HostView(name=name, read_only=read_only, interval=interval)
        self.sessions[name] = HostSession(view, make_link, self._notify)
        return view

    @property
    def hosts(self) -> list[HostView]:
        return [s.view for s in self.sessions.values()]

    def view(self, name: str) -> HostView:
        return self.sessions[name].view

    def listen(self, listener: Listener) -> None:
        self.listeners.append(listener)

    def _notify(self, view: HostView, what: str, payload: Any) -> None:
        for listener in self.listeners:
            listener(view, what, payload)

    def start(self) -> None:
        for s in self.sessions.values():
            if s.task is None:
                s.task = asyncio.create_task(s.run(), name=f"host-{s.view.name}")

    async def stop(self) -> None:
        pending = {s.task for s in self.sessions.values() if s.task is not None}
        while pending:
            # Cancel again until each task has ended: on Python 3.10/3.11 `wait_for` can swallow a
            # cancellation that lands just as its inner await completes.
            for t in pending:
                t.cancel()
            _, pending = await asyncio.wait(pending, timeout=0.5)
        for s in self.sessions.values():
            s.task = None

    async def wait_first_samples(self, timeout: float) -> None:
        """Until every host has sent a sample or is down; at most `timeout` seconds."""

        async def one(s: HostSession) -> None:
            while not s.first_sample.is_set() and s.view.status != DOWN:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(s.first_sample.wait(), 0.05)

        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(one(s) for s in self.sessions.values())), timeout)

    async def configure(self, interval: float) -> None:
        for s in self.sessions.values():
            s.view.interval = interval
            if s.link is not None:
                with contextlib.suppress(TransportError):
                    await s.send({"type": "configure", "v": 1, "interval": interval})

    async def execute(self, host: str, plan: dict[str, Any]) -> AsyncIterator[Event]:
        """Send a plan to `host`'s probe and yield its events until `done`.

        If the link breaks first, yields a synthetic `done` event with result "outcome-unknown"."""
        session = self.sessions[host]
        plan = dict(plan, type="plan", v=1)
        plan.setdefault("id", uuid.uuid4().hex[:12])
        q: asyncio.Queue[Event | None] = asyncio.Queue()
        session.waiters[plan["id"]] = q
        try:
            await session.send(plan)
            while True:
                event = await q.get()
                if event is None:
                    yield Event(
                        plan=plan["id"],
                        time=time.time(),
                        stage="done",
                        result="outcome-unknown",
                        message=f"connection to {host} lost during the action: outcome unknown",
                        data={"clean": False},
                    )
                    return
                yield event
                if event.stage == "done":
                    return
        finally:
            session.waiters.pop(plan["id"], None)

"""The hub's fan-out: the fleet's changes as server-sent-event frames, made once, read by every client.

One `Hub` listens to the fleet (on its loop). Each change becomes one frame, bytes made once:
- a host's sample: the record the probe sent (a delta as a delta), passed on where every client can
  apply it, else the whole sample as the fleet holds it (`HostFeed`);
- a hello, a plan's event, a change of a host's status;
- the fleet's problems, worked out at most once a second and sent only when they changed.
Frames go into one shared log (`Log`): a bounded window of the latest frames, by count and bytes.
Each client is a cursor into it, woken once a tick (FLUSH_EVERY) to write what came meanwhile; a
client whose cursor fell out of the window (it read too slowly) gets `reset` and the whole state again. A client's own memory is its socket's buffer and the write
it waits on: the state is written in chunks, each awaited, so a reader that stops holds one chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..fleet import session
from ..fleet.deltas import RawSample
from ..fleet.fleet import Fleet
from ..fleet.session import FleetEvent, HostView
from ..model.decode import plain
from ..probe.wire import dumps
from ..views.problems import FleetProblems
from ..views.report import as_json
from .frames import (
    PING,
    RESET,
    frame,
    host_frame,
    host_record,
    hub_record,
    json_frame,
    problems_record,
    to_json,
)

LOG_FRAMES = 65_536  # frames the log keeps for clients that lag
LOG_BYTES = 16 << 20  # and bytes: what a burst may hold, however many clients read it
CHUNK = 256 << 10  # bytes written to a client before its write is awaited
PING_EVERY = 15.0  # seconds of quiet before a `: ping` comment (proxies close idle streams)
# Seconds the frames of a moment are gathered before the clients are woken to write them: at a
# thousand hosts a frame comes every millisecond, and a client woken for each wrote one at a time
# (a wake, a write and a syscall each, times every client). Joins wait for the same tick, so the
# clients that join (or are reset) together share one making of the whole state.
FLUSH_EVERY = 0.05
PROBLEMS_EVERY = 1.0  # seconds between two workings-out of the fleet's problems


class HostFeed:
    """One host's frames: its samples as the probe sent them, and what a joining client needs (made
    when first asked after a change, then shared).

    A sample's frame is the record the fleet took, passed on as it came (a delta stays a delta),
    when the clients that read every frame hold exactly what it follows: the fleet's intake merges a
    delta as `apply` does, so they hold what the hub holds. Otherwise (the first sample the hub
    sees, one the intake took the general way, a delta that follows another sample than the last
    one sent) the frame is the whole sample as the fleet holds it. A delta the intake refused never
    comes here; the one it takes next follows the last one sent, or the frame is whole."""

    def __init__(self, view: HostView) -> None:
        self.view = view
        self.seq: Any = None  # the seq of the sample the clients hold after the log's frames (None: none)
        self.status: dict[str, Any] | None = None  # the last `host` record sent (without history)
        self._joined: list[bytes] | None = None  # host, hello and whole sample frames for a join
        self.version = 0  # moves on at every change of the host (what /metrics keeps its text by)
        self.wholes = 0  # sample frames sent whole (for tests and the bench)

    def sample_frame(self, record: Mapping[str, Any] | None = None) -> bytes | None:
        """The frame of the host's new sample: `record` (the wire record the fleet took, whole or a
        delta) where the clients can apply it, else the whole sample; None: no sample held."""
        raw = self.view.raw_sample
        if raw is None:
            return None
        self._joined = None
        self.version += 1
        if record is None or not self._follows(record):
            record = _whole(raw)
            self.wholes += 1
        self.seq = raw.get("seq")
        return host_frame(self.view.name, dumps(record).encode("ascii"), "sample")

    def _follows(self, record: Mapping[str, Any]) -> bool:
        """Whether `record` is whole, or a delta of the sample the clients hold (delta.read's test)."""
        if "delta" not in record:
            return True
        follows = record["delta"]
        return type(follows) is int and self.seq is not None and follows == self.seq

    def hello_frame(self) -> bytes | None:
        self._joined = None
        self.version += 1
        self.seq = None  # a new link: its first sample goes whole, whatever it is
        hello = self.view.raw_hello
        return host_frame(self.view.name, to_json(hello).encode("ascii"), "hello") if hello else None

    def status_frame(self, group: str) -> bytes | None:
        """The host's `host` frame when its state changed since the last one sent, else None."""
        record = host_record(self.view, group, with_history=False)
        if record == self.status:
            return None
        self.status = record
        self._joined = None
        self.version += 1
        return json_frame("host", [self.view.name, record])

    def joined(self, group: str) -> list[bytes]:
        """What a joining client is sent of this host: its state with history, hello, whole sample
        (the fleet's, deltas merged: made here, once a change, only when someone joins)."""
        if self._joined is None:
            record = host_record(self.view, group, with_history=True)
            frames = [json_frame("host", [self.view.name, record])]
            if self.view.raw_hello:
                frames.append(host_frame(self.view.name, to_json(self.view.raw_hello).encode(), "hello"))
            raw = self.view.raw_sample
            if raw is not None:
                frames.append(host_frame(self.view.name, dumps(_whole(raw)).encode("ascii"), "sample"))
            self._joined = frames
        return self._joined


class Log:
    """The latest frames, numbered: frame `n` is at `n - first` while it is kept."""

    def __init__(self, frames: int = LOG_FRAMES, size: int = LOG_BYTES) -> None:
        self.frames: deque[bytes] = deque()
        self.first = 0
        self.bytes = 0
        self.max_frames = frames
        self.max_bytes = size

    @property
    def end(self) -> int:
        return self.first + len(self.frames)

    def append(self, data: bytes) -> None:
        self.frames.append(data)
        self.bytes += len(data)
        while self.frames and (len(self.frames) > self.max_frames or self.bytes > self.max_bytes):
            self.bytes -= len(self.frames.popleft())
            self.first += 1

    def since(self, cursor: int, limit: int = CHUNK) -> tuple[bytes, int]:
        """Frames from `cursor` (kept ones: cursor >= first), joined up to about `limit` bytes, and
        the cursor after them."""
        out: list[bytes] = []
        size = 0
        at = cursor - self.first
        while at < len(self.frames) and size < limit:
            data = self.frames[at]
            out.append(data)
            size += len(data)
            at += 1
        return b"".join(out), at + self.first


Write = Callable[[bytes], Any]  # awaitable: a client's write, which waits while its buffer is full


class Hub:
    """The fleet's frames for any number of clients. Made and used on the fleet's loop."""

    def __init__(self, fleet: Fleet, interval: float, idle_after: float, log: Log | None = None) -> None:
        self.fleet = fleet
        self.interval = interval
        self.idle_after = idle_after
        self.log = log or Log()
        self.feeds: dict[str, HostFeed] = {view.name: HostFeed(view) for view in fleet.hosts}
        self.problems = FleetProblems()
        self.touched: dict[str, HostView] = {view.name: view for view in fleet.hosts}
        self.problems_frame = json_frame("problems", [])
        self._problems_json = "[]"
        self._waiting: set[asyncio.Future[bool]] = set()  # clients waiting for frames (or a ping)
        self._flush: asyncio.TimerHandle | None = None  # the tick that wakes them, once scheduled
        self._task: asyncio.Task[None] | None = None
        self.clients = 0
        self.transports: set[asyncio.WriteTransport] = set()
        self.resets = 0  # clients sent back to a whole state (for the logs and tests)
        self.order = {name: i for i, name in enumerate(self.feeds)}

    # -- the fleet's side ------------------------------------------------------------------------

    def start(self) -> None:
        self.fleet.listen(self.on_fleet)
        self.problems.update([], self.fleet.hosts, self.idle_after)  # the groups, for the first frames
        for feed in self.feeds.values():
            feed.status_frame(self.problems.group(feed.view.name))
        self._task = asyncio.ensure_future(self._problems_loop())

    async def stop(self) -> None:
        self.fleet.unlisten(self.on_fleet)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        self._wake(True)

    def on_fleet(self, event: FleetEvent) -> None:
        feed = self.feeds.get(event.view.name)
        if feed is None:
            return
        match event:
            case session.SampleArrived():
                data = feed.sample_frame(event.record)
                self.touched[feed.view.name] = feed.view
            case session.HelloArrived():
                data = feed.hello_frame()
                self.touched[feed.view.name] = feed.view
            case session.StatusChanged():
                data = feed.status_frame(self.problems.group(feed.view.name))
                self.touched[feed.view.name] = feed.view
            case session.EventArrived():
                record = {"type": "event", "v": 1, **plain(event.event)}
                data = host_frame(feed.view.name, to_json(record).encode("ascii"), "event")
            case _:
                return  # ErrorArrived: the probe's complaints are the host's status and problems, not frames
        if data is not None:
            self.publish(data)

    def publish(self, data: bytes) -> None:
        """One frame for every client: into the log; the waiting clients are woken at the next tick."""
        self.log.append(data)
        self._tick()

    def _tick(self) -> None:
        """Wake the waiting clients within FLUSH_EVERY (one timer, whatever the frames meanwhile)."""
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(FLUSH_EVERY, self._flushed)

    def _flushed(self) -> None:
        self._flush = None
        self._wake(True)

    def _wake(self, frames: bool) -> None:
        waiting, self._waiting = self._waiting, set()
        for future in waiting:
            if not future.done():
                future.set_result(frames)

    async def _problems_loop(self) -> None:
        while True:
            self.update_problems()
            await asyncio.sleep(PROBLEMS_EVERY)

    def update_problems(self) -> None:
        """The fleet's problems worked out again for the hosts that changed; a frame when they differ."""
        if not self.touched:
            return
        touched, self.touched = list(self.touched.values()), {}
        self.problems.update(touched, self.fleet.hosts, self.idle_after)
        text = to_json(problems_record(self.problems, self.order))
        if text != self._problems_json:
            self._problems_json = text
            self.problems_frame = frame("problems", text.encode("ascii"))
            self.publish(self.problems_frame)

    # -- the clients' side -----------------------------------------------------------------------

    def state(self, actions: bool) -> Iterator[bytes]:
        """The whole state as frames: `hub`, each host's `host`, `hello` and whole `sample`, the
        problems. Taken at once (a list of shared bytes), so it matches the log's end at that turn."""
        yield json_frame("hub", hub_record(self.interval, actions, self.feeds))
        for name, feed in self.feeds.items():
            yield from feed.joined(self.problems.group(name))
        yield self.problems_frame

    async def wait(self, timeout: float | None = None) -> bool:
        """Until the next tick with frames (True), or `timeout` seconds without one (False). Each
        client waits on a future of its own: a client cancelled (it left) cancels no other's wait."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        self._waiting.add(future)
        timer = loop.call_later(timeout, _settle, future, False) if timeout is not None else None
        try:
            return await future
        finally:
            self._waiting.discard(future)
            if timer is not None:
                timer.cancel()

    async def serve(
        self,
        write: Write,
        actions: bool,
        transport: asyncio.BaseTransport | None = None,
        ping_every: float = PING_EVERY,
    ) -> None:
        """Write the stream to one client until its write fails (it left) or the task is cancelled.
        `transport`: the client's, whose buffer `buffered` counts."""
        self.clients += 1
        if isinstance(transport, asyncio.WriteTransport):
            self.transports.add(transport)
        try:
            cursor = await self._join(write, actions)
            while True:
                if cursor < self.log.first:  # what it missed is gone: the whole state again
                    self.resets += 1
                    await write(RESET)
                    cursor = await self._join(write, actions)
                    continue
                if cursor == self.log.end:
                    if not await self.wait(ping_every):
                        await write(PING)
                    continue
                data, cursor = self.log.since(cursor)
                await write(data)
        finally:
            self.clients -= 1
            if isinstance(transport, asyncio.WriteTransport):
                self.transports.discard(transport)

    def buffered(self) -> int:
        """Bytes written to the clients and not yet taken by their sockets, all of them together."""
        return sum(t.get_write_buffer_size() for t in self.transports if not t.is_closing())

    async def _join(self, write: Write, actions: bool) -> int:
        """The whole state at the next tick (shared by the clients joining in it), in chunks; the
        log's cursor it stands for."""
        self._tick()
        await self.wait()
        return await self._send_state(write, actions)

    async def _send_state(self, write: Write, actions: bool) -> int:
        """The whole state, in chunks; the log's cursor it stands for."""
        cursor = self.log.end
        frames = list(self.state(actions))
        chunk: list[bytes] = []
        size = 0
        for data in frames:
            chunk.append(data)
            size += len(data)
            if size >= CHUNK:
                await write(b"".join(chunk))
                chunk, size = [], 0
        if chunk:
            await write(b"".join(chunk))
        return cursor

    def snapshot_json(self) -> bytes:
        """The `gputui snapshot --json` document of the fleet as it is now."""
        return to_json(as_json(self.fleet.hosts, idle_after=self.idle_after)).encode("ascii")

    def versions(self) -> dict[str, int]:
        return {name: feed.version for name, feed in self.feeds.items()}

    def ready(self) -> bool:
        """Every host has been heard from: a sample, or judged down."""
        return all(v.sample is not None or v.shown_status == "down" for v in self.fleet.hosts)


def _settle(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)


def _whole(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A host's sample as a plain record to encode (its records made again, not kept decoded)."""
    return raw.whole() if isinstance(raw, RawSample) else dict(raw)

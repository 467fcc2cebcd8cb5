"""The hub's fan-out: the fleet's changes as server-sent-event frames, made once, read by every client.

One `Hub` listens to the fleet (on its loop). Each change becomes one frame, bytes made once:
- a host's sample: its `HostFeed`'s SampleEncoder (the probe's own, gputui/probe/delta.py) over the
  host's whole sample as the fleet holds it, so clients get deltas as the probe would send them;
- a hello, a plan's event, a change of a host's status;
- the fleet's problems, worked out at most once a second and sent only when they changed.
Frames go into one shared log (`Log`): a bounded window of the latest frames, by count and bytes.
Each client is a cursor into it; a client whose cursor fell out of the window (it read too slowly)
gets `reset` and the whole state again. A client's own memory is its socket's buffer and the write
it waits on: the state is written in chunks, each awaited, so a reader that stops holds one chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from ..fleet.fleet import Fleet
from ..fleet.session import (
    ErrorArrived,
    EventArrived,
    FleetEvent,
    HelloArrived,
    HostView,
    SampleArrived,
    StatusChanged,
)
from ..model.decode import plain
from ..probe.delta import SampleEncoder
from ..probe.wire import encode
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

DELTAS_EVERY = 30  # a whole sample every this many (the same bound on what a lost frame costs)
LOG_FRAMES = 65_536  # frames the log keeps for clients that lag
LOG_BYTES = 16 << 20  # and bytes: what a burst may hold, however many clients read it
CHUNK = 256 << 10  # bytes written to a client before its write is awaited
PING_EVERY = 15.0  # seconds of quiet before a `: ping` comment (proxies close idle streams)
PROBLEMS_EVERY = 1.0  # seconds between two workings-out of the fleet's problems


class HostFeed:
    """One host's frames: its samples as a delta encoder over them, and what a joining client needs
    (made when first asked after a change, then shared)."""

    def __init__(self, view: HostView) -> None:
        self.view = view
        self.encoder = SampleEncoder(DELTAS_EVERY)
        self.status: dict[str, Any] | None = None  # the last `host` record sent (without history)
        self._joined: list[bytes] | None = None  # host, hello and whole sample frames for a join
        self.version = 0  # moves on at every change of the host (what /metrics keeps its text by)

    def sample_frame(self) -> bytes | None:
        """The frame of the host's new sample (a delta where one is shorter), or None: no record."""
        raw = self.view.raw_sample
        if raw is None:
            return None
        self._joined = None
        self.version += 1
        line = self.encoder.line(dict(raw)).rstrip(b"\n")
        return host_frame(self.view.name, line, "sample")

    def hello_frame(self) -> bytes | None:
        self._joined = None
        self.version += 1
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
        """What a joining client is sent of this host: its state with history, hello, whole sample."""
        if self._joined is None:
            record = host_record(self.view, group, with_history=True)
            frames = [json_frame("host", [self.view.name, record])]
            if self.view.raw_hello:
                frames.append(host_frame(self.view.name, to_json(self.view.raw_hello).encode(), "hello"))
            base = self.encoder.base
            if base is not None:
                frames.append(host_frame(self.view.name, encode(base).rstrip(b"\n"), "sample"))
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
        self._wake: asyncio.Future[None] | None = None
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
        if self._wake is not None and not self._wake.done():
            self._wake.cancel()

    def on_fleet(self, event: FleetEvent) -> None:
        feed = self.feeds.get(event.view.name)
        if feed is None:
            return
        data: bytes | None = None
        if isinstance(event, SampleArrived):
            data = feed.sample_frame()
            self.touched[feed.view.name] = feed.view
        elif isinstance(event, HelloArrived):
            data = feed.hello_frame()
            self.touched[feed.view.name] = feed.view
        elif isinstance(event, StatusChanged):
            data = feed.status_frame(self.problems.group(feed.view.name))
            self.touched[feed.view.name] = feed.view
        elif isinstance(event, EventArrived):
            record = {"type": "event", "v": 1, **plain(event.event)}
            data = host_frame(feed.view.name, to_json(record).encode("ascii"), "event")
        elif isinstance(event, ErrorArrived):
            return  # the probe's complaints are the host's status and problems, not frames
        if data is not None:
            self.publish(data)

    def publish(self, data: bytes) -> None:
        """One frame for every client: into the log, and the waiting writers woken (once a turn)."""
        self.log.append(data)
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

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

    def changed(self) -> asyncio.Future[None]:
        """A future that is done at the next frame (shared by every client waiting now)."""
        if self._wake is None or self._wake.done():
            self._wake = asyncio.get_running_loop().create_future()
        return self._wake

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
            cursor = await self._send_state(write, actions)
            while True:
                if cursor < self.log.first:  # what it missed is gone: the whole state again
                    self.resets += 1
                    await write(RESET)
                    cursor = await self._send_state(write, actions)
                    continue
                if cursor == self.log.end:
                    try:
                        await asyncio.wait_for(asyncio.shield(self.changed()), ping_every)
                    except asyncio.TimeoutError:
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

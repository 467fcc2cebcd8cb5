"""A link that plays back recorded probe records: fixed data for snapshots, screenshots and UI tests.

Real probes report real PIDs, times and sparkline histories that differ on every run; a recording
(one JSON record per line, exactly what a probe wrote on stdout) does not. `ReplayLink` hands the
fleet the recorded `hello`, then the samples, then waits forever, so the host keeps its last state.
Recorded `detail` records are not played: they answer the app's `detail` requests for their (pid,
start time), with the request's id; a request for another process is answered `exited`.
Nothing here reads the clock: stale detection stays the fleet's job (give the fleet an interval
longer than the test when a host must stay live after the recording ends).

`ReplayPlayer` plays a recording that `gputui record` wrote (gputui/recording/format.py) into one link per
host, paced by the recorded times, for `gputui --replay FILE`; `DownLink` is a host that was down
at the moment `gputui snapshot --replay FILE --at TIME` shows.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from gputui.model.textsafe import printable
from gputui.probe import wire
from gputui.recording.format import ActionEvents, Entry, HostAt, RecordingError, RecordingReader
from gputui.transport.base import TransportError


def load_recording(path: str | Path) -> list[dict[str, Any]]:
    """The records of a JSONL recording (blank lines skipped). Raises ValueError naming the line."""
    records: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not a JSON line: {exc}") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{number}: a record must be a JSON object")
            records.append(record)
    return records


class ReplayLink:
    """Implements the `Link` protocol over a list of records.

    The first `hello` is sent once; the other records follow in order, at `rate` records per second
    (None: as fast as the fleet reads them); then it holds (`hold`), or ends the stream. With `loop`,
    the records after the hello repeat forever, their `seq` counting on so the app sees new samples.
    Records the app sends are kept in `sent`.
    """

    failure: TransportError | None = None  # the Link protocol's: a replay never breaks

    def __init__(
        self,
        records: Iterable[dict[str, Any]],
        loop: bool = False,
        rate: float | None = None,
        hold: bool = True,
    ) -> None:
        records = list(records)
        self.hold = hold  # after the records: wait (the host keeps its last state), else end the stream
        hellos = [r for r in records if r.get("type") == "hello"]
        self.hello = hellos[0] if hellos else None
        self.records = [r for r in records if r.get("type") not in ("hello", "detail")]
        self.details = {(r.get("pid"), r.get("start_time")): r for r in records if r.get("type") == "detail"}
        self._answers: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.loop = loop
        self.rate = rate
        self.sent: list[dict[str, Any]] = []
        self._last_seq = max((r["seq"] for r in self.records if isinstance(r.get("seq"), int)), default=0)
        self._position = 0
        self._seq_offset = 0
        self._hello_sent = False
        self._opened = False
        self._closed = asyncio.Event()

    async def open(self) -> None:
        if self.hello is None:
            raise TransportError("probe-crashed", "the recording has no hello record")
        self._opened = True

    async def recv(self) -> dict[str, Any] | None:
        if not self._opened or self._closed.is_set():
            return None
        if not self._hello_sent:
            self._hello_sent = True
            return dict(self.hello or {})
        if not self._answers.empty():
            return self._answers.get_nowait()
        if self._position >= len(self.records):
            if not self.hold:
                return None
            if not self.loop or not self.records:
                return await self._answer_or_close()  # hold the last state until the fleet closes the link
            self._seq_offset += self._last_seq
            self._position = 0
        # Even at full speed, yield to the event loop between records so the UI keeps running.
        await asyncio.sleep(1.0 / self.rate if self.rate else 0)
        record = self.records[self._position]
        self._position += 1
        if self._seq_offset and isinstance(record.get("seq"), int):
            record = dict(record, seq=record["seq"] + self._seq_offset)
        return record

    async def _answer_or_close(self) -> dict[str, Any] | None:
        answer = asyncio.ensure_future(self._answers.get())
        closed = asyncio.ensure_future(self._closed.wait())
        done, pending = await asyncio.wait({answer, closed}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        return answer.result() if answer in done else None

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if message.get("type") == "detail":
            key = (message.get("pid"), message.get("start_time"))
            recorded = self.details.get(key)
            answer = (
                dict(recorded) if recorded is not None else {"type": "detail", "v": 1, "result": "exited"}
            )
            answer.update(id=message.get("id"), pid=key[0], start_time=key[1])
            if recorded is None:
                answer["message"] = "no such process: it has exited"
            self._answers.put_nowait(answer)

    async def close(self) -> None:
        self._closed.set()


# -- a recording played back: `gputui --replay FILE` (gputui/recording/format.py has the format) -----------

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)  # what `>` and `<` step through


class DownLink:
    """A host that was down, or not connected yet, at the moment a replayed snapshot shows:
    open() fails with the recorded reason, as the host's link did then."""

    hello: dict[str, Any] | None = None
    failure: TransportError | None = None

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        self.message = message

    async def open(self) -> None:
        raise TransportError(self.reason, self.message)

    async def recv(self) -> dict[str, Any] | None:
        return None

    async def send(self, message: dict[str, Any]) -> None:
        raise TransportError("closed", self.message)

    async def close(self) -> None:
        return None


Item = dict[str, Any] | TransportError  # a record for the host's link, or its link breaking


class _Channel:
    """One host's records, handed on by the player, waiting for the host's link to take them."""

    def __init__(self) -> None:
        self.items: deque[Item] = deque()
        self.ready = asyncio.Event()

    def put(self, item: Item, first: bool = False) -> None:
        if isinstance(item, TransportError) or item.get("type") == "hello":
            # Only the last break counts, and a hello (the probe connected again) ends the breaks
            # before it: a link opened later starts from the host's state now, not a queue of them.
            self.items = deque(i for i in self.items if not isinstance(i, TransportError))
        if first:
            self.items.appendleft(item)
        else:
            self.items.append(item)
        self.ready.set()

    async def get(self) -> Item:
        while not self.items:
            self.ready.clear()
            await self.ready.wait()
        return self.items.popleft()


class PlayerLink:
    """A host's link in a replay: a hello, then the records the player hands on as their time
    comes; a recorded break (the host's link went down) is this link's failure, with its reason."""

    def __init__(self, player: ReplayPlayer, host: str) -> None:
        self.player = player
        self.host = host
        self.hello: dict[str, Any] | None = None
        self.failure: TransportError | None = None
        self._channel = player.channels[host]
        self._closed = asyncio.Event()

    async def open(self) -> None:
        self.player.begin()
        while True:
            item = await self._channel.get()
            if isinstance(item, TransportError):
                raise item
            if item.get("type") == "hello":
                self.hello = item
                return
            # A record before the probe's hello: a probe's link passes none on either.

    async def recv(self) -> dict[str, Any] | None:
        if self._closed.is_set():
            return None
        getting = asyncio.ensure_future(self._channel.get())
        closing = asyncio.ensure_future(self._closed.wait())
        try:
            done, _ = await asyncio.wait({getting, closing}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closing.cancel()
            if not getting.done():
                getting.cancel()
        if getting not in done:
            if getting.done() and not getting.cancelled():  # taken as it closed: keep it for the next
                self._channel.put(getting.result(), first=True)
            return None
        item = getting.result()
        if isinstance(item, TransportError):
            self.failure = item
            return None
        if item.get("type") == "hello":  # the probe started again: a new link takes it
            self._channel.put(item, first=True)
            self.failure = TransportError("closed", "the probe started again (as recorded)")
            return None
        return item

    async def send(self, message: dict[str, Any]) -> None:
        if self._closed.is_set():
            raise TransportError("closed", f"{self.host}: the link is closed")
        if message.get("type") == "detail":
            # A replay has no process to read: the answer a probe gives to a request it cannot
            # serve, with why (the screens say it: not "exited", the process may well run).
            self._channel.put(
                {
                    "type": "detail",
                    "v": 1,
                    "id": message.get("id"),
                    "pid": message.get("pid"),
                    "start_time": message.get("start_time"),
                    "result": "refused",
                    "message": "a replay: the recorded process cannot be read now",
                },
                first=True,
            )

    async def close(self) -> None:
        self._closed.set()


class ReplayPlayer:
    """Plays a recording into one link per host (`make_link`), at the pace it was recorded times
    `speed`, with pause and step: what `gputui --replay FILE` gives the fleet, and the dashboard's
    replay controls (gputui/ui/replay.py). Every entry is checked by the reader first; each probe
    record then goes through the fleet as a live probe's does. The entries are read as they are
    played (one at a time: a recording of any size takes the memory of its largest entry); a
    damaged line stops the replay there (`problem` says where).

    `now()` is the recorded time being shown: it moves with the wall clock times `speed` while
    playing, stands still while paused, and steps to each sample's time with `step`. `seek` jumps:
    on, by playing the entries up to the new time at once (every sample goes through the fleet, so
    the histories and the action log have them); back, by reading the file again up to the new
    time (from its last checkpoint before it, where it has one) and handing each host its state
    there: its last sample, or its link down, or its probe not started yet."""

    def __init__(
        self,
        reader: RecordingReader,
        *,
        speed: float = 1.0,
        paused: bool = False,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reader = reader
        self.header = reader.header
        self.name = printable(os.path.basename(reader.path) or reader.path)
        self.channels = {host: _Channel() for host in self.header.hosts}
        self.links: dict[str, PlayerLink] = {}  # each host's latest link
        self.rewound = 0  # how many times `seek` went back (the dashboard forgets its histories)
        self._entries = reader.entries()
        self._monotonic = monotonic
        self._position = self.header.started
        self._anchor = monotonic()
        self._speed = speed
        self._paused = paused
        self._steps = 0
        self._target: float | None = None  # where the step being played ends
        self._pending: Entry | None = None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._rushing = False  # playing every entry at once, to the end
        self.ended = False
        self.problem: str | None = None
        self.played = 0  # entries handed on
        self._actions = ActionEvents()  # the audit log's lines as the events the live dashboard had

    # -- what the dashboard asks (gputui.ui.replay.ReplayControls)

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def speed(self) -> float:
        return self._speed

    @property
    def started(self) -> float:
        return self.header.started

    @property
    def utc_offset(self) -> int:
        return self.header.utc_offset

    @property
    def truncated(self) -> bool:
        return self.reader.truncated

    def now(self) -> float:
        if self._paused or self.ended or self._rushing:
            return self._position
        return self._position + (self._monotonic() - self._anchor) * self._speed

    def toggle_pause(self) -> None:
        if self._paused:
            self._anchor = self._monotonic()
            self._paused = False
        else:
            self._position = self.now()
            self._paused = True
        self._poke()

    def step(self) -> None:
        """Pause (if playing), then play on one sample interval (every host's next sample), or to
        the next entry when none comes within one (a gap: the hosts were down, say)."""
        if not self._paused:
            self.toggle_pause()
        if not self.ended:
            self._steps += 1
            self._poke()

    def seek(self, seconds: float) -> None:
        """Jump `seconds` on in the recorded time (back when negative), within the recording; the
        replay plays on or stays paused as it was."""
        self.seek_to(self.now() + seconds)

    def seek_to(self, at: float) -> None:
        """Show the recording at `at`: from its start at the earliest, its end at the latest."""
        at = max(self.header.started, at)
        if self.ended:
            at = min(at, self._position)
        if math.isinf(at):  # the end, whose time is known once it is read: every entry at once
            self._position, self._rushing = self.now(), True
        elif at < self.now():
            self._rewind(at)
        else:
            self._position, self._anchor = at, self._monotonic()
        self._poke()

    def faster(self) -> None:
        self._set_speed(+1)

    def slower(self) -> None:
        self._set_speed(-1)

    def stop(self) -> None:
        """End the playing task (the dashboard is closing)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()

    # -- for the links

    def make_link(self, host: str) -> PlayerLink:
        link = self.links[host] = PlayerLink(self, host)
        return link

    def begin(self) -> None:
        """Start playing, once: at the first link opened (on the fleet's event loop)."""
        if self._task is None and not self.ended:
            self._wake = asyncio.Event()
            self._anchor = self._monotonic()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="replay")

    # -- playing

    def _set_speed(self, step: int) -> None:
        index = min(range(len(SPEEDS)), key=lambda i: abs(SPEEDS[i] - self._speed))
        speed = SPEEDS[max(0, min(len(SPEEDS) - 1, index + step))]
        self._position, self._anchor = self.now(), self._monotonic()
        self._speed = speed
        self._poke()

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _run(self) -> None:
        try:
            while True:
                entry = self._pending or next(self._entries, None)
                if entry is None:
                    break
                self._pending = entry
                if not self._due(entry):
                    await self._sleep(entry)
                    continue  # the entry to play may be another now (a seek back)
                self._pending = None
                self._play(entry)
                await asyncio.sleep(0)  # the UI (and the hosts' sessions) between two entries
        except RecordingError as exc:
            self.problem = str(exc)
        last = self.reader.last_t
        # At the end: the last entry's time (a seek past the end stops there too).
        self._position = last if last is not None else self._position
        self.ended = True

    def _due(self, entry: Entry) -> bool:
        if self._rushing:
            return True
        if not self._paused:
            return entry.t <= self.now()
        if entry.t <= self._position:
            return True  # a seek on while paused: everything up to the new time is played now
        while self._steps > 0:
            if self._target is None:
                self._target = max(self._position + self.header.interval, entry.t)
            if entry.t <= self._target:
                return True
            self._position, self._target = self._target, None
            self._steps -= 1
        return False

    async def _sleep(self, entry: Entry) -> None:
        assert self._wake is not None
        self._wake.clear()
        timeout = None if self._paused else max(0.0, (entry.t - self.now()) / self._speed)
        woken = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({woken}, timeout=timeout)
        finally:
            woken.cancel()

    def _play(self, entry: Entry) -> None:
        self.played += 1
        if self._paused or self._rushing:
            self._position = max(self._position, entry.t)
        channel = self.channels.get(entry.host)
        if channel is None:
            return  # the end line
        record = entry.record
        if entry.kind == "probe":
            channel.put(record)
        elif entry.kind == "status" and record["status"] == "down":
            channel.put(
                TransportError(record["reason"] or "closed", record["detail"] or "down (as recorded)")
            )
        elif entry.kind == "action":
            event = self._actions.event(record)
            checked, _ = wire.check(event, wire.PROBE_TYPES) if event is not None else (None, None)
            if checked is not None:
                channel.put(checked)

    # -- seeking back

    def _rewind(self, at: float) -> None:
        """Read the file again up to `at` and hand each host its state there; play on from the
        first entry after it. A damaged line before `at` stops the replay there, as playing does."""
        reader = RecordingReader(self.reader.path)
        hosts = {name: HostAt() for name in self.header.hosts}
        pending: Entry | None = None
        entries = reader.entries(checkpoints=True)
        try:
            reader.seek_before(at)
            for entry in entries:
                if entry.kind == "checkpoint":
                    continue
                if not entry.again and entry.t > at:
                    pending = entry
                    break
                state = hosts.get(entry.host)
                if state is not None:  # not the end line
                    state.take(entry.kind, entry.record, entry.t)
        except RecordingError as exc:
            reader.close()
            self.problem = str(exc)
            return
        self.reader.close()
        self.reader, self._entries, self._pending = reader, _fresh(entries), pending
        self._position, self._anchor = at, self._monotonic()
        self._steps, self._target, self._rushing = 0, None, False
        self._actions = ActionEvents()
        self.rewound += 1
        for name, state in hosts.items():
            self._restate(name, state)
        if self.ended:
            self.ended, self.problem = False, None
            self._task = None
            self.begin()

    def _restate(self, host: str, state: HostAt) -> None:
        """Hand `host`'s link its state at the time sought: its last sample, on the link it has
        when its probe is the same one (the same hello), else on a new link (the hello first)."""
        channel = self.channels[host]
        channel.items.clear()
        if state.hello is None:
            channel.put(TransportError("timeout", "not connected yet at this point of the recording"))
            return
        link = self.links.get(host)
        if state.sample is None or link is None or link.hello != state.hello:
            channel.put(state.hello)  # a link that has another hello takes it as its probe restarting
        if state.sample is not None:
            channel.put(state.sample)
        if state.down is not None:
            reason, detail = state.down
            channel.put(TransportError(reason or "closed", detail or "down (as recorded)"))


def _fresh(entries: Iterable[Entry]) -> Iterator[Entry]:
    """The entries as played: without the checkpoints and what they restate."""
    return (e for e in entries if e.kind != "checkpoint" and not e.again)

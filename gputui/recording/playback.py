"""A link that plays recorded probe output as bytes, through the reader and parser a real link uses.

`ReplayLink` (player.py) hands the fleet records that are already decoded: no line splitting, no
JSON, no checks. A real link pays for those on every sample, and at a thousand hosts that is most of
the app's work. `PlaybackLink` is a `ProbeLink` (bootstrap.py) whose pipes read a recording file
instead of a probe's stdout: its lines go through `RecordStream` (the line reader, over-long lines
refused) and `wire.decode` exactly as a local or SSH probe's do, and the fleet's host session takes
them from there. What the app sends is kept in `sent` (nothing answers it).

A `Recording` is a file of probe output, one record a line (what a probe wrote on stdout): its hello
first, then samples. The file is read with `os.pread` when a line is due, so a thousand links that
play a few recordings share them through the page cache, not in the app's memory. Line `k` after
the hello is due `interval` seconds after line `k - 1`, from `phase` seconds after the link opens
(spread the hosts over the second, as probes started at different times are); after the last line
the recording starts again from its first line after the hello (`loop`). A `configure` the app
sends with an `interval` spaces the lines after it so, as a probe spaces its samples (the app's
pacing, gputui/fleet/pacing.py); the lines' own times stay as recorded.

The lines come due through one clock for all the links of an event loop (`_Clock`), which wakes
every due link at once, every TICK seconds, as the selector wakes every link whose bytes came: a
timer of the event loop's own per line would cost the app what a real link's bytes do not.
"""

from __future__ import annotations

import asyncio
import json
import os
import weakref
from array import array
from collections import defaultdict
from pathlib import Path
from typing import Any

from gputui.transport.base import TransportError
from gputui.transport.bootstrap import Pipes, ProbeLink


class Recording:
    """A file of probe output lines, indexed (offsets only: the lines stay in the file)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        self.starts = array("Q")  # where each line starts; the newline is part of its line
        self.ends = array("Q")
        offset = 0
        with open(self.path, "rb") as f:
            for line in f:
                if line.strip():
                    self.starts.append(offset)
                    self.ends.append(offset + len(line))
                offset += len(line)
        if len(self.starts) < 2:
            raise ValueError(f"{path}: a recording needs a hello and at least one sample")

    def __len__(self) -> int:
        return len(self.starts)

    def line(self, index: int) -> bytes:
        start = self.starts[index]
        return os.pread(self.fd, self.ends[index] - start, start)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


TICK = 0.01  # seconds: lines come due at most this late


class _Clock:
    """Wakes the links whose next line is due, all at once, every TICK (one task per event loop)."""

    _clocks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Clock] = weakref.WeakKeyDictionary()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.due: defaultdict[int, list[asyncio.Future[None]]] = defaultdict(list)  # tick -> waiters
        self.task: asyncio.Task[None] | None = None

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> _Clock:
        clock = cls._clocks.get(loop)
        if clock is None:
            clock = cls._clocks[loop] = cls(loop)
        return clock

    async def until(self, when: float) -> None:
        """Until the loop's time `when` (rounded up to the next TICK)."""
        future: asyncio.Future[None] = self.loop.create_future()
        self.due[int(when / TICK) + 1].append(future)
        if self.task is None or self.task.done():
            self.task = self.loop.create_task(self._run())
        await future

    async def _run(self) -> None:
        while self.due:
            await asyncio.sleep(TICK)
            now = int(self.loop.time() / TICK)
            for tick in [t for t in self.due if t <= now]:
                for future in self.due.pop(tick):
                    if not future.done():
                        future.set_result(None)


class _PlaybackPipes(Pipes):
    def __init__(self, recording: Recording, interval: float, phase: float, loop: bool) -> None:
        self.recording = recording
        self.interval = interval
        self.loop = loop
        self.sent: list[bytes] = []
        self._clock = asyncio.get_running_loop().time
        self._due = self._clock() + phase  # when the next sample line is due
        self._line = 0  # the next line to read (0: the hello, sent at once)
        self._rest = b""  # what is left of a line longer than the reader asked for
        self._closed = asyncio.Event()

    async def read(self, size: int) -> bytes:
        if self._rest:
            data, self._rest = self._rest[:size], self._rest[size:]
            return data
        if self._closed.is_set():
            return b""
        if self._line >= len(self.recording):
            if not self.loop:
                await self._closed.wait()  # the probe is silent from now on, until closed
                return b""
            self._line = 1
        if self._line > 0:
            due = self._due
            if due > self._clock():
                await _Clock.of(asyncio.get_running_loop()).until(due)
            if self._closed.is_set():
                return b""
            self._due = due + self.interval
        data = self.recording.line(self._line)
        self._line += 1
        data, self._rest = data[:size], data[size:]
        return data

    async def read_err(self, size: int) -> bytes:
        await self._closed.wait()
        return b""

    async def write(self, data: bytes) -> None:
        if self._closed.is_set():
            raise TransportError("closed", "the recording has ended")
        self.sent.append(data)
        for line in data.splitlines():
            if b'"configure"' in line and b'"interval"' in line:
                self._configure(line)

    def _configure(self, line: bytes) -> None:
        """A `configure` with an `interval`: the lines after the next one come that far apart."""
        try:
            record = json.loads(line)
        except ValueError:
            return
        interval = record.get("interval") if isinstance(record, dict) else None
        if record.get("type") == "configure" and isinstance(interval, (int, float)) and interval > 0:
            self.interval = float(interval)

    def write_eof(self) -> None:
        self._closed.set()

    async def wait(self, timeout: float) -> int | None:
        return 0 if self._closed.is_set() else None

    def abort(self) -> None:
        self._closed.set()


class PlaybackLink(ProbeLink):
    """The Link protocol over a recording, through the same stream reader and checks as a probe."""

    label = "playback"

    def __init__(
        self,
        recording: Recording,
        *,
        interval: float = 1.0,
        phase: float = 0.0,
        loop: bool = True,
        label: str | None = None,
    ) -> None:
        super().__init__(b"", hello_timeout=30.0, close_timeout=0.1)
        self.recording = recording
        self.interval = interval
        self.phase = phase
        self.loop = loop
        if label is not None:
            self.label = label

    async def _start(self) -> Pipes:
        return _PlaybackPipes(self.recording, self.interval, self.phase, self.loop)

    @property
    def sent(self) -> list[dict[str, Any]]:
        """The records the app sent (decoded; the bootstrap payload, empty here, left out)."""
        pipes = self._pipes
        if not isinstance(pipes, _PlaybackPipes):
            return []
        return [json.loads(line) for data in pipes.sent for line in data.splitlines() if line.strip()]

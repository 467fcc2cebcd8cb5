"""`gputui record`: every sample and plan event of the watched hosts into a recording
(docs/RECORDING.md; the format is gputui/recording/format.py's, and gputui/cli/replay.py reads one
back for `--replay`).

What is recorded, per host: each record its probe sends (hello, samples, events, errors), as its
link decoded it; its link's status changes (down, with the reason); and every line the audit log
gains about it while recording (plans, signals, verdicts of `gputui clean` or a dashboard run
elsewhere: another process's plans never reach this one's probes). Exit codes: 0 recorded until
--seconds passed or Ctrl+C; 1 stopped early: the size cap was reached, or the file could not be
written; 2 bad usage (FILE exists, a bad option); 128+N ended by signal N (SIGTERM, SIGHUP).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config.file import HostSpec, load
from ..fleet.fleet import Fleet
from ..fleet.session import FleetEvent, StatusChanged
from ..kill.auditpath import default_log_path, open_log
from ..model.textsafe import printable
from ..recording.format import MIN_MAX_BYTES, RecordingError, RecordingWriter, offset_words
from ..transport import make_link
from ..transport.base import Link, TransportError
from .exits import STOPS, Exit, stop_signals
from .fleets import resolve_hosts
from .streams import warn

AUDIT_CHUNK = 4 << 20  # bytes of new audit log read at a time
AUDIT_LINE = 1 << 20  # an audit line longer than this is no line gputui wrote: skipped


class Recorder:
    """The writer, shared by every host's link: a write that fails, or the size cap, stops the
    recording (`stopped`), never a host's session."""

    def __init__(self, writer: RecordingWriter) -> None:
        self.writer = writer
        self.stopped = asyncio.Event()
        self.reason: str | None = None
        self.problem: str | None = None

    def put(self, host: str, kind: str, record: dict[str, Any], t: float | None = None) -> None:
        if self.stopped.is_set():
            return
        try:
            written = self.writer.write(host, kind, record, t)
        except RecordingError as exc:
            self.stop("failed", str(exc))
            return
        if not written and self.writer.full:
            self.stop("cap")

    def stop(self, reason: str, problem: str | None = None) -> None:
        if not self.stopped.is_set():
            self.reason, self.problem = reason, problem
            self.stopped.set()


class TeeLink:
    """A host's link whose records are recorded as the fleet reads them. Its hello does not offer
    delta samples (docs/PROTOCOL.md): a recording holds every sample whole, so that any moment of
    it (`snapshot --replay --at`) is one line, not a chain of changes back to the last whole one."""

    def __init__(self, inner: Link, recorder: Recorder, host: str) -> None:
        self.inner = inner
        self.recorder = recorder
        self.host = host
        self.hello: dict[str, Any] | None = None
        self.failure: TransportError | None = None

    async def open(self) -> None:
        await self.inner.open()
        hello = self.inner.hello
        if hello is not None and isinstance(hello.get("capabilities"), list):
            hello = {**hello, "capabilities": [c for c in hello["capabilities"] if c != "delta"]}
        self.hello = hello
        if self.hello is not None:
            self.recorder.put(self.host, "probe", self.hello)

    async def recv(self) -> dict[str, Any] | None:
        record = await self.inner.recv()
        if record is None:
            self.failure = self.inner.failure
        else:
            self.recorder.put(self.host, "probe", record)
        return record

    async def send(self, message: dict[str, Any]) -> None:
        await self.inner.send(message)

    async def close(self) -> None:
        await self.inner.close()


class AuditTail:
    """The lines an audit log gains, read from where it ended when recording began (a log that is
    replaced or cut starts again from its beginning). Opened with the audit log's own checks
    (gputui.kill.auditpath.open_log) each time; a log that cannot be read is said once, not fatal."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.inode: tuple[int, int] | None = None
        self.offset = 0
        self.problem: str | None = None
        self.skipped = 0  # lines that were not JSON objects, or too long
        self._read(first=True)

    def _read(self, first: bool = False) -> list[dict[str, Any]]:
        try:
            fd = open_log(self.path, write=False)
        except OSError as exc:
            self.problem = f"audit log {self.path}: {exc.strerror or exc}"
            return []
        if fd is None:
            return []
        try:
            info = os.fstat(fd)
            inode = (info.st_dev, info.st_ino)
            if inode != self.inode or info.st_size < self.offset:
                self.inode, self.offset = inode, info.st_size if first else 0
            if first:
                return []
            data = os.pread(fd, AUDIT_CHUNK, self.offset)
        except OSError as exc:
            self.problem = f"audit log {self.path}: {exc.strerror or exc}"
            return []
        finally:
            os.close(fd)
        end = data.rfind(b"\n")
        if end < 0:
            if len(data) >= AUDIT_CHUNK:  # one line longer than a read: no line of gputui's
                self.offset += len(data)
                self.skipped += 1
            return []
        self.offset += end + 1
        out = []
        for line in data[:end].split(b"\n"):
            if not line.strip():
                continue
            try:
                record = json.loads(line) if len(line) <= AUDIT_LINE else None
            except ValueError:
                record = None
            if isinstance(record, dict):
                out.append(record)
            else:
                self.skipped += 1
        return out

    def new(self) -> list[dict[str, Any]]:
        return self._read()


def run(args: argparse.Namespace) -> int:
    """`gputui record` with its parsed arguments."""
    config = load(args.config)
    specs = resolve_hosts(args.hosts, args.demo, config, read_only=True)
    interval = args.interval or config.interval or 1.0
    if args.max_bytes < MIN_MAX_BYTES:
        warn(f"--max-bytes {args.max_bytes}: at least {MIN_MAX_BYTES >> 10}KiB")
        return Exit.USAGE
    log_path = args.log if args.log is not None else default_log_path()
    try:
        writer = RecordingWriter(
            args.file, [s.name for s in specs], interval=interval, max_bytes=args.max_bytes
        )
    except RecordingError as exc:
        warn(str(exc))
        return Exit.USAGE
    recorder = Recorder(writer)
    return asyncio.run(_record(args, specs, interval, recorder, AuditTail(log_path)))


async def _record(
    args: argparse.Namespace, specs: list[HostSpec], interval: float, recorder: Recorder, audit: AuditTail
) -> int:
    names = [s.name for s in specs]
    fleet = _recorded_fleet(specs, interval, recorder)
    where = ", ".join(printable(n) for n in names)
    until = f"for {args.seconds:g} s" if args.seconds is not None else "Ctrl+C stops"
    stops = _Stops(recorder)
    warn(f"recording {where} to {printable(args.file)} ({until})")
    started = time.monotonic()
    deadline = started + args.seconds if args.seconds is not None else math.inf
    fleet.start()
    try:
        await _until_stopped(recorder, audit, names, deadline, interval)
    finally:
        stops.remove()
        await fleet.stop()
    return _finish(args.file, recorder, started) or stops.code


def _recorded_fleet(specs: list[HostSpec], interval: float, recorder: Recorder) -> Fleet:
    """A fleet whose links record what they read, and whose hosts' status changes are recorded."""
    fleet = Fleet()
    for spec in specs:
        fleet.add(
            spec.name,
            functools.partial(_tee, make_link, spec, interval, recorder),
            read_only=True,
            interval=interval,
        )

    def status(change: FleetEvent) -> None:
        if isinstance(change, StatusChanged):
            view = change.view
            recorder.put(
                view.name, "status", {"status": view.status, "reason": view.reason, "detail": view.detail}
            )

    fleet.listen(status)
    return fleet


class _Stops:
    """SIGINT, SIGTERM and SIGHUP stop the recording from construction until `remove`; `code` is the
    exit status the signal that stopped it gives (Exit.OK until one does)."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.code = int(Exit.OK)
        self.signals = contextlib.ExitStack()
        self.signals.enter_context(stop_signals(asyncio.get_running_loop(), self._on_signal))

    def _on_signal(self, sig: signal.Signals) -> None:
        self.code = STOPS[sig]
        self.recorder.stop("interrupted" if sig == signal.SIGINT else "signal")

    def remove(self) -> None:
        self.signals.close()


async def _until_stopped(
    recorder: Recorder, audit: AuditTail, names: list[str], deadline: float, interval: float
) -> None:
    """Record the audit log's new lines about `names` until the deadline or a stop."""
    said = False
    while not recorder.stopped.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            recorder.stop("seconds")
            break
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(recorder.stopped.wait(), min(left, max(0.25, min(interval, 1.0))))
        for line in audit.new():
            host = line.get("host")
            if isinstance(host, str) and host in names:
                recorder.put(host, "action", line)
        if audit.problem and not said:
            said = True
            warn(f"{audit.problem}: plans run elsewhere are not recorded")


def _finish(file: str, recorder: Recorder, started: float) -> int:
    """Close the file and say what was recorded: Exit.STOPPED when it stopped early, else 0 (the
    signal's status, if one stopped it, is the caller's)."""
    writer = recorder.writer
    reason = recorder.reason or "seconds"
    try:
        writer.close(reason)
    except RecordingError as exc:
        recorder.stop("failed", str(exc))
        reason, recorder.problem = "failed", str(exc)
    took = offset_words(time.monotonic() - started)
    size = f"{writer.size / (1 << 20):.1f} MiB" if writer.size >= 1 << 20 else f"{writer.size >> 10} KiB"
    summary = f"{printable(file)}: {writer.entries} entries, {size}, {took}"
    if reason == "cap":
        warn(
            f"{summary}: reached its size cap of {_bytes(writer.max_bytes)}: recording stopped "
            "(--max-bytes SIZE records more)"
        )
        return Exit.STOPPED
    if reason == "failed":
        warn(f"{recorder.problem}: recording stopped ({summary}; readable to its last entry)")
        return Exit.STOPPED
    warn(f"{summary} ({'interrupted' if reason in ('interrupted', 'signal') else 'done'})")
    return Exit.OK


def _tee(make_link: Callable[..., Link], spec: Any, interval: float, recorder: Recorder) -> TeeLink:
    return TeeLink(make_link(spec, interval), recorder, spec.name)


def _bytes(n: int) -> str:
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n / (1 << 10):g} KiB"

"""`gputui record`: every sample and plan event of the watched hosts into a recording; and the CLI's
two ways to read one back: `gputui --replay FILE` (the dashboard) and `gputui snapshot --replay FILE
--at TIME` (docs/RECORDING.md; the format is gputui/recording/format.py's).

    gputui record FILE [HOST ...] [--demo] [--seconds S] [--max-bytes SIZE] [--interval S] [--log PATH]

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
import math
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..model.textsafe import printable
from ..recording.format import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_READ,
    MIN_MAX_BYTES,
    Header,
    RecordingError,
    RecordingReader,
    RecordingWriter,
    clock_words,
    offset_words,
    parse_at,
    state_at,
)
from . import argtypes
from .exits import EXIT_OK, EXIT_STOPPED, EXIT_USAGE, STOPS

if TYPE_CHECKING:
    from ..fleet.fleet import Fleet
    from ..fleet.session import HostView
    from ..recording.player import ReplayPlayer
    from ..transport.base import Link, TransportError

MAX_RECORD_SECONDS = 366 * 24 * 3600.0
AUDIT_CHUNK = 4 << 20  # bytes of new audit log read at a time
AUDIT_LINE = 1 << 20  # an audit line longer than this is no line gputui wrote: skipped
REPLAY_INTERVAL = 3600.0  # a replayed host is never judged stale by the wall clock: paused is paused
MAX_READ_VARIABLE = "GPUTUI_REPLAY_MAX_READ"  # bytes `--at` may expand (docs/RECORDING.md "Seeking")


def _say(text: str) -> None:
    print(f"gputui: {text}", file=sys.stderr, flush=True)


# -- gputui record -----------------------------------------------------------------------------------


def record_parser() -> argparse.ArgumentParser:
    p = argtypes.Parser(
        prog="gputui record",
        description="Record every sample and plan event of the hosts into FILE, for --replay.",
        epilog=(
            "exit codes: 0 recorded until --seconds or Ctrl+C; 1 stopped early (the size cap, or FILE "
            "could not be written); 2 bad usage (FILE exists); 128+N ended by signal N"
        ),
    )
    p.add_argument("file", metavar="FILE", help="the recording to write (gzip JSON lines; never overwritten)")
    p.add_argument("hosts", nargs="*", metavar="HOST", help="local, a config name, alias, user@host[:port]")
    p.add_argument("--demo", action="store_true", help="a simulated cluster: real processes, no GPU needed")
    p.add_argument(
        "--config", metavar="PATH", help="TOML config (default: $GPUTUI_CONFIG, then the user dir)"
    )
    p.add_argument(
        "--seconds",
        type=argtypes.seconds_upto(MAX_RECORD_SECONDS),
        metavar="S",
        help="stop after S seconds (default: at Ctrl+C)",
    )
    p.add_argument(
        "--max-bytes",
        type=argtypes.size,
        default=DEFAULT_MAX_BYTES,
        metavar="SIZE",
        help=f"stop when FILE reaches SIZE (default {DEFAULT_MAX_BYTES >> 20}MiB, at least 64KiB)",
    )
    argtypes.add_interval(p, None, "seconds between samples (0.1 to 3600; default: the config's, else 1)")
    p.add_argument(
        "--log", metavar="PATH", help="the audit log whose new lines are recorded (default: the user's)"
    )
    return p


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
        from pathlib import Path

        self.path = Path(path)
        self.inode: tuple[int, int] | None = None
        self.offset = 0
        self.problem: str | None = None
        self.skipped = 0  # lines that were not JSON objects, or too long
        self._read(first=True)

    def _read(self, first: bool = False) -> list[dict[str, Any]]:
        import json

        from ..kill.auditpath import open_log

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


def run_record(argv: list[str]) -> int:
    from ..config.file import load
    from .main import resolve_hosts

    args = record_parser().parse_args(argv)
    config = load(args.config)
    specs = resolve_hosts(args.hosts, args.demo, config, read_only=True)
    interval = args.interval or config.interval or 1.0
    if args.max_bytes < MIN_MAX_BYTES:
        _say(f"--max-bytes {args.max_bytes}: at least {MIN_MAX_BYTES >> 10}KiB")
        return EXIT_USAGE
    log_path = args.log
    if log_path is None:
        from ..kill.auditpath import default_log_path

        log_path = default_log_path()
    try:
        writer = RecordingWriter(
            args.file, [s.name for s in specs], interval=interval, max_bytes=args.max_bytes
        )
    except RecordingError as exc:
        _say(str(exc))
        return EXIT_USAGE
    recorder = Recorder(writer)
    return asyncio.run(_record(args, specs, interval, recorder, AuditTail(log_path)))


async def _record(
    args: argparse.Namespace, specs: list[Any], interval: float, recorder: Recorder, audit: AuditTail
) -> int:
    from ..fleet.fleet import Fleet
    from ..transport import make_link

    writer = recorder.writer
    names = [s.name for s in specs]
    fleet = Fleet()
    for spec in specs:
        fleet.add(
            spec.name,
            functools.partial(_tee, make_link, spec, interval, recorder),
            read_only=True,
            interval=interval,
        )

    def status(view: HostView, what: str, payload: Any) -> None:
        if what == "status":
            recorder.put(
                view.name, "status", {"status": view.status, "reason": view.reason, "detail": view.detail}
            )

    fleet.listen(status)
    loop = asyncio.get_running_loop()
    code = EXIT_OK
    handled = []

    def on_signal(sig: signal.Signals) -> None:
        nonlocal code
        code = STOPS[sig]
        recorder.stop("interrupted" if sig == signal.SIGINT else "signal")

    for sig in STOPS:
        with contextlib.suppress(ValueError, RuntimeError, OSError):
            loop.add_signal_handler(sig, on_signal, sig)
            handled.append(sig)
    where = ", ".join(printable(n) for n in names)
    until = f"for {args.seconds:g} s" if args.seconds is not None else "Ctrl+C stops"
    _say(f"recording {where} to {printable(args.file)} ({until})")
    started = time.monotonic()
    deadline = started + args.seconds if args.seconds is not None else math.inf
    fleet.start()
    try:
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
                _say(f"{audit.problem}: plans run elsewhere are not recorded")
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
        await fleet.stop()
    reason = recorder.reason or "seconds"
    try:
        writer.close(reason)
    except RecordingError as exc:
        recorder.stop("failed", str(exc))
        reason, recorder.problem = "failed", str(exc)
    took = offset_words(time.monotonic() - started)
    size = f"{writer.size / (1 << 20):.1f} MiB" if writer.size >= 1 << 20 else f"{writer.size >> 10} KiB"
    summary = f"{printable(args.file)}: {writer.entries} entries, {size}, {took}"
    if reason == "cap":
        _say(
            f"{summary}: reached its size cap of {_bytes(writer.max_bytes)}: recording stopped "
            "(--max-bytes SIZE records more)"
        )
        return EXIT_STOPPED
    if reason == "failed":
        _say(f"{recorder.problem}: recording stopped ({summary}; readable to its last entry)")
        return EXIT_STOPPED
    _say(f"{summary} ({'interrupted' if reason in ('interrupted', 'signal') else 'done'})")
    return code


def _tee(make_link: Callable[..., Link], spec: Any, interval: float, recorder: Recorder) -> TeeLink:
    return TeeLink(make_link(spec, interval), recorder, spec.name)


def _bytes(n: int) -> str:
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n / (1 << 10):g} KiB"


# -- gputui snapshot --replay FILE --at TIME -----------------------------------------------------------


def run_snapshot_replay(args: argparse.Namespace) -> int:
    """The snapshot document at a moment of a recording: each host's last sample at or before
    TIME, played through a fleet as a live host's records are. Exit codes as `gputui snapshot`'s;
    2 for a recording that cannot be read or a TIME it does not hold."""
    from ..fleet.fleet import Fleet
    from . import snapshot

    if args.replay is None:
        _say("--at TIME reads a recording: name it with --replay FILE")
        return EXIT_USAGE
    if args.demo or args.watch is not None:
        _say("--replay shows a recording: it does not combine with --demo or --watch")
        return EXIT_USAGE
    max_read = _max_read()
    if isinstance(max_read, str):
        _say(max_read)
        return EXIT_USAGE
    try:
        with RecordingReader(args.replay) as reader:
            header = reader.header
            unknown = [h for h in args.hosts if h not in header.hosts]
            if unknown:
                listed = ", ".join(printable(h) for h in header.hosts[:12])
                _say(f"{printable(unknown[0])} is not in {reader.name} (it recorded {listed})")
                return EXIT_USAGE
            at = parse_at(args.at, header) if args.at is not None else math.inf
            if at < header.started:
                _say(
                    f"{_moment(at, header)} is before {reader.name} starts ({_moment(header.started, header)})"
                )
                return EXIT_USAGE
            state = state_at(reader, at, max_read=max_read)
            truncated = reader.truncated
            name = reader.name
    except ValueError as exc:
        _say(f"--at {exc}")
        return EXIT_USAGE
    except RecordingError as exc:
        _say(str(exc))
        return EXIT_USAGE
    last = state.last_t if state.last_t is not None else header.started
    if truncated:
        _say(
            f"{name} is cut short after {_moment(last, header)} (its recorder was stopped before it closed the file)"
        )
    if math.isinf(at):
        at = last
    elif state.past_end and at > last:
        words = "is cut short at" if truncated else "ends at"
        _say(f"{_moment(at, header)} is not in {name}: it {words} {_moment(last, header)}")
        return EXIT_USAGE
    fleet = Fleet()
    chosen = [h for h in header.hosts if not args.hosts or h in args.hosts]
    for host in chosen:
        fleet.add(
            host,
            functools.partial(_link_at, state.hosts[host], at, header),
            read_only=True,
            interval=REPLAY_INTERVAL,
        )
    views = asyncio.run(snapshot.take(fleet, args.timeout))
    if args.json:
        print(snapshot.dumps(views, now=at))
    else:
        _say(f"{name} at {_moment(at, header)} ({offset_words(at - header.started)} into the recording)")
        snapshot.render(views, sys.stdout)
    return snapshot.exit_code(views)


def _max_read() -> int | str:
    """The bytes `--at` may read (GPUTUI_REPLAY_MAX_READ, a size), or what is wrong with the value."""
    text = os.environ.get(MAX_READ_VARIABLE)
    if text is None or not text.strip():
        return DEFAULT_MAX_READ
    try:
        return argtypes.size(text.strip())
    except argparse.ArgumentTypeError as exc:
        return f"{MAX_READ_VARIABLE}: {exc}"


def _moment(t: float, header: Header) -> str:
    return clock_words(t, header)


def _link_at(state: Any, at: float, header: Header) -> Link:
    from ..recording.player import DownLink, ReplayLink

    if state.hello is None:
        return DownLink("timeout", f"no hello recorded by {clock_words(at, header)}")
    if state.down is not None:
        reason, detail = state.down
        return DownLink(reason or "closed", detail or f"down since {clock_words(state.down_t or at, header)}")
    if state.sample is None:
        if state.hello.get("error"):  # a host without a driver or GPU says so in its hello
            return ReplayLink([state.hello], hold=False)
        return DownLink("timeout", f"no sample recorded by {clock_words(at, header)}")
    return ReplayLink([state.hello, state.sample])


# -- gputui --replay FILE ----------------------------------------------------------------------------------


def open_replay(path: str) -> tuple[ReplayPlayer, Fleet] | str:
    """The dashboard's fleet over a recording, and its player (the replay controls); or the one
    line that says why the recording cannot be replayed."""
    from ..fleet.fleet import Fleet
    from ..recording.player import ReplayPlayer

    try:
        reader = RecordingReader(path)
    except RecordingError as exc:
        return str(exc)
    player = ReplayPlayer(reader)
    fleet = Fleet()
    for host in reader.header.hosts:
        fleet.add(host, functools.partial(player.make_link, host), read_only=True, interval=REPLAY_INTERVAL)
    return player, fleet

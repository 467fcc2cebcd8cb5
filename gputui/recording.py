"""gputui's recordings, the format: what `gputui record` writes and `--replay` reads (docs/RECORDING.md).

A recording is JSON lines, gzip-compressed (a plain file of the same lines is read too, so a
recording can be unpacked, looked at and replayed). Line 1 is the header:

    {"gputui_recording": 1, "created_by": "gputui 0.1.0", "started": 1764554040.1,
     "utc_offset": 3600, "hosts": ["demo-a", "demo-b"], "interval": 1.0, "max_bytes": 268435456}

and every other line one entry, with its host and the recorder's time on every one:

    {"t": 1764554041.2, "host": "demo-a", "kind": "probe", "record": {"type": "sample", ...}}

Kinds: `probe` (a record the host's probe sent: hello, sample, event, error, detail, as its link
decoded it), `status` (the host's link: {"status", "reason", "detail"}), `action` (a line of the audit
log about the host: the plans, signals and verdicts of `gputui clean` or a dashboard that ran while
recording) and `end` (the last line of a recording closed in order: {"reason", "entries"}; its host
is ""). Times are the recorder's clock (one clock for every host: no skew between them).

Bounds. The writer stops at `max_bytes` of compressed output, the end line and the gzip trailer
included, and says so (`full`). It flushes the compressor after each entry: a recorder killed
mid-way leaves a file readable up to its last entry. The reader holds one entry at a time (a line
is at most MAX_ENTRY bytes; past that the file is refused without reading the rest of the line),
and checks every line before anything uses it; a probe record is then checked as a probe line is
(gputui.probe.wire.check) and replaced by the same error record when it fails, so a replay goes
through the decoders a live probe's records go through (gputui.model, via the fleet).

A recording is untrusted input: whatever is wrong with it (not a recording, another format version,
a damaged or over-long line, a corrupt compressed stream) is one `RecordingError` whose message
names the file and the line; a file cut short (the recorder was killed) is read to its last whole
entry, and `truncated` says so. Pure: no asyncio, nothing of the app.
"""

from __future__ import annotations

import datetime as _dt
import gzip
import math
import os
import stat
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from . import __version__
from .model import HOST_STATUSES
from .probe import wire
from .textsafe import printable

FORMAT = 1  # the header's "gputui_recording": what this gputui writes and reads
KINDS = ("probe", "status", "action", "end")
# One entry: a probe line is at most wire.MAX_LINE bytes; written back as ASCII JSON it can grow to
# three times that (a character of 2 or 3 bytes of UTF-8 becomes a 6-byte \\u escape), plus the
# entry's own fields.
MAX_ENTRY = 3 * wire.MAX_LINE + (64 << 10)
MAX_HEADER = 1 << 20
MAX_HOSTS = 4096
MAX_NAME = 256  # characters of a host's name
MAX_TEXT = 300  # characters of a status's reason or detail
DEFAULT_MAX_BYTES = 256 << 20
MIN_MAX_BYTES = 64 << 10
RESERVE = 1024  # bytes kept for the end line and the gzip trailer
READ_CHUNK = 1 << 16  # bytes read from a recording at a time
GZIP_MAGIC = b"\x1f\x8b"
_NEWEST = 1e11  # seconds since 1970: a time past this (year 5138) is no recorder's clock


class RecordingError(Exception):
    """What is wrong with a recording, in one line that names the file (and the line)."""


# -- the header and the entries --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Header:
    started: float  # the recorder's clock when it began
    utc_offset: int  # seconds east of UTC where it was recorded: times are shown as they were there
    hosts: tuple[str, ...]
    interval: float
    created_by: str = ""
    max_bytes: int | None = None
    format: int = FORMAT

    def describe(self) -> dict[str, Any]:
        return {
            "gputui_recording": self.format,
            "created_by": self.created_by,
            "started": round(self.started, 3),
            "utc_offset": self.utc_offset,
            "hosts": list(self.hosts),
            "interval": self.interval,
            "max_bytes": self.max_bytes,
        }


@dataclass(frozen=True, slots=True)
class Entry:
    t: float
    host: str
    kind: str
    record: dict[str, Any] = field(hash=False, compare=False)
    line: int = 0  # where it is in the file (1 is the header)


def local_offset(now: float | None = None) -> int:
    """This machine's offset from UTC now, in seconds (DST included)."""
    moment = _dt.datetime.fromtimestamp(time.time() if now is None else now).astimezone()
    offset = moment.utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0


def zone(header: Header) -> _dt.timezone:
    return _dt.timezone(_dt.timedelta(seconds=header.utc_offset))


def clock_words(t: float, header: Header, date: bool = True) -> str:
    """`2025-12-01 02:14:07` (or `02:14:07`): a recorded time, as a clock read where it was recorded."""
    return clock_at(t, header.utc_offset, date)


def clock_at(t: float, utc_offset: int, date: bool = True) -> str:
    """`2025-12-01 02:14:07` (or `02:14:07`): `t` on a clock `utc_offset` seconds east of UTC."""
    moment = _dt.datetime.fromtimestamp(t, _dt.timezone(_dt.timedelta(seconds=utc_offset)))
    return moment.strftime("%Y-%m-%d %H:%M:%S" if date else "%H:%M:%S")


def offset_words(seconds: float) -> str:
    """`+1:23:45`, `+0:07`: how far into the recording."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"+{hours}:{minutes:02d}:{secs:02d}" if hours else f"+{minutes}:{secs:02d}"


def parse_at(text: str, header: Header) -> float:
    """The moment `--at` names, as a Unix time. Forms: `+SECONDS` from the recording's start;
    `HH:MM` or `HH:MM:SS` on the recording's clock, on the day it started (the next day for a time of
    day before the start: a recording that ran past midnight); an ISO timestamp
    (`2025-12-01T02:14:00`, `2025-12-01 02:14`, with or without its UTC offset: without, the
    recording's). Raises ValueError with what is wrong."""
    text = text.strip()
    if not text or len(text) > 64 or not text.isascii():
        raise ValueError(f"{printable(text[:64])!r} is no time (HH:MM[:SS], an ISO timestamp or +SECONDS)")
    if text.startswith("+"):
        number = text[1:]
        if not number or not all(c.isdigit() or c == "." for c in number) or number.count(".") > 1:
            raise ValueError(f"{text!r}: +SECONDS wants a number of seconds, e.g. +90 or +1.5")
        seconds = float(number)
        if not math.isfinite(seconds):
            raise ValueError(f"{text!r} is out of range")
        return header.started + seconds
    tz = zone(header)
    if ":" in text and "-" not in text and "T" not in text:
        parts = text.split(":")
        if len(parts) not in (2, 3) or not all(p.isdigit() and 1 <= len(p) <= 2 for p in parts):
            raise ValueError(f"{text!r}: a time of day is HH:MM or HH:MM:SS")
        hour, minute, second = (int(p) for p in (*parts, "0")[:3])
        if hour > 23 or minute > 59 or second > 59:
            raise ValueError(f"{text!r} is no time of day")
        start = _dt.datetime.fromtimestamp(header.started, tz)
        moment = start.replace(hour=hour, minute=minute, second=second, microsecond=0)
        if moment.timestamp() < int(header.started):
            moment += _dt.timedelta(days=1)  # past midnight
        return moment.timestamp()
    try:
        moment = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is no time (HH:MM[:SS], an ISO timestamp or +SECONDS)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz)
    return moment.timestamp()


# -- writing ---------------------------------------------------------------------------------------


class RecordingWriter:
    """Appends entries to a new recording at `path` (never an existing file, never through a
    symlink; mode 0600: it holds command lines and user names). Each `write` is flushed through the
    compressor; `write` returns False, writing nothing, once the next entry would take the file past
    `max_bytes` (`full` is then set). `close` writes the end line and the gzip trailer. Raises
    RecordingError when the file cannot be made or written."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        hosts: Sequence[str],
        *,
        interval: float,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Any = time.time,
    ) -> None:
        self.path = os.fspath(path)
        self.clock = clock
        self.max_bytes = max(max_bytes, MIN_MAX_BYTES)
        self.entries = 0
        self.full = False
        self.closed = False
        self._size = 0
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags, 0o600)
        except FileExistsError:
            raise RecordingError(
                f"{printable(self.path)} exists: a recording is never written over (remove it or name another)"
            ) from None
        except OSError as exc:
            raise RecordingError(f"cannot create {printable(self.path)}: {exc.strerror or exc}") from None
        self._raw: BinaryIO = os.fdopen(fd, "wb")
        self._gz = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=6, mtime=0)
        started = self.clock()
        self.header = Header(
            started=started,
            utc_offset=local_offset(started),
            hosts=tuple(hosts),
            interval=interval,
            created_by=f"gputui {__version__}",
            max_bytes=self.max_bytes,
        )
        self._put(wire.dumps(self.header.describe()).encode("ascii") + b"\n")

    @property
    def size(self) -> int:
        """Compressed bytes in the file so far (every entry is flushed through)."""
        return self._size if self.closed else self._raw.tell()

    def write(self, host: str, kind: str, record: dict[str, Any], t: float | None = None) -> bool:
        if self.full or self.closed:
            return False
        entry = {
            "t": round(self.clock() if t is None else t, 3),
            "host": host,
            "kind": kind,
            "record": record,
        }
        data = wire.dumps(entry).encode("ascii") + b"\n"
        if len(data) > MAX_ENTRY:
            return True  # longer than any reader takes (a probe's line is bounded far below): dropped
        # Deflate's worst case for incompressible data: 5 bytes a 16 KiB block, and the flush's own.
        worst = len(data) + 5 * (len(data) // 16384 + 1) + 16
        if self.size + worst + RESERVE > self.max_bytes:
            self.full = True
            return False
        self._put(data)
        self.entries += 1
        return True

    def close(self, reason: str) -> None:
        """The end line (`reason`: seconds, interrupted, cap, signal...) and the gzip trailer."""
        if self.closed:
            return
        self.closed = True
        end = {"t": round(self.clock(), 3), "host": "", "kind": "end"}
        end["record"] = {"reason": reason, "entries": self.entries}
        try:
            self._gz.write(wire.dumps(end).encode("ascii") + b"\n")
            self._gz.close()
            self._raw.flush()
            self._size = self._raw.tell()
            os.fsync(self._raw.fileno())
        except OSError as exc:
            raise RecordingError(f"cannot write {printable(self.path)}: {exc.strerror or exc}") from None
        finally:
            self._raw.close()

    def abandon(self) -> None:
        """Close the file without an end line (it reads as cut short): after a write failed."""
        if not self.closed:
            self.closed = True
            try:
                self._size = self._raw.tell()
                self._raw.close()
            except OSError:
                pass

    def _put(self, data: bytes) -> None:
        try:
            self._gz.write(data)
            self._gz.flush(zlib.Z_SYNC_FLUSH)
        except OSError as exc:
            self.abandon()
            raise RecordingError(f"cannot write {printable(self.path)}: {exc.strerror or exc}") from None


# -- reading ---------------------------------------------------------------------------------------


class RecordingReader:
    """A recording read one entry at a time: the header at once (RecordingError when the file is no
    recording this gputui reads), then `entries()`. Use as a context manager, or `close()`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.name = printable(self.path)
        self.line = 0  # the last line read
        self.truncated = False  # the file ends mid-way: read to its last whole entry
        self.ended: Entry | None = None  # the end line, when the recorder closed the file in order
        self.last_t: float | None = None  # the time of the last entry read
        self._buffer = bytearray()
        self._eof = False
        self._stream: Any = None
        fd = self._open()
        try:
            raw = os.fdopen(fd, "rb")
        except OSError:
            os.close(fd)
            raise
        try:
            magic = raw.read(2)
            raw.seek(0)
        except OSError as exc:
            raw.close()
            raise RecordingError(f"{self.name}: cannot read it: {exc.strerror or exc}") from None
        self._raw = raw
        self.compressed = magic == GZIP_MAGIC
        self._stream = gzip.GzipFile(fileobj=raw, mode="rb") if self.compressed else raw
        try:
            self.header = self._header()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> RecordingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for stream in (self._stream, self._raw):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def _open(self) -> int:
        """A descriptor on a regular file (a FIFO or a device is refused before it is read)."""
        try:
            info = os.stat(self.path)
        except OSError as exc:
            raise RecordingError(f"{self.name}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(info.st_mode):
            raise RecordingError(f"{self.name} is not a regular file")
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise RecordingError(f"{self.name}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between the look and the open
            os.close(fd)
            raise RecordingError(f"{self.name} is not a regular file")
        return fd

    # -- lines

    def _fill(self) -> None:
        try:
            chunk = self._stream.read1(READ_CHUNK)  # one read: data before a cut is never lost with it
        except EOFError:  # the compressed stream ends before its end marker: cut short
            self._eof, self.truncated = True, True
            return
        except (OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            what = "a corrupt compressed stream" if self.compressed else "cannot read it"
            raise RecordingError(f"{self.name}: after line {self.line}: {what} ({exc})") from None
        if not chunk:
            self._eof = True
        else:
            self._buffer += chunk

    def _next_line(self, limit: int) -> bytes | None:
        """The next line without its newline; None at the end (a last line without its newline
        is returned too: whether it is whole, parsing says)."""
        start = 0
        while True:
            end = self._buffer.find(b"\n", start)
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                self.line += 1
                if len(line) > limit:
                    raise self._too_long(limit)
                return line
            if len(self._buffer) > limit:
                self.line += 1
                raise self._too_long(limit)
            if self._eof:
                if not self._buffer:
                    return None
                line = bytes(self._buffer)
                self._buffer.clear()
                self.line += 1
                return line
            start = len(self._buffer)
            self._fill()

    def _too_long(self, limit: int) -> RecordingError:
        return RecordingError(
            f"{self.name}: line {self.line} is longer than {limit >> 20} MiB, more than any entry: "
            "not a recording gputui wrote (damaged?)"
        )

    def _parse(self, line: bytes, what: str) -> Any:
        try:
            return wire.loads(line.decode("utf-8"))
        except RecursionError:
            raise RecordingError(f"{self.name}: line {self.line}: {what} nested too deeply") from None
        except (UnicodeDecodeError, ValueError) as exc:
            raise RecordingError(
                f"{self.name}: line {self.line}: {what} is not JSON ({printable(str(exc))[:120]})"
            ) from None

    # -- the header

    def _header(self) -> Header:
        line = self._next_line(MAX_HEADER)
        if line is None:
            if self.truncated:
                raise RecordingError(f"{self.name}: cut short before its header: nothing recorded")
            raise RecordingError(f"{self.name} is empty: not a gputui recording")
        try:
            doc = wire.loads(line.decode("utf-8"))
        except (RecursionError, UnicodeDecodeError, ValueError):
            doc = None
        if not isinstance(doc, dict) or "gputui_recording" not in doc:
            raise RecordingError(
                f"{self.name} is not a gputui recording (its first line is no recording header)"
            )
        version = doc.get("gputui_recording")
        if type(version) is not int or version != FORMAT:
            raise RecordingError(
                f"{self.name}: recording format {printable(repr(version))[:40]}; this gputui reads "
                f"format {FORMAT} (written by {printable(str(doc.get('created_by')))[:40]})"
            )
        started = _time(doc.get("started"))
        offset = doc.get("utc_offset")
        hosts = doc.get("hosts")
        interval = doc.get("interval")
        if started is None:
            raise self._bad_header("no start time")
        if type(offset) is not int or abs(offset) > 18 * 3600:
            raise self._bad_header("no UTC offset (whole seconds, at most 18 hours)")
        if (
            not isinstance(hosts, list)
            or not 1 <= len(hosts) <= MAX_HOSTS
            or not all(isinstance(h, str) and 1 <= len(h) <= MAX_NAME for h in hosts)
        ):
            raise self._bad_header(f"its hosts must be 1 to {MAX_HOSTS} names of 1 to {MAX_NAME} characters")
        if len(set(hosts)) != len(hosts):
            raise self._bad_header("a host is named twice")
        if wire.interval_problem(interval) is not None:  # a number of seconds, not a bool, in range
            raise self._bad_header("no sample interval")
        created = doc.get("created_by")
        cap = doc.get("max_bytes")
        return Header(
            started=started,
            utc_offset=offset,
            hosts=tuple(hosts),
            interval=float(interval),  # type: ignore[arg-type]  # checked above
            created_by=printable(created)[:80] if isinstance(created, str) else "",
            max_bytes=cap if type(cap) is int and cap > 0 else None,
        )

    def _bad_header(self, why: str) -> RecordingError:
        return RecordingError(f"{self.name}: a damaged recording header: {why}")

    # -- the entries

    def entries(self) -> Iterator[Entry]:
        """Every entry, in the file's order, checked; RecordingError at the first damaged line. A
        file cut short ends at its last whole entry (`truncated`); the end line is kept in `ended`
        and is the last entry given."""
        hosts = set(self.header.hosts)
        while True:
            line = self._next_line(MAX_ENTRY)
            if line is None:
                if self.ended is None:
                    self.truncated = True  # no end line: the recorder did not close it
                return
            if not line.strip():
                continue
            if self.ended is not None:
                raise RecordingError(f"{self.name}: line {self.line}: an entry after the end line")
            try:
                entry = self._entry(line, hosts)
            except RecordingError:
                if self._eof and not self._buffer:
                    self.truncated = True  # the last line, cut short with the file
                    return
                raise
            self.last_t = entry.t
            if entry.kind == "end":
                self.ended = entry
            yield entry

    def _entry(self, line: bytes, hosts: set[str]) -> Entry:
        doc = self._parse(line, "the entry")
        if not isinstance(doc, dict):
            raise self._bad("an entry must be a JSON object")
        t, host, kind, record = _time(doc.get("t")), doc.get("host"), doc.get("kind"), doc.get("record")
        if t is None:
            raise self._bad("no time (t)")
        if kind not in KINDS:
            raise self._bad(f"unknown kind {printable(repr(kind))[:40]}")
        if not isinstance(record, dict):
            raise self._bad("no record")
        if kind == "end":
            if host != "":
                raise self._bad("the end line names a host")
        elif not isinstance(host, str) or host not in hosts:
            shown = printable(repr(host))[:60]
            raise self._bad(f"host {shown} is not one of the header's")
        if kind == "probe":
            checked, problem = wire.check(record, wire.PROBE_TYPES)
            record = checked if checked is not None else (problem or {})  # as a probe's link hands it on
        elif kind == "status":
            record = self._status(record)
        return Entry(t=t, host=host, kind=kind, record=record, line=self.line)

    def _status(self, record: dict[str, Any]) -> dict[str, Any]:
        status = record.get("status")
        if status not in HOST_STATUSES:
            raise self._bad(f"unknown host status {printable(repr(status))[:40]}")
        out: dict[str, Any] = {"status": status}
        for key in ("reason", "detail"):
            value = record.get(key)
            if value is not None and not isinstance(value, str):
                raise self._bad(f"a status's {key} must be text")
            out[key] = value[:MAX_TEXT] if isinstance(value, str) else None
        return out

    def _bad(self, why: str) -> RecordingError:
        return RecordingError(
            f"{self.name}: line {self.line}: {why}: not a recording gputui wrote (damaged?)"
        )


def _time(value: Any) -> float | None:
    """`value` as a Unix time a recorder's clock could have given, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and 0 < value < _NEWEST else None


# -- the state at a moment -----------------------------------------------------------------------------


@dataclass
class HostAt:
    """One host as the recording knew it at a moment: its last hello and sample, and whether its
    link was down after that sample (with the recorded reason)."""

    hello: dict[str, Any] | None = None
    sample: dict[str, Any] | None = None
    sample_t: float | None = None
    down: tuple[str | None, str | None] | None = None  # (reason, detail) when down since the sample
    down_t: float | None = None


@dataclass
class StateAt:
    at: float
    hosts: dict[str, HostAt]
    last_t: float | None  # the time of the last entry read (the end, when `at` is past it)
    past_end: bool  # every entry was read and `at` is after the last one


def state_at(reader: RecordingReader, at: float) -> StateAt:
    """The hosts at `at`: each one's last sample at or before it (file order; reading stops at the
    first entry after `at`). RecordingError as `entries` raises it."""
    hosts = {name: HostAt() for name in reader.header.hosts}
    last: float | None = None
    for entry in reader.entries():
        if entry.t > at:
            return StateAt(at, hosts, last, past_end=False)
        last = entry.t
        state = hosts.get(entry.host)
        if state is None:
            continue  # the end line
        if entry.kind == "probe":
            kind = entry.record.get("type")
            if kind == "hello":  # (re)connected: the sample before stays until the next one
                state.hello, state.down = entry.record, None
            elif kind == "sample":
                state.sample, state.sample_t, state.down = entry.record, entry.t, None
        elif entry.kind == "status" and entry.record["status"] == "down":
            state.down, state.down_t = (entry.record["reason"], entry.record["detail"]), entry.t
    return StateAt(at, hosts, last, past_end=last is None or at > last)


def action_event(record: dict[str, Any]) -> dict[str, Any] | None:
    """An audit-log line (an `action` entry) as the probe event record a replay shows in the action
    log; None for a line that is no plan's. Every field goes on to gputui.model.Event's checks."""
    action = record.get("action")
    if not isinstance(action, str):
        return None
    kind = record.get("kind")
    stage = record.get("stage")
    out: dict[str, Any] = {
        "type": "event",
        "v": wire.VERSION,
        "plan": action,
        "time": record.get("time"),
        "stage": stage if isinstance(stage, str) else kind if isinstance(kind, str) else "?",
        "data": {"recorded": True},
    }
    for key in ("result", "pid", "start_time", "gpu", "signal", "message"):
        out[key] = record.get(key)
    return out

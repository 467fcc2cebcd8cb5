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

Checkpoints (format 2). Every `checkpoint_every` bytes of entries (and at least four times the
last checkpoint's own size apart) the writer ends the gzip member and begins another whose gzip header
carries a mark (an extra field: MARK and the time as a double), then a `checkpoint` line (host "",
{"last", "line", "entries"}) and each host's state restated: its last hello, last sample and the down
status after it, each as the entry it was (same time) with `"again": true`. The checkpoint's time is
the largest entry time before it, so marks never go back in time and every entry before a checkpoint
is at or before its time: `--at` finds the last mark at or before the moment by a binary search over
the file's bytes, checks the checkpoint line it points to (a mark that does not match is not used:
the file is read from its start) and reads from there (`state_at`). A replay of the whole file skips
checkpoints and restated entries (`entries()`). Any gzip reader reads the file (a gzip file may hold
several members; the extra field is skipped). Format 1 (no checkpoints) is read as it always was.

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
import struct
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from .. import __version__
from ..config.userfile import FileRefused, open_regular
from ..model import HOST_STATUSES
from ..model.textsafe import cut, printable, shortened
from ..probe import wire

FORMAT = 2  # the header's "gputui_recording": what this gputui writes
FORMATS = (1, 2)  # what it reads (1: no checkpoints)
KINDS = ("probe", "status", "action", "end", "checkpoint")
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
MARK_CHUNK = 1 << 14  # bytes read at a time looking for a mark (a probe reads to the next one)
GZIP_MAGIC = b"\x1f\x8b"
# A gzip member's header as the writer makes it: no name, no time, OS unknown; a checkpoint's member
# has an extra field (FLG.FEXTRA) of one subfield, "GT", that holds b"gputuick" and its time.
PLAIN_MEMBER = GZIP_MAGIC + b"\x08\x00" + bytes(4) + b"\x00\xff"
MARK = (
    GZIP_MAGIC
    + b"\x08\x04"
    + bytes(4)
    + b"\x00\xff"
    + struct.pack("<H", 20)
    + b"GT"
    + struct.pack("<H", 16)
    + b"gputuick"
)
CHECKPOINT_EVERY = 8 << 20  # bytes of entries between two checkpoints (at the least)
CHECKPOINT_SHARE = 4  # ... and at least this many times the last checkpoint's own size
# Bytes a replay's `--at` expands at most (GPUTUI_REPLAY_MAX_READ): a file with checkpoints needs
# about one checkpoint's span; one without is read from its start, at roughly 50-100 MB a second.
DEFAULT_MAX_READ = 1 << 30
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
    again: bool = False  # a checkpoint's restatement of an earlier entry


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
    recording's). Raises ValueError with what is wrong: a moment no recording can hold (before 1970,
    past the newest time a recorder's clock gives, _NEWEST: as the reader refuses such a time in a
    file, and the clock that shows it would overflow) is said to be in none."""
    text = text.strip()
    moment = _moment_of(text, header)
    if not 0 < moment < _NEWEST:
        raise ValueError(
            f"{text!r} is not in any recording (the times a recorder's clock gives are 1970 to 5138)"
        )
    return moment


def _moment_of(text: str, header: Header) -> float:
    """parse_at's moment, before it is bounded."""
    if not text or len(text) > 64 or not text.isascii():
        raise ValueError(f"{cut(text, 64)!r} is no time (HH:MM[:SS], an ISO timestamp or +SECONDS)")
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


class _Members:
    """gzip members written by hand (gzip.GzipFile writes one member, and no extra field): each write
    flushed through (Z_SYNC_FLUSH), a member ended and the next begun wherever the writer asks."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self._begin(PLAIN_MEMBER)

    def _begin(self, header: bytes) -> None:
        self.raw.write(header)
        self.deflate = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        self.crc = 0
        self.length = 0

    def write(self, data: bytes) -> None:
        self.raw.write(self.deflate.compress(data) + self.deflate.flush(zlib.Z_SYNC_FLUSH))
        self.raw.flush()
        self.crc = zlib.crc32(data, self.crc)
        self.length += len(data)

    def end(self) -> None:
        self.raw.write(
            self.deflate.flush(zlib.Z_FINISH) + struct.pack("<II", self.crc, self.length & 0xFFFFFFFF)
        )
        self.raw.flush()

    def next(self, t: float) -> None:
        """The member ended, and one marked with time `t` begun."""
        self.end()
        self._begin(MARK + struct.pack("<d", t))


def _worst(n: int) -> int:
    """Compressed bytes `n` bytes can take at the worst (deflate's stored blocks, a flush's own)."""
    return n + 5 * (n // 16384 + 1) + 16


class RecordingWriter:
    """Appends entries to a new recording at `path` (never an existing file, never through a
    symlink; mode 0600: it holds command lines and user names). Each `write` is flushed through the
    compressor; `write` returns False, writing nothing, once the next entry would take the file past
    `max_bytes` (`full` is then set). A checkpoint follows an entry every `checkpoint_every` bytes
    (None: never; the module's docstring says what it holds). `close` writes the end line and the
    gzip trailer. Raises RecordingError when the file cannot be made or written."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        hosts: Sequence[str],
        *,
        interval: float,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Any = time.time,
        checkpoint_every: int | None = CHECKPOINT_EVERY,
    ) -> None:
        self.path = os.fspath(path)
        self.clock = clock
        self.max_bytes = max(max_bytes, MIN_MAX_BYTES)
        self.checkpoint_every = checkpoint_every
        self._next_checkpoint = checkpoint_every if checkpoint_every is not None else math.inf
        self._since = 0  # bytes of entries since the last checkpoint
        self._lines = 1  # lines written (the header's)
        self._newest: float | None = None  # the largest entry time so far
        self._last: float | None = None  # the last entry's time
        self._hosts = {name: HostAt() for name in hosts}
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
        self._gz = _Members(self._raw)
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
        when = round(self.clock() if t is None else t, 3)
        entry = {
            "t": when,
            "host": host,
            "kind": kind,
            "record": record,
        }
        data = wire.dumps(entry).encode("ascii") + b"\n"
        if len(data) > MAX_ENTRY:
            return True  # longer than any reader takes (a probe's line is bounded far below): dropped
        if self.size + _worst(len(data)) + RESERVE > self.max_bytes:
            self.full = True
            return False
        self._put(data)
        self.entries += 1
        self._lines += 1
        self._since += len(data)
        self._last = when
        self._newest = when if self._newest is None else max(self._newest, when)
        state = self._hosts.get(host)
        if state is not None:
            state.take(kind, record, when)
        if self._since >= self._next_checkpoint:
            self._checkpoint()
        return True

    def _checkpoint(self) -> None:
        """A new member, marked, that begins with each host's state (skipped when the cap is near)."""
        newest = self._newest if self._newest is not None else self.header.started
        lines = [
            {
                "t": newest,
                "host": "",
                "kind": "checkpoint",
                "record": {"last": self._last, "line": self._lines + 1, "entries": self.entries},
            }
        ]
        for name, state in self._hosts.items():
            lines.extend(state.restated(name))
        data = b"".join(wire.dumps(line).encode("ascii") + b"\n" for line in lines)
        if self.size + len(MARK) + 16 + _worst(len(data)) + RESERVE > self.max_bytes:
            self._next_checkpoint = math.inf  # the end of the file is near: no room for one
            return
        self._gz.next(newest)
        self._put(data)
        self._lines += len(lines)
        self._since = 0
        self._next_checkpoint = max(self.checkpoint_every or 0, CHECKPOINT_SHARE * len(data))

    def close(self, reason: str) -> None:
        """The end line (`reason`: seconds, interrupted, cap, signal...) and the gzip trailer."""
        if self.closed:
            return
        self.closed = True
        end = {"t": round(self.clock(), 3), "host": "", "kind": "end"}
        end["record"] = {"reason": reason, "entries": self.entries}
        try:
            self._gz.write(wire.dumps(end).encode("ascii") + b"\n")
            self._gz.end()
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
        self.expanded = 0  # bytes of lines read (decompressed), all told
        self.scanned = 0  # bytes of the file read looking for checkpoints' marks
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
            return open_regular(self.path)
        except FileRefused as exc:
            sep = " " if exc.kind == "type" else ": "  # "F is not a regular file", "F: No such file"
            raise RecordingError(f"{self.name}{sep}{exc.reason}") from None

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
            self.expanded += len(chunk)

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
                f"{self.name}: line {self.line}: {what} is not JSON ({cut(str(exc), 120)})"
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
        if type(version) is not int or version not in FORMATS:
            raise RecordingError(
                f"{self.name}: recording format {cut(repr(version), 40)}; this gputui reads "
                f"formats {FORMATS[0]} to {FORMATS[-1]} (written by {cut(str(doc.get('created_by')), 40)})"
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
            created_by=cut(created, 80) if isinstance(created, str) else "",
            max_bytes=cap if type(cap) is int and cap > 0 else None,
            format=version,
        )

    def _bad_header(self, why: str) -> RecordingError:
        return RecordingError(f"{self.name}: a damaged recording header: {why}")

    # -- the entries

    def entries(self, checkpoints: bool = False) -> Iterator[Entry]:
        """Every entry, in the file's order, checked; RecordingError at the first damaged line. A
        file cut short ends at its last whole entry (`truncated`); the end line is kept in `ended`
        and is the last entry given. Checkpoints and their restated entries only with
        `checkpoints`."""
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
            if entry.kind == "checkpoint" or entry.again:
                if checkpoints:
                    yield entry
                continue
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
            raise self._bad(f"unknown kind {cut(repr(kind), 40)}")
        if not isinstance(record, dict):
            raise self._bad("no record")
        again = doc.get("again", False)
        if kind == "checkpoint" or again is not False:
            self._checkpoint_entry(kind, host, record, again)
        if kind in ("end", "checkpoint"):
            if host != "":
                raise self._bad(f"the {kind} line names a host")
        elif not isinstance(host, str) or host not in hosts:
            shown = cut(repr(host), 60)
            raise self._bad(f"host {shown} is not one of the header's")
        if kind == "probe":
            checked, problem = wire.check(record, wire.PROBE_TYPES)
            record = checked if checked is not None else (problem or {})  # as a probe's link hands it on
        elif kind == "status":
            record = self._status(record)
        return Entry(t=t, host=host, kind=kind, record=record, line=self.line, again=again)

    def _checkpoint_entry(self, kind: Any, host: Any, record: dict[str, Any], again: Any) -> None:
        """A checkpoint line or a restated entry is checked as what it must be."""
        if self.header.format < 2:
            raise self._bad(f"format {self.header.format} has no checkpoints")
        if kind == "checkpoint":
            line, count = record.get("line"), record.get("entries")
            if again is not False or type(line) is not int or type(count) is not int or line < 2 or count < 0:
                raise self._bad("a damaged checkpoint")
            if record.get("last") is not None and _time(record.get("last")) is None:
                raise self._bad("a damaged checkpoint")
        elif again is not True or kind not in ("probe", "status"):
            raise self._bad("a damaged restated entry")

    # -- seeking

    def seek_before(self, at: float) -> Entry | None:
        """Moves the reader to the last checkpoint at or before `at` and returns its line (the
        entries after it are read next); None, the reader where it was, when there is none to use:
        a format-1 or plain file, `at` before the first checkpoint, or a mark that does not match
        the checkpoint it points to (a damaged or lying file: it is read from its start instead)."""
        if not self.compressed or self.header.format < 2 or self.line != 1:
            return None
        mark = self._find_mark(at, os.fstat(self._raw.fileno()).st_size)
        if mark is None:
            return None
        offset, t = mark
        try:
            self._restart(offset)
            line = self._next_line(MAX_ENTRY)
            entry = self._entry(line, set(self.header.hosts)) if line is not None else None
        except RecordingError:
            entry = None
        if entry is None or entry.kind != "checkpoint" or entry.t != t or self.truncated:
            self._restart(0)
            self._header()
            return None
        self.line = entry.record["line"]
        return entry

    def _restart(self, offset: int) -> None:
        """Decompress from the gzip member at `offset` on."""
        try:
            self._raw.seek(offset)
        except OSError as exc:
            raise RecordingError(f"{self.name}: cannot read it: {exc.strerror or exc}") from None
        self._stream = gzip.GzipFile(fileobj=self._raw, mode="rb")
        self._buffer.clear()
        self._eof = self.truncated = False
        self.line = 0

    def _find_mark(self, at: float, size: int) -> tuple[int, float] | None:
        """The last mark at or before `at`: (its offset, its time), by a binary search over the file's
        bytes (marks never go back in time in a file gputui wrote; a file whose do is caught when
        the checkpoint is checked, or reads more than it needs)."""
        lo, hi = 1, size  # the first member has no mark
        best = None
        while lo < hi:
            mid = (lo + hi) // 2
            mark = self._next_mark(mid, hi)
            if mark is not None and mark[1] <= at:
                best = mark
                lo = mark[0] + 1
            else:
                hi = mid
        return best

    def _next_mark(self, start: int, end: int) -> tuple[int, float] | None:
        """The first mark that begins in [start, end) with a time a recorder could have written."""
        keep = len(MARK) + 8 - 1
        position, tail = start, b""
        while position < end:  # OSError: a file that cannot be read is no file to seek in
            # pread: the stream being read keeps its place when no mark is used
            chunk = os.pread(self._raw.fileno(), min(MARK_CHUNK, end - position + keep), position)
            if not chunk:
                return None
            self.scanned += len(chunk)
            data, base = tail + chunk, position - len(tail)
            found = data.find(MARK)
            while found >= 0 and base + found < end:
                stamp = data[found + len(MARK) : found + len(MARK) + 8]
                if len(stamp) < 8:
                    break  # read it whole with the next chunk
                t = _time(struct.unpack("<d", stamp)[0])
                if t is not None:
                    return base + found, t
                found = data.find(MARK, found + 1)
            tail = data[-keep:]
            position += len(chunk)
        return None

    def _status(self, record: dict[str, Any]) -> dict[str, Any]:
        status = record.get("status")
        if status not in HOST_STATUSES:
            raise self._bad(f"unknown host status {cut(repr(status), 40)}")
        out: dict[str, Any] = {"status": status}
        for key in ("reason", "detail"):
            value = record.get(key)
            if value is not None and not isinstance(value, str):
                raise self._bad(f"a status's {key} must be text")
            out[key] = shortened(value, MAX_TEXT) if isinstance(value, str) else None
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
    hello_t: float | None = None

    def take(self, kind: str, record: dict[str, Any], t: float) -> None:
        """What one entry of this host changes."""
        if kind == "probe":
            what = record.get("type")
            if what == "hello":  # (re)connected: the sample before stays until the next one
                self.hello, self.hello_t, self.down, self.down_t = record, t, None, None
            elif what == "sample":
                self.sample, self.sample_t, self.down, self.down_t = record, t, None, None
        elif kind == "status" and record.get("status") == "down":
            self.down, self.down_t = (record.get("reason"), record.get("detail")), t

    def restated(self, host: str) -> list[dict[str, Any]]:
        """The entries that, taken in order, give this state again (a checkpoint's)."""
        out = []
        if self.hello is not None:
            out.append(
                {"t": self.hello_t, "host": host, "kind": "probe", "record": self.hello, "again": True}
            )
        if self.sample is not None:
            out.append(
                {"t": self.sample_t, "host": host, "kind": "probe", "record": self.sample, "again": True}
            )
        if self.down is not None:
            reason, detail = self.down
            down = {"status": "down", "reason": reason, "detail": detail}
            out.append({"t": self.down_t, "host": host, "kind": "status", "record": down, "again": True})
        return out


@dataclass
class StateAt:
    at: float
    hosts: dict[str, HostAt]
    last_t: float | None  # the time of the last entry read (the end, when `at` is past it)
    past_end: bool  # every entry was read and `at` is after the last one


def state_at(
    reader: RecordingReader, at: float, *, seek: bool = True, max_read: int = DEFAULT_MAX_READ
) -> StateAt:
    """The hosts at `at`: each one's last sample at or before it (file order; reading stops at the
    first entry after `at`), read from the last checkpoint at or before it where the file has one
    (`seek`). RecordingError as `entries` raises it, and when more than `max_read` bytes of lines
    would be read."""
    hosts = {name: HostAt() for name in reader.header.hosts}
    last: float | None = None
    checkpoint = reader.seek_before(at) if seek else None
    if checkpoint is not None:
        last = checkpoint.record.get("last")
    for entry in reader.entries(checkpoints=True):
        if reader.expanded > max_read:
            raise RecordingError(
                f"{reader.name}: {size_words(max_read)} read without reaching {clock_words(at, reader.header)}: "
                "the most --at reads (GPUTUI_REPLAY_MAX_READ=SIZE reads more)"
            )
        if entry.kind == "checkpoint":
            continue  # what it restates follows
        if not entry.again:
            if entry.t > at:
                return StateAt(at, hosts, last, past_end=False)
            last = entry.t
        state = hosts.get(entry.host)
        if state is not None:  # not the end line
            state.take(entry.kind, entry.record, entry.t)
    return StateAt(at, hosts, last, past_end=last is None or at > last)


def size_words(n: int) -> str:
    """`1 MiB`, `1.5 GiB`, `640 KiB`, `100 bytes`."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.4g} {unit}"
    return f"{n} bytes"


PROCESS_FIELDS = ("name", "command", "gpus")  # what a live event says of its process (Proc.identity)


class ActionEvents:
    """Audit-log lines (`action` entries) as the probe events a replay shows in the action log, each
    with what the live event said of its process: its name, command and GPUs. The audit log keeps
    the command on every line but the GPUs only on the plan's line for the process (its intent) and
    on verdicts, so what an intent said is kept for the plan's later lines of that process, until
    the plan's `done` (a bounded memory: only plans under way)."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, int], dict[str, Any]] = {}

    def event(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """The event record of one line; None for a line that is no plan's. Every field goes on to
        gputui.model.Event's checks."""
        action = record.get("action")
        if not isinstance(action, str):
            return None
        kind, stage, pid = record.get("kind"), record.get("stage"), record.get("pid")
        data = record.get("data")
        process = {k: v for k, v in (data if isinstance(data, dict) else {}).items() if k in PROCESS_FIELDS}
        process.update({k: record[k] for k in PROCESS_FIELDS if record.get(k) is not None})
        if isinstance(pid, int) and not isinstance(pid, bool):
            known = self._known.setdefault((action, pid), {})
            known.update(process)
            process = dict(known)
        if stage == "done" or kind == "done":
            self._known = {k: v for k, v in self._known.items() if k[0] != action}
        out: dict[str, Any] = {
            "type": "event",
            "v": wire.VERSION,
            "plan": action,
            "time": record.get("time"),
            "stage": stage if isinstance(stage, str) else kind if isinstance(kind, str) else "?",
            "data": {**(data if isinstance(data, dict) else {}), **process, "recorded": True},
        }
        for key in ("result", "pid", "start_time", "gpu", "signal", "message"):
            out[key] = record.get(key)
        return out

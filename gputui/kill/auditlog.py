"""The durable audit log of kill actions: JSONL, one record per line, each line fsync'd.

Write-ahead: the plan and one `intent` line per process to be signalled are on disk BEFORE the plan is
sent to the probe; then one line per event as it comes (signals, waits, verdicts) and a `done` line.
If gputui dies mid-action (SIGKILL, power loss), the next start finds intents with no result and
reports them: `unfinished()`. A reported action gets a `reported` line so it is reported once.

Every line carries: v, kind, action (the plan id), time (Unix seconds), at (local ISO time), owner_pid,
owner_start, owner_boot (the process that wrote it, below), operator, host, pid, start_time, user,
command, signal, stage, result, message, memory_before, memory_after (null where they do not apply).
Kinds: plan, intent, event, verdict, done, reported. A `done` whose result is outcome-unknown does not
end an action: it is reported at the next start like one that never got a `done`.

Reading tolerates a torn last line (a crash mid-write), any line that does not parse and any record
whose fields have the wrong types: such lines are counted or their fields ignored, never fatal, and
they never hide the real unfinished actions. Appending after a torn line first ends it, so the torn
bytes cannot glue themselves to the next record.

On a bad day (a full disk, a read-only filesystem, a directory or a symlink where the log should be)
every write either lands whole or raises `AuditError`, an OSError whose message says what is wrong
and where: a short write is continued, never left torn. `ensure_room` checks the free space a plan
will need before anything is sent.

The log's path is opened the same way to read it (at every start) as to write it (`open_log`), or
refused with `UnsafeLog`: the last component is never a symlink and must be a regular file (a FIFO, a
device or a directory is refused before it is opened) with one link, owned by root or the user
running gputui (root: by root). The path is walked from / one directory at a time (openat): a
directory that another user controls (owned by another uid, or writable by others and not sticky)
holds no component, and a symlink on the way is followed only when no other user could have placed
it. A start reads only the last `TAIL_BYTES` of the log (`unfinished`), with bounded reads.

Every record names the process that wrote it (owner_pid, owner_start: its start time in clock ticks
since boot, /proc/PID/stat field 22; owner_boot: the kernel's boot id), so that a start does not
report another run's plan, still going, as unfinished (nor mark it reported): only once that process
is gone (no such PID with that start time in this boot, or a zombie). Records without these fields
(logs written before them) are judged by the records alone, as then.
"""

from __future__ import annotations

import datetime as _dt
import errno
import getpass
import json
import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import Event, done_event
from ..words import count
from .plan import Plan, Target

LOG_VERSION = 1
# What a start reads of the log to report unfinished plans: its last 4 MiB. A run of `gputui clean`
# writes ~13 KiB (a plan, its intents, a few dozen events, the verdicts), so this holds the last ~300
# plans; a plan that died further back than that, with no start in between, is not reported.
TAIL_BYTES = 4 << 20
MAX_SYMLINKS = 40  # as the kernel's own limit on a path lookup
# Room a plan's records need, at most: the plan and its intents, a dozen events per process, the
# verdicts. Generous on purpose: running out halfway costs more than refusing to start.
ROOM_BASE = 256 << 10
ROOM_PER_PROCESS = 32 << 10
FIELDS = (
    "operator",
    "host",
    "pid",
    "start_time",
    "user",
    "command",
    "signal",
    "stage",
    "result",
    "message",
    "memory_before",
    "memory_after",
)


class AuditError(OSError):
    """The audit log cannot be written (or opened safely): the message says what and where."""


class UnsafeLog(AuditError):
    """The log's path is not safe to open, to read or to write: not a regular file, a symlink, another
    user's file, or a path another user could point elsewhere. A usage error: pass --log PATH."""


def default_log_path() -> Path:
    from platformdirs import user_state_dir

    return Path(user_state_dir("gputui")) / "actions.jsonl"


class ActionLog:
    """Appends records to `path` (created 0600, its directory 0700); every line is flushed and fsync'd.

    One os.write per line on an O_APPEND descriptor, so two gputui processes sharing a log never
    interleave within a line."""

    def __init__(self, path: str | os.PathLike[str] | None = None, operator: str | None = None) -> None:
        self.path = Path(path) if path is not None else default_log_path()
        self.operator = operator or getpass.getuser()
        self._fd: int | None = None
        self._torn = False  # the last write was cut short (a full disk): the next one ends its line
        self._targets: dict[tuple[str, int], Target] = {}  # (action, pid) -> what the plan said

    # -- writing -------------------------------------------------------------------------------

    def _fail(self, exc: OSError, doing: str) -> AuditError:
        return AuditError(
            exc.errno or errno.EIO, f"audit log {self.path}: cannot {doing}: {exc.strerror or exc}"
        )

    def _open(self) -> int:
        if self._fd is None:
            fd = open_log(self.path, write=True)
            assert fd is not None  # opened for writing: created when missing
            try:
                if _ends_torn(fd):
                    self._write_all(fd, b"\n")
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
        return self._fd

    def _write_all(self, fd: int, data: bytes) -> None:
        """Write every byte (a short write is continued), or raise AuditError."""
        view = memoryview(data)
        try:
            while view:
                written = os.write(fd, view)
                if written <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                view = view[written:]
        except OSError as exc:
            self._torn = len(view) != len(data)
            raise self._fail(exc, "write") from None

    def ensure_room(self, processes: int) -> None:
        """Before a plan is sent: is there room for all its records? Raises AuditError if not."""
        need = ROOM_BASE + ROOM_PER_PROCESS * max(0, processes)
        directory = self.path.parent if self.path.parent.exists() else _existing_parent(self.path)
        try:
            info = os.statvfs(directory)
        except OSError as exc:
            raise self._fail(exc, "check its free space") from None
        free = info.f_bavail * info.f_frsize
        if free < need:
            raise AuditError(
                errno.ENOSPC,
                f"audit log {self.path}: {free >> 10} KiB free, a plan of {count(processes, 'process', 'processes')} needs "
                f"{need >> 10} KiB: nothing sent (free some space, or pass --log PATH)",
            )
        if info.f_flag & os.ST_RDONLY:
            raise AuditError(errno.EROFS, f"audit log {self.path}: read-only filesystem: nothing sent")

    def write(self, kind: str, action: str, **fields: Any) -> dict[str, Any]:
        """Append one record and make it durable before returning (AuditError if it cannot be)."""
        now = time.time()
        record: dict[str, Any] = {
            "v": LOG_VERSION,
            "kind": kind,
            "action": action,
            "time": round(now, 3),
            "at": _dt.datetime.fromtimestamp(now).astimezone().isoformat(timespec="milliseconds"),
        }
        record.update(_owner())
        record.update(dict.fromkeys(FIELDS))
        record["operator"] = self.operator
        record.update(fields)
        line = (json.dumps(record, ensure_ascii=True, separators=(",", ":"), default=str) + "\n").encode()
        fd = self._open()
        if self._torn:  # an earlier write was cut short: end its line first
            self._write_all(fd, b"\n")
            self._torn = False
        self._write_all(fd, line)
        try:
            os.fsync(fd)
        except OSError as exc:
            raise self._fail(exc, "sync it to disk") from None
        return record

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> ActionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the engine records ---------------------------------------------------------------

    def plan(self, plan: Plan, provenance: dict[str, Any] | None = None) -> None:
        """The plan and one intent per process to signal: call BEFORE sending the plan. Raises
        AuditError (nothing sent, then) when the log cannot take the whole plan. `provenance`: the
        state the GPUs were in (gputui.kill.operate), recorded with the plan."""
        self.ensure_room(len(plan.signalled))
        first = plan.signals[0] if plan.signals else "SIGKILL"
        before = {str(g.index): g.memory_used for g in plan.gpus}
        self.write(
            "plan",
            plan.id,
            operator=plan.operator,
            host=plan.host,
            stage="plan",
            result="intent",
            message=f"{plan.title}: {len(plan.signalled)} to signal",  # `Send SIGSTOP to 4121 (...)`
            memory_before=before,
            plan=plan.describe(),
            provenance=provenance,
        )
        for target in plan.signalled:
            self._targets[(plan.id, target.pid)] = target
            self.write(
                "intent",
                plan.id,
                operator=plan.operator,
                host=plan.host,
                pid=target.pid,
                start_time=target.start_time,
                user=target.user,
                command=list(target.command),
                signal=first,
                stage="plan",
                result="intent",
                message=target.why,
                gpus=list(target.gpus),
                memory_before={str(i): b for i, b in target.gpu_memory},
            )

    def event(self, host: str, event: Event) -> None:
        """One probe event (or the fleet's synthetic `done` when the link broke)."""
        data = event.data
        known = self._targets.get((event.plan, event.pid)) if event.pid is not None else None
        kind = {"verdict": "verdict", "done": "done"}.get(event.stage, "event")
        fields: dict[str, Any] = {
            "host": host,
            "pid": event.pid,
            "start_time": event.start_time,
            "user": data.get("user", known.user if known else None),
            "command": data.get("command", list(known.command) if known else None),
            "signal": event.signal,
            "stage": event.stage,
            "result": event.result,
            "message": event.message,
            "gpu": event.gpu,
            "elapsed_ms": data.get("elapsed_ms"),
        }
        if event.stage == "verdict" and event.gpu is not None:
            fields.update(memory_before=data.get("memory_before"), memory_after=data.get("memory_after"))
        if event.stage == "done":
            fields.update(
                memory_before=data.get("memory_before"),
                memory_after=data.get("memory_after"),
                ok=data.get("ok") is True,
                gpus=data.get("gpus"),
            )
        elif event.stage == "verdict":
            fields["data"] = {k: v for k, v in data.items() if k not in ("command", "user")}
        self.write(kind, event.plan, **fields)

    def last_words(self, host: str, action: str, why: str) -> None:
        """gputui ends before `action`'s verdict (the dashboard's hard exit, Ctrl+C during `gputui
        clean`): an outcome-unknown `done` line says so and why, whole and fsync'd as every line is.
        It does not end the action: the next start still reports it as unfinished. Raises
        AuditError when the line cannot be written."""
        self.event(host, done_event(action, "outcome-unknown", last_words_message(why)))

    def acknowledge(self, actions: Iterable[Unfinished]) -> None:
        """Mark unfinished actions as reported, so the next start does not report them again."""
        for action in actions:
            self.write(
                "reported",
                action.action,
                host=action.host,
                stage="startup",
                result="outcome-unknown",
                message=f"reported unfinished: {count(len(action.pending), 'process', 'processes')} without a recorded outcome",
            )


def last_words_message(why: str) -> str:
    """The message of an outcome-unknown `done` that gputui writes as it ends before a verdict."""
    return (
        f"gputui exited before the verdict ({why}) and its probe was ended: what the plan did is not "
        "known here; check these processes and GPUs"
    )


# -- reading -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Intent:
    """A process a plan meant to signal, as its intent line recorded it."""

    pid: int
    start_time: int | None
    user: str | None
    command: tuple[str, ...]
    time: float


@dataclass(frozen=True, slots=True)
class Unfinished:
    """An action whose outcome was never recorded (gputui died while it ran)."""

    action: str
    host: str | None
    operator: str | None
    time: float
    pending: tuple[Intent, ...]  # intents without a verdict
    last_stage: str | None  # the last thing recorded for it

    def describe(self) -> str:
        when = _dt.datetime.fromtimestamp(self.time).strftime("%Y-%m-%d %H:%M:%S")
        pids = ", ".join(str(i.pid) for i in self.pending) or "none"
        return (
            f"action {self.action} on {self.host or '?'} by {self.operator or '?'} at {when}: outcome never "
            f"recorded (last stage: {self.last_stage or 'plan'}); processes: {pids}"
        )


def read_records(path: str | os.PathLike[str], tail: int | None = None) -> tuple[list[dict[str, Any]], int]:
    """Every record that parses, and how many lines did not (a torn last line, say). `tail`: read
    only the file's last `tail` bytes, from the first line that starts in them. The path is opened
    with `open_log`'s checks (UnsafeLog); a log that does not exist has no records."""
    fd = open_log(Path(path), write=False)
    if fd is None:
        return [], 0
    try:
        raw = _read_tail(fd, tail)
    except OSError as exc:
        raise _error(Path(path), exc, "read it") from None
    finally:
        os.close(fd)
    records: list[dict[str, Any]] = []
    bad = 0
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(record, dict) and isinstance(record.get("action"), str):
            records.append(record)
        else:
            bad += 1
    return records, bad


Owner = tuple[int, int, str]  # the process that wrote a record: PID, start time (ticks since boot), boot id


def unfinished(
    path: str | os.PathLike[str],
    tail: int | None = TAIL_BYTES,
    running: Callable[[Owner], bool] | None = None,
) -> list[Unfinished]:
    """Actions that have intents but neither a `done` nor a `reported` line, and whose process is gone,
    oldest first; read from the log's last `tail` bytes. `running(owner)`: whether the process that
    wrote an action still runs it (default: that process exists, with that start time, in this boot,
    and is not this one, which knows its own plans). An action whose records name no process (a log
    written before they did) is judged by its records alone, as then."""
    still = running or _still_running
    records, _ = read_records(path, tail)
    by_action: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_action.setdefault(record["action"], []).append(record)
    out = []
    for action, lines in by_action.items():
        kinds = {r.get("kind") for r in lines if isinstance(r.get("kind"), str)}
        if "intent" not in kinds and "plan" not in kinds:
            continue
        if "reported" in kinds:
            continue
        # A done line ends an action, unless its outcome is unknown (the link broke, the probe went
        # silent): then nobody knows what happened, and the next start must say so.
        ends = [r for r in lines if r.get("kind") == "done"]
        if ends and any(r.get("result") != "outcome-unknown" for r in ends):
            continue
        # Another run, still going, will record its outcome: reporting (and acknowledging) it now
        # would hide it for good if that run then died mid-plan.
        owner = _owner_of(lines)
        if owner is not None and still(owner):
            continue
        settled = {r.get("pid") for r in lines if r.get("kind") == "verdict" and _hashable(r.get("pid"))}
        pending = tuple(
            _intent(r)
            for r in lines
            if r.get("kind") == "intent" and (not _hashable(r.get("pid")) or r.get("pid") not in settled)
        )
        first = lines[0]
        out.append(
            Unfinished(
                action=action,
                host=_text(first.get("host")),
                operator=_text(first.get("operator")),
                time=_seconds(first.get("time")),
                pending=tuple(p for p in pending if p is not None),
                last_stage=_text(lines[-1].get("stage")),
            )
        )
    return sorted(out, key=lambda u: u.time)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return 0.0
    return float(value)


def _intent(record: dict[str, Any]) -> Intent | None:
    """An intent line as written; None for one whose PID is not a PID (a damaged or forged line:
    counted out, never fatal, and it hides nothing else)."""
    pid = record.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return None
    start = record.get("start_time")
    command = record.get("command")
    return Intent(
        pid=pid,
        start_time=start if isinstance(start, int) and not isinstance(start, bool) else None,
        user=_text(record.get("user")),
        command=tuple(a for a in command if isinstance(a, str)) if isinstance(command, list) else (),
        time=_seconds(record.get("time")),
    )


def _hashable(value: Any) -> bool:
    return isinstance(value, (int, str, type(None)))


def _existing_parent(path: Path) -> Path:
    for parent in path.parents:
        if parent.exists():
            return parent
    return Path("/")


def _ends_torn(fd: int) -> bool:
    """Whether the file's last line lacks its newline (a write cut short by a crash)."""
    try:
        size = os.fstat(fd).st_size
        return size > 0 and os.pread(fd, 1, size - 1) != b"\n"
    except OSError:
        return False


def _read_tail(fd: int, tail: int | None) -> bytes:
    """The file's bytes, or its last `tail` bytes from the first line that starts in them: never more
    than `tail` + 1 bytes read, however large the file is or grows meanwhile."""
    size = os.fstat(fd).st_size
    start = 0 if tail is None else max(0, size - tail)
    # From the byte before the window: a newline there means the window starts with a whole line.
    offset = start - 1 if start > 0 else 0
    left = None if tail is None else tail + (1 if start > 0 else 0)
    chunks = []
    while left is None or left > 0:
        data = os.pread(fd, 1 << 20 if left is None else min(1 << 20, left), offset)
        if not data:
            break
        chunks.append(data)
        offset += len(data)
        if left is not None:
            left -= len(data)
    raw = b"".join(chunks)
    if start > 0:
        cut = raw.find(b"\n")
        raw = raw[cut + 1 :] if cut >= 0 else b""
    return raw


# -- opening the log's path safely ---------------------------------------------------------------


def open_log(path: Path, *, write: bool) -> int | None:
    """A descriptor on the log: for appending (read-write, created 0600 with its missing directories
    0700) or for reading (None when there is no log). Raises UnsafeLog when the path is not safe to
    use (the module's docstring says what that is), AuditError when it cannot be opened.

    The walk holds each directory open and looks up the next name in it (openat), so nothing another
    user does between a check and the use can redirect it; the checks are those of OpenSSH's
    StrictModes, applied to every directory on the way: root and the user running gputui are trusted,
    and no one else may be able to change an entry the walk goes through."""
    try:
        where, dir_fd, name = _walk(path, create=write)
    except FileNotFoundError:
        if write:
            raise _error(path, OSError(errno.ENOENT, "No such file or directory"), "open it") from None
        return None
    try:
        info = _lstat(name, dir_fd)
        _check_entry(path, where, os.fstat(dir_fd), name, info)
        if info is not None:
            _check_file(path, info)  # before opening: opening a FIFO or a device is an act in itself
        elif not write:
            return None
        flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
        flags |= (os.O_RDWR | os.O_APPEND | os.O_CREAT) if write else os.O_RDONLY
        try:
            fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafeLog(exc.errno, f"audit log {path} is a symbolic link: refused") from None
            if exc.errno == errno.ENOENT and not write:
                return None
            raise _error(path, exc, "open it") from None
        try:
            _check_file(path, os.fstat(fd))  # what was opened, whatever happened since the lstat
            if info is None:
                _fsync(dir_fd)  # the new file's name must survive a crash too
        except BaseException:
            os.close(fd)
            raise
        return fd
    finally:
        os.close(dir_fd)


def _walk(path: Path, create: bool) -> tuple[Path, int, str]:
    """(the directory holding the log, a descriptor on it, the log's name in it): `path` walked from /
    (a relative one from the working directory), one component at a time, following only symlinks that
    no other user could have placed. FileNotFoundError for a missing directory unless `create`."""
    todo = [p for p in os.path.join(os.getcwd(), os.fspath(path)).split("/") if p not in ("", ".")]
    if not todo:
        raise UnsafeLog(errno.EISDIR, f"audit log {path} is not a regular file")
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    where = Path("/")
    links = 0
    try:
        while True:
            name = todo.pop(0)
            if not todo and name != "..":
                return where, fd, name
            if name == "..":  # an entry nobody can replace: up, physically (not by the text)
                step = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd, where = step, where.parent
                if not todo:
                    raise UnsafeLog(errno.EISDIR, f"audit log {path} is not a regular file")
                continue
            info = _lstat(name, fd)
            _check_entry(path, where, os.fstat(fd), name, info)
            if info is None:
                if not create:
                    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(where / name))
                try:
                    os.mkdir(name, 0o700, dir_fd=fd)
                except FileExistsError:
                    pass
                info = _lstat(name, fd)
                _check_entry(path, where, os.fstat(fd), name, info)
            if info is not None and stat.S_ISLNK(info.st_mode):
                links += 1
                if links > MAX_SYMLINKS:
                    raise UnsafeLog(errno.ELOOP, f"audit log {path}: too many symbolic links on the way")
                target = os.readlink(name, dir_fd=fd)
                if target.startswith("/"):
                    step = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                    os.close(fd)
                    fd, where = step, Path("/")
                todo[:0] = [p for p in target.split("/") if p not in ("", ".")]
                continue
            try:
                step = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except NotADirectoryError:
                raise UnsafeLog(
                    errno.ENOTDIR, f"audit log {path}: {where / name} is not a directory"
                ) from None
            os.close(fd)
            fd, where = step, where / name
    except OSError as exc:
        os.close(fd)
        if isinstance(exc, (AuditError, FileNotFoundError)):
            raise
        raise _error(path, exc, "open it") from None


def _trusted(uid: int) -> bool:
    """Root and the user running gputui: the only ones whose files and directories the log may use."""
    return uid in (0, os.geteuid())


def _check_entry(
    path: Path, where: Path, holder: os.stat_result, name: str, info: os.stat_result | None
) -> None:
    """`name` (lstat `info`, None if missing) in the directory `where` (fstat `holder`): refused when
    another user could have put it there or could replace it."""
    if not _trusted(holder.st_uid):
        raise UnsafeLog(
            errno.EPERM,
            f"audit log {path}: the directory {where} belongs to uid {holder.st_uid}, who could replace "
            f"{name} there: refused (pass --log PATH)",
        )
    others = holder.st_mode & stat.S_IWOTH or (
        holder.st_mode & stat.S_IWGRP and holder.st_gid != os.getegid()
    )
    if not others:
        return
    if not holder.st_mode & stat.S_ISVTX:
        raise UnsafeLog(
            errno.EPERM,
            f"audit log {path}: the directory {where} is writable by other users "
            f"(mode {stat.S_IMODE(holder.st_mode):04o}, no sticky bit), who could replace {name} there: "
            "refused (pass --log PATH)",
        )
    if info is not None and not _trusted(info.st_uid):  # like /tmp: an entry is its owner's to change
        what = "symbolic link" if stat.S_ISLNK(info.st_mode) else "entry"
        raise UnsafeLog(
            errno.EPERM,
            f"audit log {path}: {where / name} is a {what} of uid {info.st_uid} in the shared directory "
            f"{where}: refused (pass --log PATH)",
        )


def _check_file(path: Path, info: os.stat_result) -> None:
    """A regular file with one link, of a trusted owner (root's own when root uses it)."""
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeLog(errno.ELOOP, f"audit log {path} is a symbolic link: refused")
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeLog(errno.EINVAL, f"audit log {path} is not a regular file: refused")
    if info.st_nlink != 1:
        raise UnsafeLog(errno.EINVAL, f"audit log {path} has {info.st_nlink} links: refused")
    if not _trusted(info.st_uid):
        me = "root" if os.geteuid() == 0 else f"you (uid {os.geteuid()})"
        raise UnsafeLog(
            errno.EPERM,
            f"audit log {path} belongs to uid {info.st_uid}, not {me}: refused (gputui uses only a log of "
            "its own user's or root's; pass --log PATH)",
        )


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _error(path: Path, exc: OSError, doing: str) -> AuditError:
    return AuditError(exc.errno or errno.EIO, f"audit log {path}: cannot {doing}: {exc.strerror or exc}")


def _fsync(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError:
        pass


# -- which process wrote a record ------------------------------------------------------------------

_SELF: dict[int, dict[str, Any]] = {}  # os.getpid() -> its owner fields (a forked child gets its own)


def _owner() -> dict[str, Any]:
    """The fields naming this process in every record it writes (None where /proc cannot say)."""
    pid = os.getpid()
    if pid not in _SELF:
        _SELF.clear()
        _SELF[pid] = {"owner_pid": pid, "owner_start": _start_time(pid), "owner_boot": _boot_id()}
    return _SELF[pid]


def _owner_of(lines: list[dict[str, Any]]) -> Owner | None:
    """The process that wrote an action (its first record that names one; a `reported` line names
    the reporter, not the writer), or None for records that do not say."""
    for record in lines:
        if record.get("kind") == "reported":
            continue
        pid, start, boot = (
            _count(record.get("owner_pid")),
            _count(record.get("owner_start")),
            record.get("owner_boot"),
        )
        if pid and start is not None and isinstance(boot, str) and boot:
            return pid, start, boot
    return None


def _still_running(owner: Owner) -> bool:
    """Whether the process that wrote a record still runs: its PID names a live process (not a zombie)
    with the same start time, in this boot. From another boot (or another machine sharing the log)
    it is taken as gone: reported, as before records named their process."""
    pid, start, boot = owner
    if boot != _boot_id() or pid == os.getpid():
        return False  # this process: the caller knows which of its own plans it is running
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
        fields = raw[raw.rindex(b")") + 2 :].split()
        state, started = fields[0], int(fields[19])
    except (OSError, ValueError, IndexError):
        return False
    return started == start and state not in (b"Z", b"X")


def _start_time(pid: int) -> int | None:
    """When a process started, in clock ticks since boot: /proc/PID/stat field 22."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
        return int(raw[raw.rindex(b")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def _count(value: Any) -> int | None:
    """`value` if it is a whole number >= 0 (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

"""The durable audit log of kill actions: JSONL, one record per line, each line fsync'd.

Write-ahead: the plan and one `intent` line per process to be signalled are on disk BEFORE the plan is
sent to the probe; then one line per event as it comes (signals, waits, verdicts) and a `done` line.
If gputui dies mid-action (SIGKILL, power loss), the next start finds intents with no result and
reports them: `unfinished()`. A reported action gets a `reported` line so it is reported once.

Every line carries: v, kind, action (the plan id), time (Unix seconds), at (local ISO time), operator,
host, pid, start_time, user, command, signal, stage, result, message, memory_before, memory_after
(null where they do not apply). Kinds: plan, intent, event, verdict, done, reported. A `done` whose
result is outcome-unknown does not end an action: it is reported at the next start like one that
never got a `done`.

Reading tolerates a torn last line (a crash mid-write), any line that does not parse and any record
whose fields have the wrong types: such lines are counted or their fields ignored, never fatal, and
they never hide the real unfinished actions. Appending after a torn line first ends it, so the torn
bytes cannot glue themselves to the next record.

On a bad day (a full disk, a read-only filesystem, a directory or a symlink where the log should be)
every write either lands whole or raises `AuditError`, an OSError whose message says what is wrong
and where: a short write is continued, never left torn. `ensure_room` checks the free space a plan
will need before anything is sent. The log is opened without following symlinks, must be a regular
file with one link, and, for root, must belong to root: a log path another user can point elsewhere
is refused.
"""

from __future__ import annotations

import datetime as _dt
import errno
import getpass
import json
import os
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .model import Event
from .plan import Plan, Target
from .words import count

LOG_VERSION = 1
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
            parent = self.path.parent
            try:
                if not parent.exists():
                    parent.mkdir(parents=True, mode=0o700, exist_ok=True)
                created = not self.path.exists() and not self.path.is_symlink()
                flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
                fd = os.open(self.path, flags, 0o600)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise AuditError(
                        exc.errno, f"audit log {self.path} is a symbolic link: refused"
                    ) from None
                raise self._fail(exc, "open it") from None
            try:
                self._check(fd)
                if created:
                    _fsync_dir(parent)  # the new file's name must survive a crash too
                elif _ends_torn(self.path):
                    self._write_all(fd, b"\n")
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
        return self._fd

    def _check(self, fd: int) -> None:
        """A regular file with one link, and root's own when root writes it."""
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise AuditError(errno.EINVAL, f"audit log {self.path} is not a regular file")
        if info.st_nlink != 1:
            raise AuditError(errno.EINVAL, f"audit log {self.path} has {info.st_nlink} links: refused")
        if os.geteuid() == 0 and info.st_uid != 0:
            raise AuditError(
                errno.EPERM,
                f"audit log {self.path} belongs to uid {info.st_uid}, not root: refused (root writes only "
                "a log of its own; pass --log PATH)",
            )

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
        state the GPUs were in (gputui.operate), recorded with the plan."""
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
            message=f"{len(plan.signalled)} to signal on GPU {_indexes(plan.gpu_indexes)}",
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


def read_records(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], int]:
    """Every record that parses, and how many lines did not (a torn last line, say)."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return [], 0
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


def unfinished(path: str | os.PathLike[str]) -> list[Unfinished]:
    """Actions that have intents but neither a `done` nor a `reported` line, oldest first."""
    records, _ = read_records(path)
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


def _ends_torn(path: Path) -> bool:
    """Whether the file's last line lacks its newline (a write cut short by a crash)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return False
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except OSError:
        return False


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _indexes(indexes: Iterable[int]) -> str:
    return ",".join(str(i) for i in indexes) or "-"

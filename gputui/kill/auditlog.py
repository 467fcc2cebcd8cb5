"""The durable audit log of kill actions, written: JSONL, one record per line, each line fsync'd.

Write-ahead: the plan and one `intent` line per process to be signalled are on disk BEFORE the plan is
sent to the probe (`write_plan`); then one line per event as it comes (signals, waits, verdicts:
`write_event`) and a `done` line. If gputui dies mid-action (SIGKILL, power loss), the next start
finds intents with no result and reports them (unfinished.py). A reported action gets a `reported`
line so it is reported once (`acknowledge`).

Every line carries: v, kind, action (the plan id), time (Unix seconds), at (local ISO time), owner_pid,
owner_start, owner_boot (the process that wrote it: auditowner.py), operator, host, pid, start_time,
user, command, signal, stage, result, message, memory_before, memory_after (null where they do not
apply). Kinds: plan, intent, event, verdict, done, reported. A `done` whose result is
outcome-unknown does not end an action: it is reported at the next start too, as outcome unknown
with that line's reason (not as one that never got a `done`). Appending after a torn line first
ends it, so the torn bytes cannot glue themselves to the next record.

On a bad day (a full disk, a read-only filesystem, a directory or a symlink where the log should be)
every write either lands whole or raises `AuditError`, an OSError whose message says what is wrong
and where: a short write is continued, never left torn. `ensure_room` checks the free space a plan
will need before anything is sent. The path is opened with auditpath.py's checks (`UnsafeLog`).

The names of the reader and the path checks are re-exported here: `gputui.kill.auditlog` is the
log's one import for its callers.
"""

from __future__ import annotations

import datetime as _dt
import errno
import getpass
import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..model import OUTCOME_UNKNOWN, Event, done_event
from ..text.words import count
from .auditowner import owner_fields
from .auditpath import AuditError, UnsafeLog, audit_error, default_log_path, open_log
from .plan.entries import Target
from .plan.record import Plan
from .unfinished import TAIL_BYTES, Intent, Unfinished, read_records, unfinished, unfinished_headline

__all__ = [
    "FIELDS",
    "LOG_VERSION",
    "ROOM_BASE",
    "ROOM_PER_PROCESS",
    "TAIL_BYTES",
    "ActionLog",
    "AuditError",
    "Intent",
    "Unfinished",
    "UnsafeLog",
    "default_log_path",
    "last_words_message",
    "open_log",
    "read_records",
    "unfinished",
    "unfinished_headline",
]

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
            raise audit_error(self.path, exc, "write") from None

    def ensure_room(self, processes: int) -> None:
        """Before a plan is sent: is there room for all its records? Raises AuditError if not."""
        need = ROOM_BASE + ROOM_PER_PROCESS * max(0, processes)
        # The log opened first (its directories made): a path that cannot hold it says why (no such
        # directory, not a directory, not allowed), where the free space of the nearest directory
        # that exists (/proc: 0 KiB) would blame the disk. The space is then the log's own disk's.
        fd = self._open()
        try:
            info = os.fstatvfs(fd)
        except OSError as exc:
            raise audit_error(self.path, exc, "check its free space") from None
        free = info.f_bavail * info.f_frsize
        if free < need:
            raise AuditError(
                errno.ENOSPC,
                f"audit log {self.path}: {free >> 10} KiB free, a plan of {count(processes, 'process', 'processes')} needs "
                f"{need >> 10} KiB (free some space, or pass --log PATH)",
            )
        if info.f_flag & os.ST_RDONLY:
            raise AuditError(errno.EROFS, f"audit log {self.path}: read-only filesystem")

    def write(self, kind: str, action: str, **fields: Any) -> dict[str, Any]:
        """Append one record and make it durable before returning (AuditError if it cannot be)."""
        record = self._record(kind, action, fields)
        self._append([record])
        return record

    def _record(self, kind: str, action: str, fields: dict[str, Any]) -> dict[str, Any]:
        now = time.time()
        record: dict[str, Any] = {
            "v": LOG_VERSION,
            "kind": kind,
            "action": action,
            "time": round(now, 3),
            "at": _dt.datetime.fromtimestamp(now).astimezone().isoformat(timespec="milliseconds"),
        }
        record.update(owner_fields())
        record.update(dict.fromkeys(FIELDS))
        record["operator"] = self.operator
        record.update(fields)
        return record

    def _append(self, records: list[dict[str, Any]]) -> None:
        """`records`, a line each, in one write (an O_APPEND write is never interleaved with another
        process's), then one fsync: durable together before this returns."""
        data = b"".join(
            (json.dumps(r, ensure_ascii=True, separators=(",", ":"), default=str) + "\n").encode()
            for r in records
        )
        fd = self._open()
        if self._torn:  # an earlier write was cut short: end its line first
            self._write_all(fd, b"\n")
            self._torn = False
        self._write_all(fd, data)
        try:
            os.fsync(fd)
        except OSError as exc:
            raise audit_error(self.path, exc, "sync it to disk") from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> ActionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the engine records ---------------------------------------------------------------

    def write_plan(self, plan: Plan, provenance: dict[str, Any] | None = None) -> None:
        """The plan and one intent per process to signal: call BEFORE sending the plan. Raises
        AuditError (nothing sent, then) when the log cannot take the whole plan. `provenance`: the
        state the GPUs were in (gputui.kill.operate), recorded with the plan."""
        self.ensure_room(len(plan.signalled))
        first = plan.signals[0] if plan.signals else "SIGKILL"
        before = {str(g.index): g.memory_used for g in plan.gpus}
        records = [
            self._record(
                "plan",
                plan.id,
                {
                    "operator": plan.operator,
                    "host": plan.host,
                    "stage": "plan",
                    "result": "intent",
                    "message": f"{plan.title}: {len(plan.signalled)} to signal",  # `Send SIGSTOP to 4121 (...)`
                    "memory_before": before,
                    "plan": plan.describe(),
                    "provenance": provenance,
                },
            )
        ]
        for target in plan.signalled:
            records.append(
                self._record(
                    "intent",
                    plan.id,
                    {
                        "operator": plan.operator,
                        "host": plan.host,
                        "pid": target.pid,
                        "start_time": target.start_time,
                        "user": target.user,
                        "command": list(target.command),
                        "signal": first,
                        "stage": "plan",
                        "result": "intent",
                        "message": target.why,
                        "gpus": list(target.gpus),
                        "memory_before": {str(i): b for i, b in target.gpu_memory},
                    },
                )
            )
        # The plan and its intents in one write and one fsync (a sync each cost a disk's flush
        # apiece before the plan could go): all of them durable before the plan is sent, as before.
        self._append(records)
        for target in plan.signalled:
            self._targets[(plan.id, target.pid)] = target

    def write_event(self, host: str, event: Event) -> None:
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
        self.write_event(host, done_event(action, OUTCOME_UNKNOWN, last_words_message(why)))

    def acknowledge(self, actions: Iterable[Unfinished]) -> None:
        """Mark unfinished actions as reported, so the next start does not report them again."""
        for action in actions:
            self.write(
                "reported",
                action.action,
                host=action.host,
                stage="startup",
                result=OUTCOME_UNKNOWN,
                message=f"reported unfinished: {count(len(action.pending), 'process', 'processes')} without a recorded outcome",
            )


def last_words_message(why: str) -> str:
    """The message of an outcome-unknown `done` that gputui writes as it ends before a verdict."""
    return (
        f"gputui exited before the verdict ({why}) and its probe was ended: what the plan did is not "
        "known here; check these processes and GPUs"
    )


def _ends_torn(fd: int) -> bool:
    """Whether the file's last line lacks its newline (a write cut short by a crash)."""
    try:
        size = os.fstat(fd).st_size
        return size > 0 and os.pread(fd, 1, size - 1) != b"\n"
    except OSError:
        return False

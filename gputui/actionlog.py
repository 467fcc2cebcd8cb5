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

Reading tolerates a torn last line (a crash mid-write) and any line that does not parse: such lines
are counted, never fatal. Appending after a torn line first ends it, so the torn bytes cannot glue
themselves to the next record.
"""

from __future__ import annotations

import datetime as _dt
import getpass
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .model import Event
from .plan import Plan, Target

LOG_VERSION = 1
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
        self._targets: dict[tuple[str, int], Target] = {}  # (action, pid) -> what the plan said

    # -- writing -------------------------------------------------------------------------------

    def _open(self) -> int:
        if self._fd is None:
            parent = self.path.parent
            if not parent.exists():
                parent.mkdir(parents=True, mode=0o700, exist_ok=True)
            created = not self.path.exists()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            if created:
                _fsync_dir(parent)  # the new file's name must survive a crash too
            elif _ends_torn(self.path):
                os.write(fd, b"\n")
            self._fd = fd
        return self._fd

    def write(self, kind: str, action: str, **fields: Any) -> dict[str, Any]:
        """Append one record and make it durable before returning."""
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
        os.write(fd, line)
        os.fsync(fd)
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

    def plan(self, plan: Plan) -> None:
        """The plan and one intent per process to signal: call BEFORE sending the plan."""
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
                message=f"reported unfinished: {len(action.pending)} process(es) without a recorded outcome",
            )


# -- reading -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Intent:
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
        kinds = {r.get("kind") for r in lines}
        if "intent" not in kinds and "plan" not in kinds:
            continue
        if "reported" in kinds:
            continue
        # A done line ends an action, unless its outcome is unknown (the link broke, the probe went
        # silent): then nobody knows what happened, and the next start must say so.
        ends = [r for r in lines if r.get("kind") == "done"]
        if ends and any(r.get("result") != "outcome-unknown" for r in ends):
            continue
        settled = {r.get("pid") for r in lines if r.get("kind") == "verdict"}
        pending = tuple(
            _intent(r) for r in lines if r.get("kind") == "intent" and r.get("pid") not in settled
        )
        first = lines[0]
        out.append(
            Unfinished(
                action=action,
                host=first.get("host"),
                operator=first.get("operator"),
                time=float(first.get("time") or 0.0),
                pending=pending,
                last_stage=lines[-1].get("stage"),
            )
        )
    return sorted(out, key=lambda u: u.time)


def _intent(record: dict[str, Any]) -> Intent:
    command = record.get("command")
    return Intent(
        pid=int(record.get("pid") or 0),
        start_time=record.get("start_time") if isinstance(record.get("start_time"), int) else None,
        user=record.get("user") if isinstance(record.get("user"), str) else None,
        command=tuple(str(a) for a in command) if isinstance(command, list) else (),
        time=float(record.get("time") or 0.0),
    )


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

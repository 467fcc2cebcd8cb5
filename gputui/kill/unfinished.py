"""What an earlier run left in the audit log: actions that were written ahead and never saw their
outcome recorded (gputui died mid-action), read at every start (`unfinished`), and the records
themselves (`read_records`).

An action is unfinished when it has a plan or intents but neither a `done` nor a `reported` line,
and the process that wrote it is gone (auditowner.py). A `done` whose result is outcome-unknown does
not end an action: it is reported at the next start too, but as what the log says (its outcome
recorded as unknown, and why), not as one that never got a `done` (`Unfinished.outcome`).

Reading tolerates a torn last line (a crash mid-write), any line that does not parse and any record
whose fields have the wrong types: such lines are counted or their fields ignored, never fatal, and
they never hide the real unfinished actions. A start reads only the last `TAIL_BYTES` of the log,
with bounded reads, through the same safe opening as the writer's (auditpath.py).

Apart from the writer because a start reads before anything is written, and the writer never reads.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import OUTCOME_UNKNOWN
from ..model.textsafe import printable
from ..text.words import count
from .auditowner import Owner, owner_of, still_running
from .auditpath import audit_error, open_log

# What a start reads of the log to report unfinished plans: its last 4 MiB. A run of `gputui clean`
# writes ~13 KiB (a plan, its intents, a few dozen events, the verdicts), so this holds the last ~300
# plans; a plan that died further back than that, with no start in between, is not reported.
TAIL_BYTES = 4 << 20


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
    """An action without a known outcome: gputui died while it ran (no `done` line), or recorded
    the outcome as unknown as it ended (Ctrl+C, the hard exit, a probe gone silent)."""

    action: str
    host: str | None
    operator: str | None
    time: float
    pending: tuple[Intent, ...]  # intents without a verdict
    last_stage: str | None  # the last thing recorded for it
    # Its outcome-unknown `done` line's message (why the outcome is unknown); None: no `done` line.
    outcome: str | None = None

    @property
    def never_recorded(self) -> bool:
        """No `done` line at all: gputui stopped mid-action without a word."""
        return self.outcome is None

    def describe(self) -> str:
        """One line, from the log's own text (escaped: a log is a file anyone with access could edit)."""
        when = _dt.datetime.fromtimestamp(self.time).strftime("%Y-%m-%d %H:%M:%S")
        pids = ", ".join(str(i.pid) for i in self.pending) or "none"
        if self.outcome is None:
            state = f"outcome never recorded (last stage: {self.last_stage or 'plan'})"
        else:
            state = f"outcome unknown, as its done line says: {self.outcome or 'no reason given'}"
        return printable(
            f"action {self.action} on {self.host or '?'} by {self.operator or '?'} at {when}: {state}; "
            f"processes: {pids}"
        )


def unfinished_headline(actions: Sequence[Unfinished]) -> str:
    """What a start says of `actions` in one sentence: never recorded (no `done` line), recorded as
    unknown (a `done` saying so), or how many of each."""
    never = sum(1 for a in actions if a.never_recorded)
    unknown = len(actions) - never
    n = count(len(actions), "kill action")
    if not unknown:
        return f"{n} of an earlier run never recorded an outcome (gputui stopped mid-action)."
    if not never:
        return (
            f"{n} of an earlier run ended with the outcome unknown, as the log records (gputui stopped "
            "before the verdict)."
        )
    return (
        f"{n} of an earlier run have no known outcome: {never} never recorded one (gputui stopped "
        f"mid-action), {unknown} recorded it as unknown (gputui stopped before the verdict)."
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
        raise audit_error(Path(path), exc, "read it") from None
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
    still = running or still_running
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
        # silent): then nobody knows what happened, and the next start must say so, as the log does.
        ends = [r for r in lines if r.get("kind") == "done"]
        if ends and any(r.get("result") != OUTCOME_UNKNOWN for r in ends):
            continue
        # Another run, still going, will record its outcome: reporting (and acknowledging) it now
        # would hide it for good if that run then died mid-plan.
        owner = owner_of(lines)
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
                outcome=(_text(ends[-1].get("message")) or "") if ends else None,
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

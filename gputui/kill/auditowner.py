"""Which process wrote an audit-log record: the stamp every record carries (`owner_fields`) and the
check whether that process still runs (`still_running`).

Every record names the process that wrote it (owner_pid, owner_start: its start time in clock ticks
since boot, /proc/PID/stat field 22; owner_boot: the kernel's boot id), so that a start does not
report another run's plan, still going, as unfinished (nor mark it reported): only once that process
is gone (no such PID with that start time in this boot, or a zombie). Records without these fields
(logs written before them) are judged by the records alone, as then.

Apart because the writer stamps and the reader judges by the same three fields.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

Owner = tuple[int, int, str]  # the process that wrote a record: PID, start time (ticks since boot), boot id

_SELF: dict[int, dict[str, Any]] = {}  # os.getpid() -> its owner fields (a forked child gets its own)


def owner_fields() -> dict[str, Any]:
    """The fields naming this process in every record it writes (None where /proc cannot say)."""
    pid = os.getpid()
    if pid not in _SELF:
        _SELF.clear()
        stat = _stat(pid)
        _SELF[pid] = {
            "owner_pid": pid,
            "owner_start": stat[1] if stat is not None else None,
            "owner_boot": _boot_id(),
        }
    return _SELF[pid]


def owner_of(lines: list[dict[str, Any]]) -> Owner | None:
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


def still_running(owner: Owner) -> bool:
    """Whether the process that wrote a record still runs: its PID names a live process (not a zombie)
    with the same start time, in this boot. From another boot (or another machine sharing the log)
    it is taken as gone: reported, as before records named their process."""
    pid, start, boot = owner
    if boot != _boot_id() or pid == os.getpid():
        return False  # this process: the caller knows which of its own plans it is running
    stat = _stat(pid)
    if stat is None:
        return False
    state, started = stat
    return started == start and state not in (b"Z", b"X")


def _stat(pid: int) -> tuple[bytes, int] | None:
    """A process's state and when it started, in clock ticks since boot (/proc/PID/stat fields 3
    and 22); None when it cannot be read (gone, say)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
        fields = raw[raw.rindex(b")") + 2 :].split()
        return fields[0], int(fields[19])
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

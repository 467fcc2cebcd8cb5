"""`GET /api/v1/detail?host=H&pid=P&start=S`: one process of a host in full, for an attached
dashboard's process detail (`d`).

A read like the snapshot (any token): the hub asks its own fleet's link to that host for the
process named by PID and start time (`Fleet.request_detail`, docs/PROTOCOL.md "detail"), never for
its environment (that can hold secrets: an attached viewer is refused it before it asks), and
answers the probe's `detail` record as decoded (its text made printable, its lists bounded). Bounded:
at most DETAIL_AT_ONCE requests wait on hosts at a time (past that 503), each for the fleet's
DETAIL_TIMEOUT (no answer in time: 504).

    GET /api/v1/detail?host=gpu-a&pid=4121&start=123456
    -> 200 {"type": "detail", "v": 1, "pid": 4121, "start_time": 123456, "result": "ok", "command": [...], ...}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fleet.fleet import Fleet
from ..model.decode import MAX_PID, plain
from ..model.detail import ProcDetail

DETAIL_AT_ONCE = 16  # detail requests waiting on hosts at a time: each holds a probe's attention
MAX_START = 2**63  # a start time is the kernel's clock ticks since boot: a 64-bit count
ENVIRON = ("environ", "environ_more", "environ_cut")  # never asked for, never answered
# The record's first fields in the probe's order (ProcDetail declares the fields every process
# record shares before its own).
_WIRE_FIRST = ("pid", "start_time", "result", "message", "name", "command", "cwd", "exe")


class BadQuery(ValueError):
    """A query that does not name a host and a process: the message says why (answered 400)."""


def parse_query(query: Mapping[str, str]) -> tuple[str, int, int]:
    """(host, pid, start time) of the query; BadQuery when one is missing or not a number in range."""
    host = query.get("host")
    if not host:
        raise BadQuery("host= names no host")
    return host, _number(query, "pid", MAX_PID), _number(query, "start", MAX_START - 1)


def _number(query: Mapping[str, str], name: str, top: int) -> int:
    text = query.get(name, "")
    if not (text.isascii() and text.isdecimal()) or len(text) > 20 or not 0 < int(text) <= top:
        raise BadQuery(f"{name}= must be a whole number from 1 to {top}")
    return int(text)


async def read_detail(fleet: Fleet, host: str, pid: int, start_time: int) -> dict[str, Any] | None:
    """The `detail` record of (pid, start_time) on `host` as the hub's fleet reads it now, without its
    environment; None when the host did not answer in time (or is not connected)."""
    detail = await fleet.request_detail(host, pid, start_time)
    return as_record(detail) if detail is not None else None


def as_record(detail: ProcDetail) -> dict[str, Any]:
    """A decoded detail back as the wire's record (docs/PROTOCOL.md "detail"), environment left out."""
    record: dict[str, Any] = {"type": "detail", "v": 1, **plain(detail, skip=ENVIRON, first=_WIRE_FIRST)}
    record["fds"] = [plain(fd) for fd in detail.fds]
    record["parents"] = [plain(parent) for parent in detail.parents]
    return record

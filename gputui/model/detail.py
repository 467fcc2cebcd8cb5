"""One process in full: the answer to a `detail` request (docs/PROTOCOL.md "detail"), read from /proc
by its host's probe when the operator opens the process view: its command, working directory,
parents up to init, device files, cgroups and, when asked, its environment. Separate from the
sample's process records because it is asked for one process at a time and says much more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .decode import (
    MAX_PID,
    Pids,
    as_count,
    as_dict,
    as_int,
    as_pid,
    as_pids,
    as_str,
    as_strs,
    read_fields,
    records,
    wire_fields,
)
from .process import ProcessFacts
from .textsafe import printable

DETAIL_RESULTS = ("ok", "exited", "pid-reused", "refused")
MAX_ENVIRON = 1024  # variables taken from one answer (the probe sends at most 512)
MAX_FDS = 1024  # device files taken from one answer
MAX_ANCESTORS = 256  # steps of the parent chain taken


@dataclass(frozen=True, slots=True)
class Ancestor:
    """One step of a process's parent chain (nearest first): PID, start time, name."""

    pid: int
    start_time: int | None = None
    name: str | None = None

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Ancestor | None:
        pid = as_pid(d.get("pid"))
        return None if pid is None else cls(pid, as_count(d.get("start_time")), as_str(d.get("name")))


@dataclass(frozen=True, slots=True)
class DeviceFd:
    """A device file a process holds, by its file descriptor number."""

    fd: int
    path: str

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> DeviceFd | None:
        fd, path = as_count(d.get("fd")), as_str(d.get("path"))
        return None if fd is None or path is None else cls(fd, path)


@dataclass(frozen=True, slots=True)
class EnvVar:
    """One variable of a process's environment, made printable. `value` None: the name looks like a
    secret's and the probe kept the value back (it is sent only when asked: `s` in the view)."""

    name: str
    value: str | None
    secret: bool = False

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> EnvVar | None:
        """None for an entry without a name."""
        name = as_str(d.get("name"))
        return None if name is None else cls(name, as_str(d.get("value")), d.get("secret") is True)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcDetail(ProcessFacts):
    """One process in full, read from /proc by its host's probe when asked (docs/PROTOCOL.md
    "detail"). `result`: ok, or why there is nothing to describe: exited, pid-reused (the PID is
    another process's now), refused (the request was malformed). Fields the probe could not read
    are None, with the reason in `unreadable` (e.g. {"cwd": "permission denied"}). Its name,
    command, owner, state and parent are ProcessFacts'."""

    pid: int
    start_time: int | None
    result: str
    message: str | None = None
    cwd: str | None = None
    exe: str | None = None
    pgid: int | None = None
    sid: int | None = None
    threads: int | None = None
    started: float | None = None  # wall time (the host's clock)
    elapsed: float | None = None
    cpu_time: float | None = None  # seconds of CPU, user and system
    rss: int | None = None
    nspid: Pids = ()
    cgroup: tuple[str, ...] = ()
    container: str | None = None
    fds: tuple[DeviceFd, ...] = ()
    fds_more: int = 0
    fd_count: int | None = None
    parents: tuple[Ancestor, ...] = ()
    parents_end: str | None = None  # init, probe, gone, none, limit
    unreadable: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    # The environment, when asked for (None: not read; why in `unreadable["environ"]` if refused);
    # `environ_more`: variables left out; `environ_cut`: the probe read only the first 64 KiB.
    environ: tuple[EnvVar, ...] | None = None
    environ_more: int = 0
    environ_cut: bool = False

    @property
    def ok(self) -> bool:
        return self.result == "ok"

    @property
    def gone(self) -> bool:
        """It has exited, or its PID belongs to another process now."""
        return self.result in ("exited", "pid-reused")

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> ProcDetail | None:
        """None for a record without a usable PID."""
        pid = as_pid(d.get("pid"))
        return None if pid is None else cls(pid=pid, **read_fields(d, _DETAIL))


def _unreadable(value: Any) -> dict[str, str]:
    """{field: why it could not be read}, strings only, at most 32."""
    return {
        printable(k): printable(v)
        for k, v in list(as_dict(value).items())[:32]
        if isinstance(k, str) and isinstance(v, str)
    }


def _environ(value: Any) -> tuple[EnvVar, ...] | None:
    """A detail answer's `environ`, field by field: entries without a name are dropped."""
    return records(value, EnvVar.from_wire, MAX_ENVIRON) if isinstance(value, list) else None


_DETAIL = wire_fields(
    ProcDetail,
    skip=("pid",),
    result=lambda value: value if value in DETAIL_RESULTS else "refused",
    threads=lambda value: as_int(value, 0, MAX_PID),
    nspid=lambda value: as_pids(value)[:32],
    cgroup=lambda value: as_strs(value)[:64],
    fds=lambda value: records(value, DeviceFd.from_wire, MAX_FDS),
    parents=lambda value: records(value, Ancestor.from_wire, MAX_ANCESTORS),
    unreadable=_unreadable,
    environ=_environ,
)

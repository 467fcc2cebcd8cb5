"""What every source gives (ResolvedHost), how it fails (InventoryError), and how a source reads a
file (`read_regular`: a regular file, within a byte bound). Running a source's tool: tool.py."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..config import userfile
from ..config.hostlist import quoted, quoted_path, shortened, too_many_hosts, word_problem
from ..model.decode import plain
from ..model.textsafe import printable


class InventoryError(Exception):
    """A host spec that names no hosts: one line for the user. `unavailable`: a tool that ran and
    could not answer (its controller down, a timeout), like a host that is down (exit 1); else a
    spec the user must fix, or a tool that is not installed (bad usage, exit 2). The message quotes
    the user's specs and what sources said: it is escaped here, whoever made it."""

    def __init__(self, message: str, unavailable: bool = False) -> None:
        message = printable(message)
        super().__init__(message)
        self.message = message
        self.unavailable = unavailable


@dataclass(frozen=True, slots=True)
class ResolvedHost:
    """One host as a source lists it, before it becomes a HostSpec (gputui/inventory/specs.py)."""

    name: str  # shown in the UI; unique among the resolved hosts
    address: str  # where it is: a host name, an address, or the HostName of an ssh config entry
    user: str | None = None
    port: int | None = None
    jump: str | None = None  # ProxyJump: "[user@]host[:port]", comma-separated for a chain
    group: str | None = None  # the named group, partition or inventory group it was listed under
    source: str = ""  # the spec it came from, as written: "gpu[001-128]", "@slurm:gpu"
    alias: bool = False  # an ~/.ssh/config entry: connect through its name, so every option applies
    feed: str | None = None  # where its records come from when no probe runs for it (HostSpec.feed)
    # A machine a tool or an inventory names (a cluster's node, an Ansible host without
    # ansible_connection=local): never this machine, even named `local` (specs.this_machine).
    remote: bool = False

    def describe(self) -> dict[str, object]:
        """Its fields as `gputui hosts --json` lists them; how it is connected to (`alias`) is not said,
        and `feed` only where its records come from elsewhere than a probe."""
        return plain(self, skip=("alias", "remote") if self.feed is not None else ("alias", "remote", "feed"))


def checked(host: ResolvedHost, where: str) -> ResolvedHost:
    """The host, or InventoryError naming what is wrong with it and which source said so."""
    for what, value in (("name", host.name), ("address", host.address), ("user", host.user)):
        if value is None:
            continue
        problem = word_problem(value)
        if problem:
            raise InventoryError(f"{shortened(where)}: host {what} {quoted(value)} {problem}")
    if host.port is not None and not 1 <= host.port <= 65535:
        raise InventoryError(
            f"{shortened(where)}: host {quoted(host.name)}: port {host.port} is not from 1 to 65535"
        )
    return host


def over_cap(where: str) -> InventoryError:
    """The error of a command whose specs, all together, name more hosts than it takes."""
    return InventoryError(too_many_hosts(shortened(where)))


def home_expanded(path: str) -> str:
    """`~` and `~user` expanded, or the path as written where they cannot be (an unknown user: it is
    then not found; a NUL: refused when it is opened). Not Path.expanduser: it raises for those."""
    try:
        return os.path.expanduser(path)
    except ValueError:
        return path


def read_regular(path: Path, limit: int, where: str, too_large: str = "") -> bytes:
    """The bytes of the regular file at `path` (a user's host file or ssh config), or InventoryError
    (bad usage): it cannot be opened, it is something else (a FIFO would block the read until a
    writer came, /dev/zero never ends, a directory has no lines), or it holds more than `limit`
    bytes (`too_large`: what the message says then, after the path). gputui.config.userfile reads it."""
    try:
        return userfile.read_regular(path, limit)
    except userfile.FileRefused as exc:
        if exc.kind == "open":
            raise InventoryError(
                f"{shortened(where)}: cannot read {quoted_path(path)}: {exc.reason}"
            ) from None
        said = too_large if exc.kind == "size" and too_large else exc.reason
        raise InventoryError(f"{shortened(where)}: {quoted_path(path)} {said}") from None

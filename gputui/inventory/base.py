"""What every source gives (ResolvedHost), how it fails (InventoryError), and how a source runs the
tool that knows its hosts (`run_tool`: an argv list, never a shell; bounded in time)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TOOL_TIMEOUT = 30.0  # seconds for scontrol, sinfo or ansible-inventory to answer


class InventoryError(Exception):
    """A host spec that names no hosts: one line for the user. `unavailable`: a tool that ran and
    could not answer (its controller down, a timeout), like a host that is down (exit 1); else a
    spec the user must fix, or a tool that is not installed (bad usage, exit 2)."""

    def __init__(self, message: str, unavailable: bool = False) -> None:
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

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name,
            "address": self.address,
            "user": self.user,
            "port": self.port,
            "jump": self.jump,
            "group": self.group,
            "source": self.source,
        }


def word_problem(value: str) -> str | None:
    """A host name, address or user from a source ends up as an SSH argument and in suggested
    commands: no control characters, no spaces, no leading dash (it would read as an option)."""
    if not value:
        return "is empty"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "contains control characters"
    if any(c.isspace() for c in value):
        return "contains spaces"
    if value.startswith("-"):
        return "starts with '-'"
    return None


def checked(host: ResolvedHost, where: str) -> ResolvedHost:
    """The host, or InventoryError naming what is wrong with it and which source said so."""
    for what, value in (("name", host.name), ("address", host.address), ("user", host.user)):
        if value is None:
            continue
        problem = word_problem(value)
        if problem:
            raise InventoryError(f"{where}: host {what} {value!r} {problem}")
    if host.port is not None and not 1 <= host.port <= 65535:
        raise InventoryError(f"{where}: host {host.name!r}: port {host.port} is not from 1 to 65535")
    return host


def run_tool(
    argv: Sequence[str],
    where: str,
    *,
    install: str,
    env: Mapping[str, str] | None = None,
    timeout: float = TOOL_TIMEOUT,
    not_found: Sequence[str] = (),
) -> str:
    """The stdout of `argv` (a list: nothing is interpreted by a shell). InventoryError when the tool
    is absent (usage, 2), fails or does not answer within `timeout` (unavailable, 1): its last stderr
    line says why. `install`: what to install, for the message; `not_found`: words of the tool's
    error output (lower case) that mean the spec names nothing there (usage, 2: "not found")."""
    tool = argv[0]
    # Imported here: every command loads this module (its error), few run a tool.
    import shutil
    import subprocess

    if shutil.which(tool, path=(env or os.environ).get("PATH")) is None:
        raise InventoryError(f"{where}: {tool} is not installed or not on PATH ({install})")
    try:
        done = subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            env=dict(env) if env is not None else None,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise InventoryError(
            f"{where}: {tool} did not answer within {timeout:g} s", unavailable=True
        ) from None
    except OSError as exc:
        raise InventoryError(f"{where}: cannot run {tool}: {exc.strerror or exc}", unavailable=True) from None
    if done.returncode != 0:
        why = last_line(done.stderr) or last_line(done.stdout) or f"exit status {done.returncode}"
        if any(words in why.lower() for words in not_found):
            raise InventoryError(f"{where}: {why}")
        raise InventoryError(f"{where}: {tool} failed: {why}", unavailable=True)
    return done.stdout.decode("utf-8", "replace")


def last_line(data: bytes) -> str:
    """The last non-empty line of a tool's output, printable, at most 300 characters."""
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    if not lines:
        return ""
    text = "".join(c if c.isprintable() else "?" for c in lines[-1])
    return text[:300]

"""`@ssh:PATTERN`: the `Host` entries of ~/.ssh/config whose name matches a glob.

Each entry's HostName, User, Port and ProxyJump are shown as OpenSSH would take them: the first value
of each option from the blocks that apply to the alias, in file order (a `Host *` block at the end
fills what the entry leaves unset). `Include` is followed (relative paths are under ~/.ssh, globs
expand, at most 16 deep as in OpenSSH; inside a Host block, what it reads applies only to the hosts
that block matches, as in OpenSSH; a directory it names gives nothing, as in OpenSSH); `Match`
blocks are not evaluated (their options are left out of what is shown; the connection itself
applies them: asyncssh reads the same file). Entries whose
patterns are all wildcards or negations (`Host *`, `Host !bastion *.lan`) name no host and are
skipped. A host from here connects through its alias, so every option of its block applies.

Read within bounds that OpenSSH does not set (it would wait on a FIFO and read /dev/zero until it
ran out of memory): the config and every file it includes must be regular files; MAX_BYTES read in
all and MAX_INCLUDES files and Include patterns, each counted as often as it is read (a file that
includes the next one 40 times, a few deep, is no loop but never ends). A bad `Port` anywhere is
refused, as OpenSSH refuses the file. Time is linear in the config's size: a Host line's names are
looked up in a dict, and each alias's blocks are found through an index, not a scan of every block.
"""

from __future__ import annotations

import fnmatch
import functools
import glob
import heapq
import os
import re
import shlex
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..config.hostlist import MAX_HOSTS, quoted, quoted_path, shortened
from .base import InventoryError, ResolvedHost, checked, home_expanded, over_cap, read_regular

MAX_INCLUDE_DEPTH = 16  # OpenSSH's READCONF_MAX_DEPTH
MAX_BYTES = 16 << 20  # read in all: the config and its includes, each as often as it is included
MAX_INCLUDES = 10_000  # Include patterns and the files they name, each as often as it is read
_KEY = re.compile(r"([A-Za-z][A-Za-z0-9]*)(?:\s*=\s*|\s+)")
_PORT = re.compile(r"0*([0-9]{1,5})")  # ASCII digits only: '²' and '٢' are digits to str.isdigit
_SERVICE = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,31}")  # `Port ssh`: a2port takes a service name
_QUOTING = frozenset("\"'\\#")
_BLANKS = re.compile(r"[ \t\r\n]+")  # shlex's whitespace
WANTED = ("hostname", "user", "port", "proxyjump")


class _Patterns:
    """A Host line's patterns as OpenSSH matches them (case-insensitively; only `*` and `?` are
    wildcards): plain names in a dict, so that a line of 200,000 names matches one in one lookup."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.names: dict[str, str] = {}  # lower-cased -> as written (the alias), in order
        self.globs: list[re.Pattern[str]] = []
        self.negated_names: set[str] = set()
        self.negated_globs: list[re.Pattern[str]] = []
        for pattern in patterns:
            negated = pattern.startswith("!")
            bare = pattern[1:] if negated else pattern
            wild = "*" in bare or "?" in bare
            if negated and wild:
                self.negated_globs.append(_glob(bare.lower()))
            elif negated:
                self.negated_names.add(bare.lower())
            elif wild:
                self.globs.append(_glob(bare.lower()))
            else:
                self.names.setdefault(bare.lower(), bare)

    def matches(self, name: str) -> bool:
        """OpenSSH's Host rule for `name` (lower-cased): some pattern matches and no negated one does."""
        if name in self.negated_names or any(g.match(name) for g in self.negated_globs):
            return False
        return name in self.names or any(g.match(name) for g in self.globs)


@functools.lru_cache(maxsize=4096)
def _glob(pattern: str) -> re.Pattern[str]:
    # fnmatch's translation (it avoids catastrophic backtracking on many `*`), with `[` literal.
    return re.compile(fnmatch.translate(pattern.replace("[", "[[]")))


@dataclass
class _Block:
    patterns: _Patterns | None  # None: the options before the first Host line (apply to every host)
    options: dict[str, str] = field(default_factory=dict)  # the first value of each WANTED option
    match: bool = False  # a Match block: not evaluated here
    # An Include inside a Host block is conditional (OpenSSH): what it reads applies only to hosts
    # that block matches too. None: inside a Match block, so never here.
    guards: list[_Patterns] | None = field(default_factory=list)

    def applies(self, name: str) -> bool:
        """Whether the block applies to the alias `name` (lower-cased)."""
        if self.match or self.guards is None:
            return False
        if any(not guard.matches(name) for guard in self.guards):
            return False
        return self.patterns is None or self.patterns.matches(name)


@dataclass
class _Reading:
    """One reading of a config and its includes, within its bounds."""

    where: str  # the spec, for messages
    base: Path  # where relative Include paths are
    blocks: list[_Block]
    bytes_left: int = MAX_BYTES
    includes_left: int = MAX_INCLUDES


def default_path() -> Path:
    return Path(home_expanded("~/.ssh/config"))


def read_blocks(path: Path, where: str = "@ssh") -> list[_Block]:
    """The config as blocks in order, Include files read in place. InventoryError when it is absent,
    is not a regular file, or goes past a bound (MAX_INCLUDE_DEPTH, MAX_BYTES, MAX_INCLUDES)."""
    if not os.path.lexists(path):
        raise InventoryError(f"{shortened(where)}: no ssh config at {quoted_path(path)}")
    reading = _Reading(where, Path(home_expanded("~/.ssh")), [_Block(None)])
    _read(path, reading, 0, [])
    return reading.blocks


def _read(path: Path, reading: _Reading, depth: int, guards: list[_Patterns] | None) -> None:
    where = shortened(reading.where)
    if depth > MAX_INCLUDE_DEPTH:
        raise InventoryError(
            f"{where}: Include nested more than {MAX_INCLUDE_DEPTH} deep at {quoted_path(path)} (a loop?)"
        )
    reading.includes_left -= 1
    if reading.includes_left < 0:
        raise InventoryError(f"{where}: the ssh config includes more than {MAX_INCLUDES:,} files")
    too_large = f"takes the ssh config and its includes over {MAX_BYTES >> 20} MiB"
    data = read_regular(path, reading.bytes_left, reading.where, too_large)
    reading.bytes_left -= len(data)
    blocks = reading.blocks
    # Lines end at "\n" only, as OpenSSH reads them (splitlines would also end one at U+0085 or
    # U+2028, and make two good names of a Host line's one that the host rule refuses).
    for number, line in enumerate(data.decode("utf-8", "replace").split("\n"), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _KEY.match(stripped)
        if match is None:
            continue
        key, args = match.group(1).lower(), _words(stripped[match.end() :])
        if args is None:
            continue  # an unbalanced quote: OpenSSH refuses the file; the connection will say so
        if key == "host":
            blocks.append(_Block(_Patterns(args), guards=guards))
        elif key == "match":
            blocks.append(_Block(_Patterns(()), match=True, guards=guards))
        elif key == "include":
            _include(args, reading, depth, guards)
        elif args and key in WANTED:
            if key == "port":
                _port(args[0], f"{where}: {quoted_path(path)} line {number}")
            blocks[-1].options.setdefault(key, args[0])


def _words(rest: str) -> list[str] | None:
    """A line's arguments as OpenSSH splits them (quotes, backslashes, `#` comments); None for an
    unbalanced quote. Without quotes, backslashes or `#`: split on blanks (shlex, char by char, is
    the slow way to the same words)."""
    if not any(c in _QUOTING for c in rest):
        return [word for word in _BLANKS.split(rest) if word]
    try:
        return shlex.split(rest, comments=True)
    except ValueError:
        return None


def _port(value: str, where: str) -> int:
    """A Port value as OpenSSH's a2port takes it (a number from 1 to 65535, or a service name), or
    InventoryError: OpenSSH refuses the whole file for a bad one, wherever it is."""
    match = _PORT.fullmatch(value)
    if match is not None and 1 <= int(match.group(1)) <= 65535:
        return int(match.group(1))
    if _SERVICE.fullmatch(value):
        try:
            return socket.getservbyname(value, "tcp")
        except OSError:
            pass
    raise InventoryError(f"{where}: Port {quoted(value)} is not a number from 1 to 65535")


def _include(args: list[str], reading: _Reading, depth: int, guards: list[_Patterns] | None) -> None:
    blocks = reading.blocks
    here = blocks[-1]
    inner = guards
    if here.match or inner is None:
        inner = None
    elif here.patterns is not None:
        inner = [*inner, here.patterns]
    # What the file says before its first Host line belongs to the including block.
    blocks.append(_Block(None, guards=inner))
    for pattern in args:
        reading.includes_left -= 1
        if reading.includes_left < 0:
            where = shortened(reading.where)
            raise InventoryError(f"{where}: the ssh config includes more than {MAX_INCLUDES:,} files")
        full = home_expanded(pattern)
        if not os.path.isabs(full):
            full = str(reading.base / full)  # OpenSSH: relative to ~/.ssh for a user's config
        try:
            found = sorted(glob.glob(full))
        except ValueError:  # a NUL in the pattern
            found = []
        for name in found:
            if not os.path.isdir(name):  # OpenSSH reads nothing from a directory
                _read(Path(name), reading, depth + 1, inner)
    blocks.append(_Block(here.patterns, match=here.match, guards=here.guards))  # back in it


def ssh_hosts(
    pattern: str, path: Path | None = None, source: str | None = None, limit: int = MAX_HOSTS
) -> list[ResolvedHost]:
    """The entries whose alias matches the glob `pattern` (empty: every entry); InventoryError for
    more than `limit` of them (counted before any is resolved)."""
    path = path or default_path()
    glob_pattern = pattern or "*"
    where = source or f"@ssh:{pattern}"
    blocks = read_blocks(path, where)
    aliases: dict[str, str] = {}  # lower-cased -> as written, in file order
    for block in blocks:
        if block.patterns is None or block.match:
            continue
        for name, alias in block.patterns.names.items():
            if name not in aliases and fnmatch.fnmatchcase(alias, glob_pattern) and block.applies(name):
                aliases[name] = alias
    if not aliases:
        raise InventoryError(
            f"{shortened(where)}: no Host entry of {quoted_path(path)} matches {quoted(glob_pattern)}"
        )
    if len(aliases) > limit:
        raise over_cap(where)
    index = _Index(blocks)
    return [checked(_resolve(alias, index, where), where) for alias in aliases.values()]


class _Index:
    """Which blocks may apply to an alias, found without a scan of every block for each: a block
    whose patterns are all plain names is listed under each name; the others (wildcards, the
    options before the first Host line) may apply to any alias. Blocks that set none of WANTED, and
    Match blocks, are left out: they change nothing shown."""

    def __init__(self, blocks: list[_Block]) -> None:
        self.blocks = blocks
        self.by_name: dict[str, list[int]] = {}
        self.general: list[int] = []
        for number, block in enumerate(blocks):
            if not block.options or block.match or block.guards is None:
                continue
            if block.patterns is None or block.patterns.globs:
                self.general.append(number)
                continue
            for name in block.patterns.names:
                self.by_name.setdefault(name, []).append(number)

    def applying(self, name: str) -> Iterable[_Block]:
        """The blocks that apply to the alias `name` (lower-cased), in file order."""
        for number in heapq.merge(self.by_name.get(name, ()), self.general):
            block = self.blocks[number]
            if block.applies(name):
                yield block


def _resolve(alias: str, index: _Index, source: str) -> ResolvedHost:
    values: dict[str, str] = {}
    for block in index.applying(alias.lower()):
        for key, value in block.options.items():
            values.setdefault(key, value)  # the first value obtained wins, as in OpenSSH
    hostname = values.get("hostname", alias).replace("%h", alias).replace("%%", "%")
    port_text = values.get("port")
    port = None if port_text is None else _port(port_text, shortened(source))
    jump = values.get("proxyjump")
    return ResolvedHost(
        name=alias,
        address=hostname,
        user=values.get("user"),
        port=port,
        jump=None if jump is None or jump.lower() == "none" else jump,
        source=source,
        alias=True,
    )

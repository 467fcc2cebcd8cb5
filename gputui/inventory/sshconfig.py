"""`@ssh:PATTERN`: the `Host` entries of ~/.ssh/config whose name matches a glob.

Each entry's HostName, User, Port and ProxyJump are shown as OpenSSH would take them: the first value
of each option from the blocks that apply to the alias, in file order (a `Host *` block at the end
fills what the entry leaves unset). `Include` is followed (relative paths are under ~/.ssh, globs
expand, at most 16 deep as in OpenSSH; inside a Host block, what it reads applies only to the hosts
that block matches, as in OpenSSH); `Match` blocks are not evaluated (their options are left out
of what is shown; the connection itself applies them: asyncssh reads the same file). Entries whose
patterns are all wildcards or negations (`Host *`, `Host !bastion *.lan`) name no host and are
skipped. A host from here connects through its alias, so every option of its block applies.
"""

from __future__ import annotations

import fnmatch
import glob
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from .base import InventoryError, ResolvedHost, checked

MAX_INCLUDE_DEPTH = 16  # OpenSSH's READCONF_MAX_DEPTH
_LINE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9]*)\s*(?:=\s*|\s+)(.*?)\s*$")
WANTED = ("hostname", "user", "port", "proxyjump")


@dataclass
class _Block:
    patterns: list[str] | None  # None: the options before the first Host line (apply to every host)
    options: list[tuple[str, str]] = field(default_factory=list)
    match: bool = False  # a Match block: not evaluated here
    # An Include inside a Host block is conditional (OpenSSH): what it reads applies only to hosts
    # that block matches too. None: inside a Match block, so never here.
    guards: list[list[str]] | None = field(default_factory=list)

    def applies(self, alias: str) -> bool:
        if self.match or self.guards is None:
            return False
        if any(not _matches(alias, guard) for guard in self.guards):
            return False
        return self.patterns is None or _matches(alias, self.patterns)


def default_path() -> Path:
    return Path("~/.ssh/config").expanduser()


def read_blocks(path: Path) -> list[_Block]:
    """The config as blocks in order, Include files read in place. InventoryError when it is absent."""
    if not path.is_file():
        raise InventoryError(f"@ssh: no ssh config at {path}")
    blocks = [_Block(None)]
    _read(path, blocks, 0, Path("~/.ssh").expanduser(), [])
    return blocks


def _read(path: Path, blocks: list[_Block], depth: int, base: Path, guards: list[list[str]] | None) -> None:
    if depth > MAX_INCLUDE_DEPTH:
        raise InventoryError(f"@ssh: Include nested more than {MAX_INCLUDE_DEPTH} deep at {path} (a loop?)")
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InventoryError(f"@ssh: cannot read {path}: {exc.strerror or exc}") from None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _LINE.match(stripped)
        if match is None:
            continue
        key, rest = match.group(1).lower(), match.group(2)
        try:
            args = shlex.split(rest, comments=True)
        except ValueError:
            continue  # an unbalanced quote: OpenSSH refuses the file; the connection will say so
        if key == "host":
            blocks.append(_Block(args, guards=guards))
        elif key == "match":
            blocks.append(_Block([], match=True, guards=guards))
        elif key == "include":
            here = blocks[-1]
            inner = guards
            if here.match or inner is None:
                inner = None
            elif here.patterns is not None:
                inner = [*inner, here.patterns]
            # What the file says before its first Host line belongs to the including block.
            blocks.append(_Block(None, guards=inner))
            for pattern in args:
                full = Path(pattern).expanduser()
                if not full.is_absolute():
                    full = base / full  # OpenSSH: relative to ~/.ssh for a user's config
                for found in sorted(glob.glob(str(full))):
                    _read(Path(found), blocks, depth + 1, base, inner)
            blocks.append(_Block(here.patterns, match=here.match, guards=here.guards))  # back in it
        elif args:
            blocks[-1].options.append((key, args[0]))


def _matches(alias: str, patterns: list[str]) -> bool:
    """OpenSSH's Host rule: some pattern matches and no negated one does (case-insensitive)."""
    name = alias.lower()
    hit = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        if fnmatch.fnmatchcase(name, pattern.lstrip("!").lower()):
            if negated:
                return False
            hit = True
    return hit


def _is_name(pattern: str) -> bool:
    return not pattern.startswith("!") and not any(c in pattern for c in "*?")


def ssh_hosts(pattern: str, path: Path | None = None, source: str | None = None) -> list[ResolvedHost]:
    """The entries whose alias matches the glob `pattern` (empty: every entry)."""
    path = path or default_path()
    glob_pattern = pattern or "*"
    where = source or f"@ssh:{pattern}"
    blocks = read_blocks(path)
    aliases: dict[str, None] = {}
    for block in blocks:
        if block.patterns is None or block.match:
            continue
        for name in block.patterns:
            if _is_name(name) and fnmatch.fnmatchcase(name, glob_pattern) and block.applies(name):
                aliases.setdefault(name, None)
    if not aliases:
        raise InventoryError(f"{where}: no Host entry of {path} matches {glob_pattern!r}")
    return [checked(_resolve(alias, blocks, where), where) for alias in aliases]


def _resolve(alias: str, blocks: list[_Block], source: str) -> ResolvedHost:
    values: dict[str, str] = {}
    for block in blocks:
        if not block.applies(alias):
            continue
        for key, value in block.options:
            if key in WANTED:
                values.setdefault(key, value)  # the first value obtained wins, as in OpenSSH
    hostname = values.get("hostname", alias).replace("%h", alias).replace("%%", "%")
    port_text = values.get("port", "")
    port = int(port_text) if port_text.isdigit() else None
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

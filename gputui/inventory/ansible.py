"""`@ansible:INVENTORY[:GROUP]`: the hosts of an Ansible inventory, through `ansible-inventory -i INV
--list` (so every inventory form and plugin Ansible knows works: INI, YAML, directories, scripts).

A host's address, user and port come from `ansible_host`, `ansible_user` and `ansible_port` (or their
old `ansible_ssh_*` names); a jump host from `-J HOST` or `-o ProxyJump=HOST` in
`ansible_ssh_common_args` / `ansible_ssh_extra_args`; `ansible_connection=local` is this machine
(and only it: a host named `local` without it is that host, over SSH).
GROUP (default `all`) includes its child groups' hosts.

`ansible-inventory` runs an executable inventory (a script, a plugin), as the user running gputui;
gputui runs only `ansible-inventory`, within gputui/inventory/tool.py's bounds, and checks every value
of its answer that it uses: names, addresses, users and jump hosts are words (tool.word), ports are
1-65535 in ASCII digits, the groups' lists are lists of names, at most MAX_HOSTS hosts.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..config.file import LOCAL
from ..config.hostlist import MAX_HOSTS, MAX_WORD
from .base import InventoryError, ResolvedHost, checked
from .tool import described, label, parse_json, port, run_tool, shown, word

INSTALL = "install Ansible (Debian: ansible-core)"
TOOL = "ansible-inventory"
MAX_ARGS = 4096  # characters of ansible_ssh_common_args / _extra_args read for a jump host
_GROUPS_SHOWN = 20  # groups named when the one asked for is not there


def split_spec(arg: str) -> tuple[str, str | None]:
    """`inv.yml:gpus` -> ("inv.yml", "gpus"); a path that exists as written keeps its colons."""
    if not arg or _exists(_path(arg)) or ":" not in arg:
        return arg, None
    path, _, group = arg.rpartition(":")
    return path, group or None


def _path(text: str) -> Path:
    """`~/inv.yml` expanded; `~nosuch/inv.yml` (no such user) as written, which then is not there."""
    try:
        return Path(text).expanduser()
    except RuntimeError:
        return Path(text)


def _exists(path: Path) -> bool:
    """Whether something is at `path`; a path the system refuses (too long, a NUL) is nothing."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def inventory_hosts(arg: str, source: str | None = None) -> list[ResolvedHost]:
    spec = source or f"@ansible:{arg}"
    where = label(spec)
    path, group = split_spec(arg)
    if not path:
        raise InventoryError(f"{where}: name the inventory: @ansible:PATH or @ansible:PATH:GROUP")
    inventory = _path(path)
    if not _exists(inventory):
        raise InventoryError(f"{where}: no inventory at {shown(str(inventory), 300, quote=False)}")
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="False")
    out = run_tool([TOOL, "-i", str(inventory), "--list"], where, install=INSTALL, env=env)
    data = parse_json(out, where, TOOL)
    del out  # up to 64 MiB, not kept while the hosts are made
    if not isinstance(data, dict):
        raise InventoryError(f"{where}: {TOOL} printed no inventory", unavailable=True)
    wanted = group or "all"
    if wanted not in data or wanted == "_meta":
        raise InventoryError(f"{where}: the inventory has no group {shown(wanted)} ({_known(data)})")
    hostvars = _hostvars(data, where)
    names = _hosts_of(data, wanted, where)
    if not names:
        raise InventoryError(f"{where}: no hosts in {'group ' + shown(group) if group else 'the inventory'}")
    return [checked(_host(name, hostvars.get(name), group, spec), where) for name in names]


def _known(data: dict[str, Any]) -> str:
    """The inventory's groups for a message: the first few, escaped, and how many more."""
    groups = sorted(k for k in data if k not in ("_meta", "all", "ungrouped"))
    if not groups:
        return "it has no groups"
    named = ", ".join(shown(g, quote=False) for g in groups[:_GROUPS_SHOWN])
    more = f" and {len(groups) - _GROUPS_SHOWN:,} more" if len(groups) > _GROUPS_SHOWN else ""
    return f"its groups: {named}{more}"


def _hostvars(data: dict[str, Any], where: str) -> dict[str, Any]:
    meta = data.get("_meta") or {}
    hostvars = (meta.get("hostvars") or {}) if isinstance(meta, dict) else None
    if not isinstance(hostvars, dict):
        raise InventoryError(f"{where}: {TOOL}'s _meta.hostvars is not a table of hosts")
    return hostvars


def _hosts_of(data: dict[str, Any], group: str, where: str) -> list[str]:
    """The group's hosts, then its children's, depth first, each once (a cycle is cut): iterative,
    so that a chain of 100,000 child groups is no deeper in Python than one."""
    out: dict[str, None] = {}
    seen: set[str] = set()
    stack: list[Iterator[str]] = [iter((group,))]
    while stack:
        name = next(stack[-1], None)
        if name is None:
            stack.pop()
            continue
        if name in seen:
            continue
        seen.add(name)
        entry = data.get(name)
        if not isinstance(entry, dict):
            continue
        for host in _names(entry, "hosts", name, where):
            out.setdefault(host, None)
            if len(out) > MAX_HOSTS:
                raise InventoryError(f"{where}: the inventory lists more than {MAX_HOSTS:,} hosts")
        stack.append(iter(_names(entry, "children", name, where)))
    return list(out)


def _names(entry: dict[str, Any], key: str, group: str, where: str) -> list[str]:
    """A group's `hosts` or `children`: a list of names (none if absent)."""
    listed = entry.get(key)
    if listed is None:
        return []
    if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
        raise InventoryError(f"{where}: {TOOL}: the {key} of group {shown(group)} are not a list of names")
    return listed


def _host(name: str, hostvars: Any, group: str | None, spec: str) -> ResolvedHost:
    where = label(spec)
    who = f"host {shown(name)}"
    word(name, "host name", where)
    if hostvars is not None and not isinstance(hostvars, dict):
        raise InventoryError(f"{where}: {who}: its vars are not a table")
    vars_: dict[str, Any] = hostvars or {}

    def text(*keys: str, most: int = MAX_WORD) -> str | None:
        """The first of `keys` that is set, as text; a value that is no text is refused."""
        for key in keys:
            value = vars_.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, str | int):
                raise InventoryError(f"{where}: {who}: {key} {described(value)} is not text")
            if len(str(value)) > most:
                raise InventoryError(f"{where}: {who}: {key} is longer than {most:,} characters")
            if str(value).strip():
                return str(value).strip()
        return None

    # Only ansible_connection=local is this machine, as for Ansible: a host named `local` (or whose
    # ansible_host is) is another machine, reached over SSH by that name.
    here = text("ansible_connection") == "local"
    address = LOCAL if here else text("ansible_host", "ansible_ssh_host") or name
    user = text("ansible_user", "ansible_ssh_user", "ansible_remote_user")
    port_key, port_value = next(
        ((k, v) for k in ("ansible_port", "ansible_ssh_port") if (v := vars_.get(k)) not in (None, "")),
        ("", None),
    )
    args = [text(k, most=MAX_ARGS) for k in ("ansible_ssh_common_args", "ansible_ssh_extra_args")]
    jump = _jump(" ".join(filter(None, args)))
    return ResolvedHost(
        name=name,
        address=word(address, f"{who}: ansible_host", where),
        user=None if user is None else word(user, f"{who}: ansible_user", where),
        port=None if port_value is None else port(port_value, f"{who}: {port_key}", where),
        jump=None if jump is None else word(jump, f"{who}: the jump host", where),
        group=group,
        source=spec,
        remote=not here,
    )


def _jump(args: str) -> str | None:
    """ProxyJump from ssh options: `-J HOST`, `-JHOST`, `-o ProxyJump=HOST`, `-oProxyJump HOST`."""
    try:
        words = shlex.split(args)
    except ValueError:
        return None
    for i, arg in enumerate(words):
        following = words[i + 1] if i + 1 < len(words) else ""
        if arg == "-J":
            return following or None
        if arg.startswith("-J"):
            return arg[2:]
        option = following if arg == "-o" else arg[2:] if arg.startswith("-o") else None
        if option is None:
            continue
        key, _, value = option.replace("=", " ", 1).partition(" ")
        if key.lower() == "proxyjump" and value.strip() and value.strip().lower() != "none":
            return value.strip()
    return None

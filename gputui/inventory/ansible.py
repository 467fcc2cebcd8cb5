"""`@ansible:INVENTORY[:GROUP]`: the hosts of an Ansible inventory, through `ansible-inventory -i INV
--list` (so every inventory form and plugin Ansible knows works: INI, YAML, directories, scripts).

A host's address, user and port come from `ansible_host`, `ansible_user` and `ansible_port` (or their
old `ansible_ssh_*` names); a jump host from `-J HOST` or `-o ProxyJump=HOST` in
`ansible_ssh_common_args` / `ansible_ssh_extra_args`; `ansible_connection=local` is this machine.
GROUP (default `all`) includes its child groups' hosts.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from ..config import LOCAL
from .base import InventoryError, ResolvedHost, checked, last_line, run_tool

INSTALL = "install Ansible (Debian: ansible-core)"


def split_spec(arg: str) -> tuple[str, str | None]:
    """`inv.yml:gpus` -> ("inv.yml", "gpus"); a path that exists as written keeps its colons."""
    if not arg or Path(arg).expanduser().exists() or ":" not in arg:
        return arg, None
    path, _, group = arg.rpartition(":")
    return path, group or None


def inventory_hosts(arg: str, source: str | None = None) -> list[ResolvedHost]:
    where = source or f"@ansible:{arg}"
    path, group = split_spec(arg)
    if not path:
        raise InventoryError(f"{where}: name the inventory: @ansible:PATH or @ansible:PATH:GROUP")
    inventory = Path(path).expanduser()
    if not inventory.exists():
        raise InventoryError(f"{where}: no inventory at {inventory}")
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="False")
    out = run_tool(["ansible-inventory", "-i", str(inventory), "--list"], where, install=INSTALL, env=env)
    try:
        data = json.loads(out)
    except ValueError:
        why = last_line(out.encode())
        raise InventoryError(
            f"{where}: ansible-inventory did not print JSON ({why})", unavailable=True
        ) from None
    if not isinstance(data, dict):
        raise InventoryError(f"{where}: ansible-inventory printed no inventory", unavailable=True)
    wanted = group or "all"
    if wanted not in data or wanted == "_meta":
        groups = sorted(k for k in data if k not in ("_meta", "all", "ungrouped"))
        known = f"its groups: {', '.join(groups)}" if groups else "it has no groups"
        raise InventoryError(f"{where}: the inventory has no group {wanted!r} ({known})")
    meta = data.get("_meta")
    hostvars = meta.get("hostvars", {}) if isinstance(meta, dict) else {}
    names = _hosts_of(data, wanted, set())
    if not names:
        raise InventoryError(f"{where}: no hosts in {'group ' + repr(group) if group else 'the inventory'}")
    return [checked(_host(name, hostvars.get(name), group, where), where) for name in names]


def _hosts_of(data: dict[str, Any], group: str, seen: set[str]) -> list[str]:
    """The group's hosts, then its children's, each once (a cycle is cut)."""
    if group in seen:
        return []
    seen.add(group)
    entry = data.get(group)
    if not isinstance(entry, dict):
        return []
    out: dict[str, None] = {}
    for name in entry.get("hosts", []) or []:
        if isinstance(name, str):
            out.setdefault(name, None)
    for child in entry.get("children", []) or []:
        if isinstance(child, str):
            out.update(dict.fromkeys(_hosts_of(data, child, seen)))
    return list(out)


def _host(name: str, hostvars: Any, group: str | None, where: str) -> ResolvedHost:
    vars_ = hostvars if isinstance(hostvars, dict) else {}

    def text(*keys: str) -> str | None:
        for key in keys:
            value = vars_.get(key)
            if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
                return str(value).strip()
        return None

    address = text("ansible_host", "ansible_ssh_host") or name
    if text("ansible_connection") == "local":
        address = LOCAL
    port_text = text("ansible_port", "ansible_ssh_port")
    port = None
    if port_text is not None:
        if not port_text.isdigit():
            raise InventoryError(f"{where}: host {name!r}: ansible_port {port_text!r} is not a number")
        port = int(port_text)
    return ResolvedHost(
        name=name,
        address=address,
        user=text("ansible_user", "ansible_ssh_user", "ansible_remote_user"),
        port=port,
        jump=_jump(" ".join(filter(None, (text("ansible_ssh_common_args"), text("ansible_ssh_extra_args"))))),
        group=group,
        source=where,
    )


def _jump(args: str) -> str | None:
    """ProxyJump from ssh options: `-J HOST`, `-JHOST`, `-o ProxyJump=HOST`, `-oProxyJump HOST`."""
    try:
        words = shlex.split(args)
    except ValueError:
        return None
    for i, word in enumerate(words):
        following = words[i + 1] if i + 1 < len(words) else ""
        if word == "-J":
            return following or None
        if word.startswith("-J"):
            return word[2:]
        option = following if word == "-o" else word[2:] if word.startswith("-o") else None
        if option is None:
            continue
        key, _, value = option.replace("=", " ", 1).partition(" ")
        if key.lower() == "proxyjump" and value.strip() and value.strip().lower() != "none":
            return value.strip()
    return None

"""Resolved hosts as the transports need them (HostSpec), with the config's hosts and defaults.

A host a source lists gets the config's [defaults] (user, python, sudo, jump...), then what the
source says of it (its user, port, jump); a name the config has a [[hosts]] entry for is that entry.
A host written as itself on the command line (`user@host:port`) is as it was before sources came:
no defaults (a [[hosts]] entry is where a host's settings live).
An ~/.ssh/config entry connects through its alias: every option of its block applies there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from ..config.file import LOCAL, Config, HostSpec
from .base import ResolvedHost
from .sources import Resolver

_SPEC_FIELDS = {f.name for f in fields(HostSpec)}


def this_machine(host: ResolvedHost) -> bool:
    """Whether `host` is the machine gputui runs on: the word `local` where the user wrote it (the
    command line, a host file, a hostlist, the config, an inventory's `ansible_connection=local`); a
    node that kubectl, Slurm, an ssh config Host or an Ansible inventory names "local" is that node,
    over SSH (`remote`, `alias`)."""
    return host.address == LOCAL and not (host.alias or host.remote)


def config_host(spec: HostSpec) -> ResolvedHost:
    """A [[hosts]] entry as the inventory lists it."""
    return ResolvedHost(
        spec.name, spec.address, user=spec.user, port=spec.port, jump=spec.jump, source="config"
    )


def resolver(config: Config, ssh_config: Path | None = None) -> Resolver:
    return Resolver(config.groups, {h.name: config_host(h) for h in config.hosts}, ssh_config)


def resolve_hosts(words: Sequence[str], config: Config, ssh_config: Path | None = None) -> list[ResolvedHost]:
    """The hosts the specs name (InventoryError when one names none)."""
    return resolver(config, ssh_config).resolve_all(words)


def to_spec(host: ResolvedHost, config: Config, entries: Mapping[str, HostSpec] | None = None) -> HostSpec:
    """`entries`: the config's hosts by name (made here when not given)."""
    entries = entries if entries is not None else {h.name: h for h in config.hosts}
    entry = entries.get(host.name) if host.source == "config" or host.name in entries else None
    if entry is not None:
        return entry
    values: dict[str, Any] = {}
    if host.source:  # listed by a source, not written as itself
        values.update((k, v) for k, v in config.defaults.items() if k in _SPEC_FIELDS)
    values["name"] = host.name
    if host.alias:
        values["address"] = host.name  # the ssh config applies its block (HostName, User, ...)
    else:
        values["address"] = host.address
        for key in ("user", "port", "jump"):
            value = getattr(host, key)
            if value is not None:
                values[key] = value
    if this_machine(host):
        values.pop("jump", None)
    elif values["address"] == LOCAL:
        values["over_ssh"] = True  # a cluster's node named "local": never this machine in its place
    values["group"] = host.group  # the fleet view folds healthy hosts by it
    if host.feed is not None:  # series, not a probe: nothing there can be acted on
        values.update(feed=host.feed, read_only=True)
    return HostSpec(**values)


def shown(host: ResolvedHost, config: Config, entries: Mapping[str, HostSpec] | None = None) -> ResolvedHost:
    """The host as `gputui hosts` lists it: the user, port and jump the connection will use (as
    to_spec makes it: the config's [defaults] where they apply), else what the source said (an ssh
    config entry's own User, Port, ProxyJump)."""
    spec = to_spec(host, config, entries)
    return replace(
        host,
        user=spec.user if spec.user is not None else host.user,
        port=spec.port if spec.port is not None else host.port,
        jump=spec.jump if spec.jump is not None else host.jump,
    )


def host_specs(words: Sequence[str], config: Config, ssh_config: Path | None = None) -> list[HostSpec]:
    entries = {h.name: h for h in config.hosts}
    return [to_spec(h, config, entries) for h in resolve_hosts(words, config, ssh_config)]

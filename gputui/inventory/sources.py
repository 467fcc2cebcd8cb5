"""One host spec to the hosts it names: the dispatcher of every source.

    gpu[001-128]  node[1-4,7]-ib  a,b      a hostlist expression (gputui/inventory/hostlist.py)
    @file:PATH                             one host (or hostlist) a line; `#` starts a comment
    @ssh:PATTERN                           ~/.ssh/config entries (gputui/inventory/sshconfig.py)
    @slurm:PARTITION  @slurm-job:ID        Slurm (gputui/inventory/slurm.py)
    @ansible:INVENTORY[:GROUP]             Ansible (gputui/inventory/ansible.py)
    @prometheus:URL[#SELECTOR]             hosts with GPU series in a Prometheus (inventory/prometheus.py)
    @kube:[SELECTOR]                       a Kubernetes cluster's GPU nodes (gputui/inventory/kube.py)
    @group:NAME, or NAME                   a group of the config's [groups] table (members: any spec)
    anything else                          one host, ssh-style (`user@host:port`, an alias, `local`)

Hosts of a hostlist or a file are written ssh-style too: `alice@gpu[1-4]:2222` is four hosts.
A host named twice by sources is kept once, where it was first listed; a group's hosts carry the
group's name (the outermost group's, for a group within a group).

One command names at most MAX_HOSTS hosts, all its specs, files, groups and sources together: each
is counted as it is resolved (a hostlist before any of its names is made), and the first that goes
past the cap is refused. A host file is a regular file of at most MAX_FILE_BYTES.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from ..config import userfile
from ..config.file import ConfigError, parse_host_arg
from ..config.hostlist import (
    MAX_HOSTS,
    SOURCES,
    HostlistError,
    expand,
    is_hostlist,
    quoted,
    quoted_path,
    shortened,
    size,
)
from ..model.textsafe import printable
from . import ansible, kube, slurm, sshconfig
from .base import InventoryError, ResolvedHost, checked, home_expanded, over_cap, read_regular

MAX_FILE_BYTES = userfile.LIST_BYTES  # a host file larger than this is not a host file
SPEC_HELP = (
    "a host spec is HOST, user@host[:port], a hostlist like gpu[001-128], @file:PATH, @ssh:PATTERN, "
    "@slurm:PARTITION, @slurm-job:ID, @ansible:INVENTORY[:GROUP], @prometheus:URL[#SELECTOR], "
    "@kube:[SELECTOR], @group:NAME or a group's name"
)


def is_spec(word: str, groups: Mapping[str, object]) -> bool:
    """Whether `word` names hosts through a source (not one host as written)."""
    return word.startswith("@") or word in groups or is_hostlist(word)


def _prometheus_hosts(arg: str, source: str) -> list[ResolvedHost]:
    # Imported here: the source queries over aiohttp; importing it costs 114 ms beyond what every
    # command loads (-X importtime, dev VM), and this module is loaded at every command's start.
    from . import prometheus

    return prometheus.prometheus_hosts(arg, source)


class Resolver:
    """Resolves specs against the config's groups and hosts. `known`: the config's hosts by name
    (a name there stands for its entry, also inside a group or a hostlist); `ssh_config`: the file
    @ssh reads (default ~/.ssh/config). One resolver serves one command: `left` counts down the
    hosts it may still name, from `limit`."""

    def __init__(
        self,
        groups: Mapping[str, Sequence[str]] | None = None,
        known: Mapping[str, ResolvedHost] | None = None,
        ssh_config: Path | None = None,
        limit: int = MAX_HOSTS,
    ) -> None:
        self.groups = dict(groups or {})
        self.known = dict(known or {})
        self.ssh_config = ssh_config
        self.left = limit

    def _take(self, count: int, source: str) -> None:
        """Count `count` more hosts, before they are made; InventoryError past the cap."""
        if count > self.left:
            raise over_cap(source)
        self.left -= count

    def resolve_all(self, words: Sequence[str]) -> list[ResolvedHost]:
        """Every host of every spec, in order. A host listed twice by sources is kept once; the
        same plain host written twice is kept twice (the caller says it is named twice)."""
        out: list[ResolvedHost] = []
        seen: set[str] = set()
        for word in words:
            hosts = self.resolve(word)
            plain = not is_spec(word, self.groups)
            for host in hosts:
                if host.name in seen and not plain:
                    continue
                seen.add(host.name)
                out.append(host)
        return out

    def resolve(self, word: str, stack: tuple[str, ...] = ()) -> list[ResolvedHost]:
        text = word.strip()
        if not text:
            raise InventoryError(f"an empty host spec; {SPEC_HELP}")
        if text in self.known:
            self._take(1, text)
            return [self.known[text]]
        if text.startswith("@"):
            kind, sep, arg = text[1:].partition(":")
            handler = self._handlers().get(kind)
            if handler is None or not sep:
                known = ", ".join(f"@{k}:" for k in SOURCES)
                raise InventoryError(f"{quoted(text)}: unknown source (the sources are {known})")
            return handler(arg.strip(), text, stack)
        if text in self.groups:
            return self._group(text, text, stack)
        if is_hostlist(text):
            return self._hostlist(text, text)
        self._take(1, text)
        return [self._one(text, "")]  # no source: as written on the command line

    def _handlers(self) -> dict[str, Callable[[str, str, tuple[str, ...]], list[ResolvedHost]]]:
        return {
            "file": lambda arg, src, _stack: self._file(arg, src),
            "ssh": lambda arg, src, _stack: self._counted(
                sshconfig.ssh_hosts(arg, self.ssh_config, src, limit=self.left), src
            ),
            "slurm": lambda arg, src, _stack: self._counted(slurm.partition_hosts(arg, src), src),
            "slurm-job": lambda arg, src, _stack: self._counted(slurm.job_hosts(arg, src), src),
            "ansible": lambda arg, src, _stack: self._counted(ansible.inventory_hosts(arg, src), src),
            "prometheus": lambda arg, src, _stack: self._counted(_prometheus_hosts(arg, src), src),
            "kube": lambda arg, src, _stack: self._counted(kube.kube_hosts(arg, src), src),
            "group": self._group,
        }

    def _counted(self, hosts: list[ResolvedHost], source: str) -> list[ResolvedHost]:
        self._take(len(hosts), source)
        return hosts

    # ----------------------------------------------------------------- the sources kept here

    def _one(self, text: str, source: str) -> ResolvedHost:
        """One host as written, ssh-style (a config host by its name)."""
        if text in self.known:
            return self.known[text]
        try:
            spec = parse_host_arg(text)
        except ConfigError as exc:
            raise InventoryError(f"{shortened(source)}: {exc.message}" if source else exc.message) from None
        host = ResolvedHost(spec.name, spec.address, spec.user, spec.port, source=source)
        return checked(host, source or text)

    def _hostlist(self, text: str, source: str) -> list[ResolvedHost]:
        try:
            self._take(size(text, self.left), source)  # counted before a name is made
            names = expand(text)
        except HostlistError as exc:
            raise InventoryError(f"bad hostlist {exc}") from None
        return [self._one(name, source) for name in names]

    def _file(self, arg: str, source: str) -> list[ResolvedHost]:
        if not arg:
            raise InventoryError(f"{shortened(source)}: name the file: @file:PATH")
        path = Path(home_expanded(arg))
        data = read_regular(
            path, MAX_FILE_BYTES, source, f"is over {MAX_FILE_BYTES >> 20} MiB: not a host list"
        )
        out: list[ResolvedHost] = []
        # Lines end at "\n" only, as the file's lines do in an editor: splitlines would also end
        # one at U+0085 or U+2028, and make two good names of one that the host rule refuses.
        for number, raw in enumerate(data.decode("utf-8", "replace").split("\n"), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            where = f"{shortened(source)} line {number}"
            try:
                if is_hostlist(line):
                    out += self._hostlist(line, source)
                else:
                    self._take(1, source)
                    out.append(self._one(line, source))
            except InventoryError as exc:
                said = exc.message.removeprefix(printable(shortened(source) + ": "))
                raise InventoryError(f"{where}: {said}") from None
        if not out:
            raise InventoryError(f"{shortened(source)}: {quoted_path(path)} lists no host")
        return out

    def _group(self, name: str, source: str, stack: tuple[str, ...]) -> list[ResolvedHost]:
        if name not in self.groups:
            known = ", ".join(sorted(self.groups)) or "none (add a [groups] table to the config)"
            raise InventoryError(
                f"{shortened(source)}: no group {quoted(name)} in the config (its groups: {known})"
            )
        if name in stack:
            raise InventoryError(f"group {quoted(name)} contains itself ({' -> '.join([*stack, name])})")
        out: dict[str, ResolvedHost] = {}
        for member in self.groups[name]:
            for host in self.resolve(member, (*stack, name)):
                out.setdefault(host.name, host)
        if not out:
            raise InventoryError(f"{shortened(source)}: group {quoted(name)} is empty")
        return [replace(host, group=name) for host in out.values()]

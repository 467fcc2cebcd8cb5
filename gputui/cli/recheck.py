"""The command that shows one host again, as a command that works as printed: what `gputui clean`
tells the user to run when it cannot say how a plan ended (Ctrl+C).

It names the host the way this command line did: `--demo` for the demo's hosts, `--config PATH`
(absolute, so it works from any directory) where a config file was read, and a host word that
resolves to the very host that was cleaned: its name where that is enough, else `user@host:port`,
else the words that named it on this command line (which may name more hosts). Every word is
quoted for a POSIX shell and escaped, so a host name never runs as code when the line is pasted.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from ..config.file import LOCAL, Config, ConfigError, HostSpec
from ..inventory.base import InventoryError
from ..inventory.specs import host_specs
from ..model.textsafe import printable

# A host's name to the command that shows it again.
Recheck = Callable[[str], str]


def snapshot_command(
    host: str, specs: Mapping[str, HostSpec], words: Sequence[str], demo: bool, config: Config
) -> str:
    """`gputui snapshot ...` that shows `host` (one of `specs`, named by `words` on the command
    line, with `--demo` or not, under `config`), quoted and escaped, ready to paste."""
    options: list[str] = []
    if demo:
        options.append("--demo")
    elif config.path is not None:
        options += ["--config", os.path.abspath(config.path)]
    spec = specs.get(host)
    word = None if demo or spec is None else _host_word(spec, config)
    if demo or spec is None:
        hosts = [host]
    elif word is not None:
        hosts = [word]
    else:  # a host only its source names as it is (defaults from the config, say): the same words
        hosts = list(words) or [host]
    # A word that starts with '-' would read as an option: after `--` it is a HOST.
    end = ["--"] if any(h.startswith("-") for h in hosts) else []
    return printable(shlex.join(["gputui", "snapshot", *options, *end, *hosts]))


def snapshot_commands(specs: Sequence[HostSpec], words: Sequence[str], demo: bool, config: Config) -> Recheck:
    """`snapshot_command` for the hosts `specs`, as a function of a host's name."""
    by_name = {s.name: s for s in specs}
    return lambda host: snapshot_command(host, by_name, words, demo, config)


def _host_word(spec: HostSpec, config: Config) -> str | None:
    """The word that names `spec` alone: its name, where that resolves to it, else `user@host:port`."""
    if _same(spec.name, spec, config):
        return spec.name
    word = _ssh_word(spec)
    return word if word is not None and _same(word, spec, config) else None


def _ssh_word(spec: HostSpec) -> str | None:
    """`[user@]host[:port]` (an IPv6 address in brackets) for a host reached directly."""
    if spec.is_local():
        return LOCAL
    address = f"[{spec.address}]" if ":" in spec.address else spec.address
    user = f"{spec.user}@" if spec.user else ""
    port = f":{spec.port}" if spec.port is not None else ""
    return f"{user}{address}{port}"


def _same(word: str, spec: HostSpec, config: Config) -> bool:
    """Whether `word` on a command line under `config` means exactly this host, connected the same
    way (its group and read-only flag aside: a snapshot only reads)."""
    try:
        found = host_specs([word], config)
    except (ConfigError, InventoryError, OSError):
        return False
    return [_connection(s) for s in found] == [_connection(spec)]


def _connection(spec: HostSpec) -> HostSpec:
    return replace(spec, group=None, read_only=False)

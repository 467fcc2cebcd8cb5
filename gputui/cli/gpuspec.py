"""GPU SPECs on the command line (`gputui clean`, `gputui wait`): which GPUs of which hosts.

A GPU SPEC is an NVML index (on every named host), a GPU UUID (or a unique prefix of one), a MIG
instance's UUID (`MIG-...`, or a unique prefix: that instance alone, not its GPU), HOST:INDEX or
HOST:all. A positional HOST:N with N < 64 is a GPU too (a larger N, or user@host:N, is an SSH
port). Indexes are ASCII digits: `²` is a digit to str.isdigit, not to int().
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..model import MigPlace, Sample
from ..model.textsafe import printable
from .argtypes import parse_index

MAX_POSITIONAL_GPU = 64  # HOST:N with N below this is a GPU; a larger N is an SSH port


class UsageError(Exception):
    """A spec (or another argument) that names nothing: the message says what to write instead."""


class NotFound(UsageError):
    """A name that matches nothing on the hosts that answered: the user's mistake where every host
    answered; where one did not, what it names may be there (the caller says so: clean.py)."""


def split_targets(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """Positional arguments: hosts, and GPU specs written as HOST:INDEX or HOST:all.

    A GPU spec also names its host. `user@host:port`, `[v6]:port` and HOST:N with N >= 64 stay
    hosts (SSH ports)."""
    hosts: list[str] = []
    specs: list[str] = []
    for name in names:
        host, sep, tail = name.rpartition(":")
        is_gpu = bool(sep and host) and "@" not in name and not name.startswith("[") and ":" not in host
        is_gpu = is_gpu and (
            tail == "all" or (parse_index(tail) is not None and int(tail) < MAX_POSITIONAL_GPU)
        )
        if is_gpu:
            specs.append(name)
            if host not in hosts:
                hosts.append(host)
        elif name not in hosts:
            hosts.append(name)
    return hosts, specs


def take_positional_gpus(args: argparse.Namespace) -> None:
    """Move the GPU specs among `args.hosts` (HOST:INDEX, HOST:all) to `args.gpu`, their hosts staying
    hosts: every command that takes GPU SPECs reads a positional `gpu-a:2` as `clean` does, so that
    `gputui clean gpu-a:2 --yes && gputui wait gpu-a:2` waits on the GPU just cleaned (read as a host,
    it was gpu-a over SSH on port 2, or a host the demo does not have)."""
    hosts, specs = split_targets(args.hosts or [])
    args.hosts = hosts
    args.gpu = [*(args.gpu or []), *specs]


@dataclass
class Targets:
    """What the GPU SPECs name on one host: whole GPUs by index, and MIG instances alone (a MIG
    UUID names its instance, never the GPU's other instances, which run other jobs)."""

    gpus: set[int] = field(default_factory=set)
    instances: set[MigPlace] = field(default_factory=set)

    def update(self, other: Targets) -> None:
        self.gpus |= other.gpus
        self.instances |= other.instances


def resolve_gpu_specs(
    specs: Sequence[str], samples: dict[str, Sample], hosts: Sequence[str]
) -> dict[str, Targets]:
    """GPU SPECs to {host: Targets}. Raises UsageError for a spec that names nothing."""
    out: dict[str, Targets] = {}
    for spec in specs:
        for host, targets in _resolve_one(spec.strip(), samples, hosts).items():
            out.setdefault(host, Targets()).update(targets)
    return out


def is_uuid(spec: str, hosts: Sequence[str]) -> bool:
    """A GPU's or MIG instance's UUID (or a prefix of one); HOST:INDEX first: a host may well be
    named like a UUID prefix ("gpu-a:3"), and a UUID has no ":"."""
    spec = spec.strip()
    return spec.upper().startswith(("GPU-", "MIG-")) and spec.rpartition(":")[0] not in hosts


def _by_uuid(spec: str, samples: dict[str, Sample]) -> dict[str, Targets]:
    """The one GPU or MIG instance whose UUID starts with `spec` (case aside), on whichever host."""
    found: dict[str, Targets] = {}
    matches = 0
    for host, sample in samples.items():
        here = Targets()
        for g in sample.gpus:
            if g.uuid and g.uuid.lower().startswith(spec.lower()):
                here.gpus.add(g.index)
            for instance in g.mig_instances or ():
                if instance.uuid and instance.uuid.lower().startswith(spec.lower()):
                    here.instances.add(instance.on(g.index))
        if here.gpus or here.instances:
            found[host] = here
            matches += len(here.gpus) + len(here.instances)
    what = "MIG instance" if spec.upper().startswith("MIG-") else "GPU"
    if not found:
        raise NotFound(f"--gpu {printable(spec)}: no {what} has that UUID")
    if matches != 1:
        raise UsageError(f"--gpu {printable(spec)}: several {what}s match that UUID")
    return found


def _resolve_one(spec: str, samples: dict[str, Sample], hosts: Sequence[str]) -> dict[str, Targets]:
    if is_uuid(spec, hosts):
        return _by_uuid(spec, samples)
    host, sep, index = spec.rpartition(":")
    if sep:
        if host not in hosts:
            raise UsageError(
                f"--gpu {printable(spec)}: {printable(host)} is not one of the hosts (name it as HOST)"
            )
        if host not in samples:
            return {}  # the host is down or has no GPU: its outcome says so
        return {host: Targets(_indexes_of(spec, index, samples[host], host))}
    return {h: Targets(_indexes_of(spec, spec, s, h)) for h, s in samples.items()}


def _indexes_of(spec: str, index: str, sample: Sample, host: str) -> set[int]:
    have = {g.index for g in sample.gpus}
    if index == "all":
        return have
    number = parse_index(index)
    if number is None:
        raise UsageError(f"--gpu {printable(spec)}: expected an index, a UUID, HOST:INDEX or HOST:all")
    if number not in have:
        listed = ", ".join(map(str, sorted(have))) or "none"
        raise UsageError(
            f"--gpu {printable(spec)}: {printable(host)} has no GPU {number} (its GPUs: {listed})"
        )
    return {number}

"""GPU SPECs on the command line (`gputui clean`, `gputui wait`): which GPUs of which hosts.

A GPU SPEC is an NVML index (on every named host), a GPU UUID (or a unique prefix of one), HOST:INDEX
or HOST:all. A positional HOST:N with N < 64 is a GPU too (a larger N, or user@host:N, is an SSH
port). Indexes are ASCII digits: `²` is a digit to str.isdigit, not to int().
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ..model import Sample
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


def resolve_gpu_specs(
    specs: Sequence[str], samples: dict[str, Sample], hosts: Sequence[str]
) -> dict[str, set[int]]:
    """GPU SPECs to {host: GPU indexes}. Raises UsageError for a spec that names nothing."""
    out: dict[str, set[int]] = {}
    for spec in specs:
        for host, indexes in _resolve_one(spec.strip(), samples, hosts).items():
            out.setdefault(host, set()).update(indexes)
    return out


def _resolve_one(spec: str, samples: dict[str, Sample], hosts: Sequence[str]) -> dict[str, set[int]]:
    # HOST:INDEX first: a host may well be named like a UUID prefix ("gpu-a:3"); a UUID has no ":".
    if spec.upper().startswith(("GPU-", "MIG-")) and spec.rpartition(":")[0] not in hosts:
        found = {
            host: {g.index for g in s.gpus if g.uuid and g.uuid.lower().startswith(spec.lower())}
            for host, s in samples.items()
        }
        found = {h: i for h, i in found.items() if i}
        if not found:
            raise NotFound(f"--gpu {printable(spec)}: no GPU has that UUID")
        if sum(len(i) for i in found.values()) != 1:
            raise UsageError(f"--gpu {printable(spec)}: several GPUs match that UUID")
        return found
    host, sep, index = spec.rpartition(":")
    if sep:
        if host not in hosts:
            raise UsageError(
                f"--gpu {printable(spec)}: {printable(host)} is not one of the hosts (name it as HOST)"
            )
        if host not in samples:
            return {}  # the host is down or has no GPU: its outcome says so
        return {host: _indexes_of(spec, index, samples[host], host)}
    return {h: _indexes_of(spec, spec, s, h) for h, s in samples.items()}


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

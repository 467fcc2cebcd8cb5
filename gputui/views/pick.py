"""Which GPUs of a host to hand the next run (`gputui pick`): those ready by `gputui wait`'s rule
(gputui.views.readiness), closest together first where the probe says how the host's GPUs are
linked (a GPU record's `topology`: an NVLink, a PCIe switch, a NUMA node, ...). Headless and pure.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ..model import Gpu, Preflight, Sample
from ..probe.common import TOPOLOGY_LEVELS
from .readiness import Conditions, Unready, unready

# A pair of GPUs the probe says nothing of: farther apart than any level it can name.
UNKNOWN = len(TOPOLOGY_LEVELS)
RANK = {level: rank for rank, level in enumerate(TOPOLOGY_LEVELS)}
# A GPU's UUID as NVML writes it: what `--uuid` prints into a shell line, so nothing else passes.
UUID = re.compile(r"GPU-[0-9A-Fa-f]{8}(-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}")


@dataclass(frozen=True, slots=True)
class Judged:
    """One GPU of a host as `pick` judges it: what it lacks now (empty: ready)."""

    gpu: Gpu
    unready: tuple[Unready, ...]

    @property
    def ready(self) -> bool:
        return not self.unready


def judge(
    gpu: Gpu,
    sample: Sample,
    conditions: Conditions,
    preflight: Preflight | None,
    idle: Mapping[tuple[int, int | None], float] | None = None,
    uuid: bool = False,
) -> Judged:
    """`gpu` by `wait`'s rule, and what `pick` needs besides: a whole GPU (one in MIG mode runs
    work only in its instances, which CUDA names by their own UUIDs), and with `uuid` a UUID a
    shell line can carry as it is."""
    found = list(unready(gpu, sample, conditions, preflight, idle=idle))
    if gpu.mig_instances is not None:
        found.append(Unready("mig", "in MIG mode: pick hands out whole GPUs"))
    if uuid and (gpu.uuid is None or not UUID.fullmatch(gpu.uuid)):
        found.append(Unready("uuid", "no UUID of the form GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"))
    return Judged(gpu, tuple(found))


Distances = dict[tuple[int, int], int]


def distances(gpus: Collection[Gpu]) -> Distances:
    """How far apart each pair of `gpus` (of one host) is, by index, both ways: the rank of their
    link in TOPOLOGY_LEVELS (0: an NVLink), the nearer where the two records differ; a pair
    neither record names is absent (UNKNOWN)."""
    indexes = {g.index for g in gpus}
    out: Distances = {}
    for gpu in gpus:
        for peer, level in gpu.topology or ():
            if peer in indexes and peer != gpu.index:
                rank = min(RANK[level], out.get((gpu.index, peer), UNKNOWN))
                out[gpu.index, peer] = out[peer, gpu.index] = rank
    return out


def link_of(gpus: Sequence[Gpu]) -> str | None:
    """The farthest link among `gpus` (`switch`: every pair shares at least a PCIe switch); None for
    one GPU, or where the probe says nothing of a pair."""
    worst, _ = _spread([g.index for g in gpus], distances(gpus))
    return TOPOLOGY_LEVELS[worst] if len(gpus) > 1 and worst < UNKNOWN else None


def closest(gpus: Collection[Gpu], n: int) -> tuple[Gpu, ...]:
    """`n` of `gpus` (at least n of them) that are closest together: the set whose farthest pair
    is nearest, then whose pairs are nearest in sum, then of the lowest indexes. Grown from each GPU
    in turn, the nearest GPU added at each step: exact for the layouts servers have (NVLink pairs
    or islands under switches and nodes), and GPUs x GPUs x N steps, whatever the host's size.
    Without any topology: the lowest indexes."""
    by_index = {g.index: g for g in gpus}
    if n >= len(by_index):
        return tuple(by_index[i] for i in sorted(by_index))
    dist = distances(gpus)
    best: tuple[int, int, tuple[int, ...]] | None = None
    for seed in sorted(by_index):
        chosen = _grow(seed, sorted(by_index), n, dist)
        key = (*_spread(chosen, dist), chosen)
        best = key if best is None or key < best else best
    assert best is not None
    return tuple(by_index[i] for i in best[2])


def _grow(seed: int, indexes: Sequence[int], n: int, dist: Distances) -> tuple[int, ...]:
    """`n` indexes from `seed`, each step the one whose farthest and then total distance to those
    chosen is least (kept up to date per step, not summed again)."""
    chosen = [seed]
    worst = {i: dist.get((i, seed), UNKNOWN) for i in indexes if i != seed}
    total = dict(worst)
    while len(chosen) < n:
        nearest = min(worst, key=lambda i: (worst[i], total[i], i))
        chosen.append(nearest)
        del worst[nearest], total[nearest]
        for i in worst:
            d = dist.get((i, nearest), UNKNOWN)
            worst[i], total[i] = max(worst[i], d), total[i] + d
    return tuple(sorted(chosen))


def _spread(indexes: Sequence[int], dist: Distances) -> tuple[int, int]:
    """(the farthest pair's distance, the sum over every pair)."""
    pairs = [dist.get((a, b), UNKNOWN) for i, a in enumerate(indexes) for b in indexes[i + 1 :]]
    return max(pairs, default=0), sum(pairs)

"""MIG instances named alone (`--gpu MIG-...`, as Slurm names a MIG node's GPUs): which processes a
plan takes in them, and whether one is clean after it.

A MIG instance is a slice of a GPU that other jobs share: freeing it stops the processes NVML
places in it (Proc.mig) and the hidden holders tied to them, never its GPU's other instances. The
probe proves those processes gone and their memory released (a plan of processes); whether the
instance is then clean is judged here, from a fresh scan (Operations.run): nothing runs in it, and
its memory is back at idle where the driver reads it with nothing in its GPU instance.
Pure functions over a Sample.
"""

from __future__ import annotations

from ...config.killoptions import PlanError
from ...model import IDLE_SLACK, MigInstance, MigPlace, Proc, Sample
from ...text.units import fmt_bytes


def mig_part(sample: Sample, host: str, places: tuple[MigPlace, ...]) -> list[Proc]:
    """The processes that run in these MIG instances (each once). Raises PlanError for an instance
    the sample's GPU does not have (destroyed since it was named, MIG mode off)."""
    for place in places:
        gpu = sample.gpu(place.gpu)
        if gpu is None or gpu.mig_instance(place) is None:
            raise PlanError(f"{host} has no MIG instance {place.label} (destroyed, or MIG mode is off)")
    return list({p.pid: p for place in places for p in sample.in_instance(place)}.values())


def instance_left(sample: Sample, place: MigPlace) -> tuple[list[str], str]:
    """What keeps MIG instance `place` from clean in `sample` (empty: clean), and how it was judged,
    in words. Its memory is its GPU instance's, shared by that GPU instance's compute instances:
    judged where the driver reads it and nothing runs in any of them; without a reading, the
    instance is judged by its processes alone, and the words say so."""
    gpu = sample.gpu(place.gpu)
    if gpu is None:
        return [f"GPU {place.gpu} is not in the sample"], "not judged"
    if gpu.error:
        return [f"GPU {place.gpu} reports an error: {gpu.error}"], "not judged"
    instance = gpu.mig_instance(place)
    if instance is None:
        return [f"MIG instance {place.label} is gone from GPU {gpu.index}"], "not judged"
    left = holders(sample, place)
    out = [f"{p.pid} ({p.kind}) still runs in it" for p in left[:8]]
    if len(left) > 8:
        out.append(f"and {len(left) - 8} more")
    unjudged = memory_unjudged(sample, place, instance)
    if unjudged is not None or instance.memory_used is None:
        return out, f"nothing runs in it ({unjudged})"
    if instance.memory_used > IDLE_SLACK:
        out.append(
            f"{fmt_bytes(instance.memory_used)} still used with nothing running in it (ghost or "
            "orphaned memory: a reset of the GPU frees it)"
        )
    return out, f"nothing runs in it, memory at idle ({fmt_bytes(instance.memory_used)} used)"


def holders(sample: Sample, place: MigPlace) -> list[Proc]:
    """What keeps an instance from clean, and from ready (gputui wait): a process placed in it that is
    a holder (Proc.is_holder; a monitor is never placed: NVML lists only compute and graphics
    contexts)."""
    return [p for p in sample.in_instance(place) if p.is_holder]


def memory_unjudged(sample: Sample, place: MigPlace, instance: MigInstance) -> str | None:
    """Why MIG instance `place`'s memory (`instance`, as the sample lists it) says nothing of its
    being idle; None where it does. Its memory is its GPU instance's, shared by that GPU instance's
    compute instances: it is judged where the driver reads it and nothing runs in any of them."""
    if instance.memory_used is None:
        return "its memory is not read: judged by its processes alone"
    if holders(sample, MigPlace(place.gpu, place.gi, None)):
        return "its GPU instance's memory is shared with a process in another compute instance"
    return None

"""The jobs view (`J`): the process table grouped by job, each job a row of its own above its members.

A job (docs/PROTOCOL.md "Jobs") is what people name: a torchrun launcher and its ranks, a
supervisor and its worker, a service. Its row stands for the whole job (root PID, root command,
user, GPUs, memory, members, and where known its Slurm job, container and unit); its members, the
GPU processes of the list that belong to it, hang under it. A job that is one process and nothing
else (its root is its only member) is that process's row alone: a row above it would say the same
again. A process of no job the sample names (a monitor) is a row of its own too. Plain data in,
plain data out, as gputui.ui.tree: the process table draws the rows and the branches with
`tree.lines`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields

from gputui.model import Job, Parent, Proc, ProcessFacts, Sample

from . import tree


@dataclass(frozen=True, slots=True)
class Grouped:
    """The jobs view's tree: `nodes` as gputui.ui.tree draws them, `jobs` by row key, and the rows
    of one-process jobs (row key -> its job: the process's row is the job's)."""

    nodes: dict[str, tree.Node]
    jobs: dict[str, Job]
    alone: dict[str, Job]


def root_record(job: Job) -> Parent:
    """The job's root as a record of the tree (its row is the job's, not a process's): its PID and
    start time are the job's `root` and `root_start`, the rest what both say of any process."""
    same = {f.name: getattr(job, f.name) for f in fields(ProcessFacts)}
    return Parent(pid=job.root, start_time=job.root_start, **same)


def members(sample: Sample | None, job: Job) -> list[Proc]:
    """Every process of the sample that belongs to `job` (whatever the scope or the filter)."""
    if sample is None:
        return []
    return [p for p in sample.processes if p.job == job.id]


def group(
    shown: Iterable[tuple[str, Proc]],
    sample: Sample | None,
    job_key: Callable[[Job], str],
) -> Grouped:
    """The `shown` processes ((row key, record) in the list) under their jobs."""
    jobs = {j.id: j for j in sample.jobs} if sample is not None else {}
    nodes: dict[str, tree.Node] = {}
    by_key: dict[str, Job] = {}
    alone: dict[str, Job] = {}
    for key, proc in shown:
        job = jobs.get(proc.job) if proc.job is not None else None
        if job is None or single(job, proc):
            nodes[key] = tree.Node(key, proc)
            if job is not None:
                alone[key] = job
            continue
        parent = job_key(job)
        if parent not in by_key:
            by_key[parent] = job
            nodes[parent] = tree.Node(parent, root_record(job))
        nodes[key] = tree.Node(key, proc, parent)
    return Grouped(nodes, by_key, alone)


def single(job: Job, proc: Proc) -> bool:
    """`proc` is the whole of `job`: its root, its only member, nothing between."""
    return proc.pid == job.root and set(job.members) <= {proc.pid} and len(job.processes) <= 1


def matching(sample: Sample | None, needle: str) -> set[str]:
    """The ids of the jobs whose own words hold `needle` (casefolded): the root's command line, its
    user, the id, the Slurm job, container or unit. The filter then lists all their members."""
    if sample is None or not needle:
        return set()
    found = set()
    for job in sample.jobs:
        hay = (" ".join(job.command), job.name or "", job.user or "", job.id, job.where)
        if any(needle in h.casefold() for h in hay):
            found.add(job.id)
    return found

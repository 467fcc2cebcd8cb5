"""What a filter leaves of each host for a report (`gputui snapshot --user alice`, `--gpu 2,3`): the
GPUs and processes the filter language (gputui/views/filter.py) matches, by the rule the dashboard's
tables follow (a GPU row as the fleet table matches it, a process as the process table does), and
the jobs of the processes left.

The sample itself is left whole: whether a GPU is free, and what its memory is, depend on every
process on it, not on those a filter shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..fleet.idle import ProcKey
from ..fleet.session import HostView
from .filter import Query
from .problems import FleetProblems, gpu_subject, group_of, proc_subject


@dataclass(frozen=True, slots=True)
class Shown:
    """What of one host a filter leaves: GPU indexes, process keys, job ids."""

    gpus: frozenset[int] = frozenset()
    procs: frozenset[ProcKey] = frozenset()
    jobs: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.gpus or self.procs)


@dataclass(frozen=True, slots=True)
class Narrowing:
    """A filter applied to a fleet: its text (as the filter box would show it) and what it leaves of
    each host with a sample."""

    text: str
    hosts: dict[str, Shown]

    def of(self, host: str) -> Shown:
        return self.hosts.get(host, Shown())

    @property
    def empty(self) -> bool:
        """Nothing matches on any host."""
        return not any(self.hosts.values())


def narrow(views: Sequence[HostView], query: Query, idle_after: float) -> Narrowing:
    """What `query` leaves of each of `views`."""
    problems = FleetProblems()
    problems.update(views, views, idle_after)
    hosts: dict[str, Shown] = {}
    for view in views:
        sample = view.sample
        if sample is None:
            continue
        state = problems.states[view.name]
        group, idle = group_of(view), view.idle.durations(idle_after)
        gpus = frozenset(g.index for g in sample.gpus if query.matches(gpu_subject(view, state, g)))
        procs = [
            p
            for p in sample.processes
            if query.matches(proc_subject(view, group, p, None, idle.get(p.key), idle_after))
        ]
        hosts[view.name] = Shown(
            gpus, frozenset(p.key for p in procs), frozenset(p.job for p in procs if p.job)
        )
    return Narrowing(query.text, hosts)

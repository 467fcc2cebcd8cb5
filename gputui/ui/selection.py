"""The operator's hand-picked processes (space), per host, by (pid, start time).

A PID alone can be reused, so a selection names the process by its start time too: it survives
refreshes and re-sorts, and a process that exits (or a new one that got its PID) is never mistaken
for the one that was picked. `prune` drops the entries that left the latest sample and says which,
so the screen can note it in the action log.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gputui.model import Proc, Sample, brief_process

from . import fmt

ProcKey = tuple[int, int | None]


@dataclass(frozen=True, slots=True)
class Chosen:
    """A process the operator marked, named by PID and start time (a reused PID is another one)."""

    host: str
    pid: int
    start_time: int | None
    label: str  # "4121 python train.py", made safe: what the log says when it drops out

    @property
    def key(self) -> ProcKey:
        return (self.pid, self.start_time)


def label(proc: Proc) -> str:
    words = brief_process(proc.command, proc.name, "")
    return f"{proc.pid} {fmt.safe(words, 80)}".rstrip()


class Selection:
    def __init__(self) -> None:
        self._by_host: dict[str, dict[ProcKey, Chosen]] = {}

    def toggle(self, host: str, proc: Proc) -> bool:
        """Select `proc` or unselect it; True when it is selected now."""
        chosen = self._by_host.setdefault(host, {})
        if proc.key in chosen:
            del chosen[proc.key]
            return False
        chosen[proc.key] = Chosen(host, proc.pid, proc.start_time, label(proc))
        return True

    def add(self, host: str, proc: Proc) -> None:
        """Select `proc` (kept if it already is)."""
        self._by_host.setdefault(host, {})[proc.key] = Chosen(host, proc.pid, proc.start_time, label(proc))

    def keys(self, host: str) -> frozenset[ProcKey]:
        return frozenset(self._by_host.get(host, ()))

    def hosts(self) -> list[str]:
        """Hosts with something selected, in the order they were first picked."""
        return [host for host, chosen in self._by_host.items() if chosen]

    def count(self, host: str | None = None) -> int:
        if host is not None:
            return len(self._by_host.get(host, ()))
        return sum(len(c) for c in self._by_host.values())

    def __bool__(self) -> bool:
        return self.count() > 0

    def prune(self, host: str, sample: Sample | None) -> list[Chosen]:
        """Drop what the latest sample of `host` no longer has (by pid AND start time)."""
        chosen = self._by_host.get(host)
        if not chosen or sample is None:
            return []
        present = {p.key for p in sample.processes}
        gone = [c for key, c in chosen.items() if key not in present]
        for c in gone:
            del chosen[c.key]
        return gone

    def discard(self, host: str, keys: Iterable[ProcKey]) -> None:
        chosen = self._by_host.get(host)
        if chosen:
            for key in keys:
                chosen.pop(key, None)

    def clear(self) -> None:
        self._by_host.clear()

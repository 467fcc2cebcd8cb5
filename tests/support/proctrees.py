"""Generated hosts for the property tests of a kill's scope: a process tree (parents, process groups,
sessions, setsid), some processes holding the device files, some listed by NVML on GPUs, monitors,
the probe and its ancestors, and ghosts (listed parents that died while a forked child kept the
context). `Host` turns itself into the sample the operator sees through the real classification
(gputui/probe/classify.py) and plays the driver when processes die."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from gputui.model import Gpu, Proc, Sample
from gputui.probe.classify import MONITOR_NAMES, ProcFacts, classify, protection

GPUS = 4


PROBE = 2  # the probe's PID in every generated host; its parent chain is protected


@dataclass
class Task:
    pid: int
    ppid: int
    pgid: int
    sid: int
    comm: str = "python"
    holds: bool = False
    gpus: tuple[int, ...] = ()  # NVML lists it there (only a holder can be listed)


@dataclass
class Host:
    tasks: dict[int, Task]
    listed: dict[int, dict[int, int]] = field(default_factory=dict)  # pid -> {gpu: bytes}

    def alive(self) -> set[int]:
        return set(self.tasks)

    def ancestors(self, pid: int) -> set[int]:
        out, seen = set(), pid
        while seen in self.tasks and self.tasks[seen].ppid > 0 and self.tasks[seen].ppid not in out:
            seen = self.tasks[seen].ppid
            out.add(seen)
        return out

    def descendants(self, roots: set[int]) -> dict[int, int]:
        out: dict[int, int] = {}
        todo = list(roots)
        while todo:
            parent = todo.pop()
            for t in self.tasks.values():
                if t.ppid == parent and t.pid not in out:
                    out[t.pid] = start_of(t.pid)
                    todo.append(t.pid)
        return out

    def records(self) -> dict[int, dict[str, Any]]:
        """The probe's view: what core.describe makes of classify()'s verdicts."""

        def lookup(pid: int) -> ProcFacts | None:
            t = self.tasks.get(pid)
            return ProcFacts(t.comm, "S", t.ppid, t.pgid, t.sid) if t else None

        stop = self.ancestors(PROBE) | {PROBE}
        holders = {t.pid for t in self.tasks.values() if t.holds}
        verdicts = classify(self.listed, holders, lookup, PROBE, stop=stop)
        out = {}
        for pid, v in verdicts.items():
            t = self.tasks.get(pid)
            out[pid] = {
                "pid": pid,
                "start_time": start_of(pid) if t else None,
                "kind": v.kind,
                "reason": v.reason,
                "gpus": list(v.gpus),
                "links": list(v.links),
                "gpu_memory": {str(g): b for g, b in self.listed.get(pid, {}).items()},
                "name": t.comm if t else None,
                "command": [t.comm] if t else [],
                "user": "alice",
                "uid": 1000,
                "state": "S" if t else None,
                "ppid": t.ppid if t else None,
                "pgid": t.pgid if t else None,
                "sid": t.sid if t else None,
                "protected": protection(pid, v.kind, PROBE, self.ancestors(PROBE), False),
            }
        return out

    def sample(self) -> Sample:
        gpus = tuple(
            Gpu(index=i, memory_total=100 << 30, memory_used=sum(m.get(i, 0) for m in self.listed.values()),
                memory_baseline=0)
            for i in range(GPUS)
        )  # fmt: skip
        procs = (Proc.from_wire(r) for r in self.records().values())
        return Sample(seq=1, time=0.0, gpus=gpus, processes=tuple(p for p in procs if p is not None))

    def kill(self, pids: set[int]) -> None:
        """The driver after these processes die: their children go to PID 1; a dead listed PID stays
        listed (a ghost) while a holder it forked after making its context lives on."""
        dead = pids & set(self.tasks)
        before = {pid: set(self.descendants({pid})) for pid in dead}
        for pid in dead:
            del self.tasks[pid]
        for t in self.tasks.values():
            if t.ppid in dead:
                t.ppid = 1
        for pid in list(self.listed):
            if pid in self.tasks:
                continue
            heirs = before.get(pid, set())
            if not any(h in self.tasks and self.tasks[h].holds for h in heirs):
                del self.listed[pid]


def start_of(pid: int) -> int:
    return 10_000 + pid


@st.composite
def hosts(draw: st.DrawFn) -> Host:
    n = draw(st.integers(3, 28))
    tasks = {
        1: Task(1, 0, 1, 1, comm="systemd"),
        PROBE: Task(PROBE, 1, PROBE, PROBE, comm="python3", holds=True),
    }
    for i in range(n):
        pid = 100 + i
        parent = draw(st.sampled_from(sorted(tasks)))
        p = tasks[parent]
        setsid = draw(st.integers(0, 9)) == 0
        own_group = draw(st.integers(0, 3)) == 0
        pgid = pid if (setsid or own_group or parent == 1) else p.pgid
        sid = pid if (setsid or parent == 1) else p.sid
        holds = draw(st.booleans())
        monitor = holds and draw(st.integers(0, 12)) == 0
        comm = sorted(MONITOR_NAMES)[draw(st.integers(0, len(MONITOR_NAMES) - 1))] if monitor else "python"
        gpus = tuple(sorted(draw(st.sets(st.integers(0, GPUS - 1), max_size=2)))) if holds else ()
        tasks[pid] = Task(pid, parent, pgid, sid, comm=comm, holds=holds, gpus=gpus)
    host = Host(tasks)
    host.listed = {t.pid: {g: 1 << 30 for g in t.gpus} for t in tasks.values() if t.gpus}
    # A few ghosts: listed parents that died while a forked child kept the context.
    for pid in draw(st.sets(st.sampled_from(sorted(p for p in tasks if p >= 100)), max_size=2)):
        if pid in host.listed and any(t.ppid == pid and t.holds for t in tasks.values()):
            host.kill({pid})
    return host

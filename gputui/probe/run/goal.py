"""What a plan is after, read from a look at the host: the GPUs it reports on, what still keeps it
from its goal, and whether that goal holds.

A plan of GPUs proves them clean (each at its idle memory, nothing listed, nothing of the plan's in
the way); a plan of processes proves its targets gone and their memory released (NVML lists a PID
until its memory is back). Functions of what they read (the plan, the run's processes and rule, a
view), so that the stages (reaper.py) and the verdicts (verdicts.py) ask the same questions.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

from typing import Any, Dict, List, Mapping, Optional, Set  # noqa: F401  (type comments)

from ..classify import GHOST, HIDDEN, MONITOR, USER
from ..core import Probe
from . import scope
from .orders import Settings  # noqa: F401  (type comments)
from .signals import Proc  # noqa: F401  (type comments)
from .view import View  # noqa: F401  (type comments)
from .words import gpus_words, pid_list

Listed = Dict[int, Dict[int, Optional[int]]]  # NVML's lists: {pid: {gpu index: memory}}


def goal_words(plan):
    # type: (Settings) -> str
    """What this plan will prove, in words (the dialog said the same before it was confirmed)."""
    n = len(plan.targets)
    what = "%d target%s" % (n, "" if n == 1 else "s")
    roots = sorted(pid for pid, role in plan.roles.items() if role == "root")
    if roots:
        what += " (job root%s %s first)" % ("" if len(roots) == 1 else "s", pid_list(roots))
    if plan.sweep:
        what += ", %d to sweep" % len(plan.sweep)
    if plan.gpus:
        return "%s; prove %s clean" % (what, gpus_words(plan.gpus))
    return "%s; prove them gone and their memory released" % what


def touched_gpus(plan, view):
    # type: (Settings, View) -> Set[int]
    """The GPUs whose memory the plan reports: those it cleans, those its targets use (by the
    plan and by NVML now) and those holding the memory of the ghosts it names."""
    out = set(plan.gpus)
    for pid, _, _, gpus in plan.targets:
        out.update(g for g in gpus if g in view.gpus)
        out.update(view.listed.get(pid, {}))
    for pid in plan.ghosts:
        out.update(view.listed.get(pid, {}))
    return out


def sweep_blockers(plan, view):
    # type: (Settings, View) -> List[Dict[str, Any]]
    """A sweeping plan asked for every unattributed holder to go: those still there."""
    if not plan.sweep:
        return []
    return [r for r in view.records.values() if r["kind"] == HIDDEN and not r["gpus"] and not r["protected"]]


def own_pids(plan, procs):
    # type: (Settings, Mapping[int, Proc]) -> Set[int]
    """PIDs whose GPU memory the plan must see released: every process it took on, and the
    ghosts the operator named."""
    return set(procs) | set(plan.ghosts)


def released(plan, procs, listed):
    # type: (Settings, Mapping[int, Proc], Listed) -> bool
    """NVML's side for the plan's processes: none of them (nor a named ghost) is listed, so the
    memory each held is back (the driver lists a PID until its memory is released)."""
    return not (own_pids(plan, procs) & set(listed))


def blockers(plan, rule, procs, view):
    # type: (Settings, scope.Rule, Mapping[int, Proc], View) -> List[int]
    """PIDs that keep the plan from its goal in `view`: live processes on a GPU it cleans, swept
    holders still there, its own targets still alive, and holders tied to them not yet stopped."""
    out = set()  # type: Set[int]
    for index in plan.gpus:
        for record in view.on_gpu(index):
            if record["kind"] in (USER, HIDDEN, MONITOR):
                out.add(record["pid"])
    for record in sweep_blockers(plan, view):
        out.add(record["pid"])
    for proc in procs.values():
        seen = view.records.get(proc.pid)
        if seen is None or seen.get("start_time") != proc.start_time:
            continue
        if seen["kind"] != GHOST and proc.exited_ms is None and proc.verdict not in scope.MOOT:
            out.add(proc.pid)
    out.update(c.pid for c in scope.admissible(view.records, rule, set(procs)))
    return sorted(out)


def idle_gpus(plan, gpus, listed):
    # type: (Settings, List[Dict[str, Any]], Listed) -> List[int]
    """NVML's side for the GPUs the plan cleans: those at their idle memory with no process listed."""
    busy = set()  # type: Set[int]
    for mem in listed.values():
        busy.update(mem)
    return [
        g["index"]
        for g in gpus
        if g["index"] in plan.gpus and g["index"] not in busy and Probe.gpu_is_idle(g)
    ]


def all_idle(plan, view):
    # type: (Settings, View) -> bool
    """The holder scan's side for the GPUs the plan cleans: each at its idle memory, none listed."""
    busy = set()  # type: Set[int]
    for mem in view.listed.values():
        busy.update(mem)
    return all(i in view.gpus and i not in busy and Probe.gpu_is_idle(view.gpus[i]) for i in plan.gpus)

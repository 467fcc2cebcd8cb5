"""The end of a run: the verdict on each process and each GPU, and the `done` event.

docs/ARCHITECTURE.md "Staged kill-and-verify", step 6, and docs/PROTOCOL.md "Verdicts". A process
is settled from /proc as it is now (exited, a zombie, unkillable in state D, survived), not from what
the run expected. A GPU the plan cleans is `clean`, `held` by live processes, or its memory is a
ghost's (`ghost-memory`, with the holders suspected), `orphaned` (no process holds it: only a reset
frees it) or `outside` this container; a GPU its targets only used says whether their memory was
`released`. A parent that outlived the targets and may start them again is named, and a GPU
verified clean that it has already put a new process on is `held`. Apart from the stages
(reaper.py): what a run claims, and the evidence for it, in one place. Functions of what they read
(a process, the run's processes and plan, the final view): the run emits the events they word.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple  # noqa: F401  (type comments)

from ..accounting import account
from ..classify import GHOST, HIDDEN, MONITOR, USER
from ..common import CLEAN, NOT_CLEAN, NOT_STOPPED, STOPPED, brief_command, took
from ..core import Probe
from ..holders import descendants
from ..procfs import holds_device, read_cmdline, read_stat, read_stat_strict, read_status, user_name
from . import goal, scope
from .orders import Settings  # noqa: F401  (type comments)
from .signals import Proc  # noqa: F401  (type comments)
from .view import View  # noqa: F401  (type comments)
from .words import gpus_words, pid_list, short_command, size_words, zombie_words

MAX_RESTARTS = 16  # parents a verdict names as able to restart what the plan stopped
Again = Sequence[Tuple[int, int]]  # (pid, parent) of what a surviving parent started on a GPU


# -- processes ---------------------------------------------------------------------------------


def settle(proc):
    # type: (Proc) -> None
    """The final word on a process that was signalled, from /proc as it is now."""
    try:
        stat = read_stat_strict(proc.pid)
    except OSError as exc:
        if proc.exited_ms is None:
            proc.verdict, proc.why = "not-checked", "could not be checked (%s)" % (exc.strerror or exc)
            return
        stat = None
    same = stat is not None and stat.start_time == proc.start_time
    if proc.exited_ms is not None or not same:
        if same and stat is not None and stat.state == "Z":
            proc.verdict, proc.ppid, proc.why = "zombie", stat.ppid, zombie_words(stat.ppid)
        else:
            proc.verdict = "exited"
            proc.why = "after %s" % proc.exit_signal if proc.exit_signal else None
        return
    assert stat is not None
    proc.state = stat.state
    if stat.state == "D":
        proc.verdict = "unkillable"
        proc.why = "state D (uninterruptible, likely inside the driver): even SIGKILL waits; not retried"
    else:
        proc.verdict = "survived"
        proc.why = "still running (state %s) after %s" % (
            stat.state,
            ", ".join(proc.signals) or "no signal",
        )


def process_verdict(proc):
    # type: (Proc) -> Tuple[Dict[str, Any], str]
    """The verdict on `proc` (settled now if the run left it open): its event's data and words."""
    if proc.verdict is None:
        settle(proc)
    data = {
        "result": proc.verdict,
        "why": proc.why,
        "pid": proc.pid,
        "start_time": proc.start_time,
        "signals": proc.signals,
        "exited_ms": proc.exited_ms,
        "exit_signal": proc.exit_signal,
        "state": proc.state,
    }  # type: Dict[str, Any]
    if proc.verdict == "zombie":
        data["ppid"] = proc.ppid
    if proc.allow:
        data["allow"] = proc.allow
    words = "%s: %s%s" % (proc.label(), proc.verdict, " (%s)" % proc.why if proc.why else "")
    return data, words


# -- parents that may start it all again ---------------------------------------------------------


def started_by(parent, procs, view, probe):
    # type: (int, Mapping[int, Proc], View, Any) -> Tuple[List[int], List[int]]
    """The GPU processes below `parent` now that the plan did not take on (a restarted worker),
    and the GPUs NVML lists them on: read now, right before the verdict."""
    below = descendants([parent])
    if not below:
        return [], []
    _, listed = probe.read_gpus()
    prefix = probe.scanner.prefix
    new, gpus = [], set()  # type: List[int], Set[int]
    for pid, start in sorted(below.items()):
        if pid in procs and procs[pid].start_time == start:
            continue
        record = view.records.get(pid)
        known = (
            record is not None and record.get("start_time") == start and record.get("kind") in (USER, HIDDEN)
        )
        if known or pid in listed or holds_device(pid, prefix) is True:
            new.append(pid)
            gpus.update(listed.get(pid, {}))
            if known and record is not None:
                gpus.update(record.get("gpus") or [])
    return new[:64], sorted(gpus)


def restarts(procs, view, probe):
    # type: (Mapping[int, Proc], View, Any) -> List[Dict[str, Any]]
    """The parents that outlived what the plan stopped and may start it again: each target gone
    whose parent, when checked, was part of the same work (checks.supervisor_of), is alive now
    (the same process) and was not in the plan. With the GPU processes it has started since that
    the final look saw (`new`): a worker restarted before the verdict."""
    by_parent = {}  # type: Dict[Tuple[int, int], List[int]]
    for proc in procs.values():
        if proc.parent is None or proc.parent[0] in procs:
            continue
        if proc.verdict not in scope.GONE and proc.exited_ms is None:
            continue
        by_parent.setdefault(proc.parent, []).append(proc.pid)
    out = []  # type: List[Dict[str, Any]]
    for (pid, start), children in sorted(by_parent.items()):
        stat = read_stat(pid)
        if stat is None or stat.start_time != start or stat.state == "Z" or len(out) >= MAX_RESTARTS:
            continue
        new, new_gpus = started_by(pid, procs, view, probe)
        status = read_status(pid)
        uid = status.uid if status is not None else None
        out.append(
            {
                "pid": pid,
                "start_time": start,
                "name": stat.comm,
                "command": short_command(read_cmdline(pid)),
                "user": user_name(uid),
                "children": sorted(children),
                "new": new,
                "new_gpus": new_gpus,
            }
        )
    return out


def taken_again(found, plan_gpus):
    # type: (List[Dict[str, Any]], List[int]) -> Dict[int, List[Tuple[int, int]]]
    """{GPU: [(pid, parent)]}: a GPU the plan cleans that a surviving parent has already put a new
    process on (seen before the verdict) is not clean any more: the run that follows would share it."""
    again = {}  # type: Dict[int, List[Tuple[int, int]]]
    for r in found:
        for index in r["new_gpus"]:
            if index in plan_gpus:
                again.setdefault(index, []).extend((pid, r["pid"]) for pid in r["new"])
    return again


# -- GPUs ----------------------------------------------------------------------------------------


def memory_data(index, gpu, result, before):
    # type: (int, Dict[str, Any], str, Mapping[int, Optional[int]]) -> Dict[str, Any]
    """What every GPU verdict's data begins with: its result, and the GPU's memory before the
    plan, now, and at idle."""
    return {
        "result": result,
        "memory_before": before.get(index),
        "memory_after": gpu.get("memory_used"),
        "memory_baseline": gpu.get("memory_baseline"),
    }


def gpu_result(gpu, on_gpu, strays, books):
    # type: (Dict[str, Any], List[Dict[str, Any]], List[Dict[str, Any]], Optional[Dict[str, Any]]) -> str
    """A GPU the plan cleans, before any restart: clean, held (by live processes), or its memory a
    ghost's, orphaned (nothing holds it) or used outside this container."""
    users = [r for r in on_gpu if r["kind"] in (USER, MONITOR)]  # live, listed by NVML
    hidden = [r for r in on_gpu if r["kind"] == HIDDEN]  # attributed through a listed PID
    ghosts = [r for r in on_gpu if r["kind"] == GHOST]
    if not gpu or gpu.get("error") or users or strays:
        return "held"
    if not (ghosts or hidden or not Probe.gpu_is_idle(gpu)):
        return "clean"
    # Only dead PIDs listed (or none), memory held: name who may really hold it.
    if not ghosts and not hidden and books is not None and books["orphaned"]:
        return "orphaned"  # nothing holds it at all: only a GPU reset frees it
    if not ghosts and not hidden and books is not None and books.get("outside"):
        # Seen from inside a container: another container's or the host's. Not ours to free, and
        # no reset would be right (it would end a neighbour's work).
        return "outside"
    return "ghost-memory"


def suspected(on_gpu, view, result):
    # type: (List[Dict[str, Any]], View, str) -> List[int]
    """Who may hold a GPU's memory: the hidden holders attributed to it and the ghosts' links; for
    ghost memory with no link at all, any unattributed holder (a child that setsid())."""
    suspects = set(r["pid"] for r in on_gpu if r["kind"] == HIDDEN)  # type: Set[int]
    for ghost in (r for r in on_gpu if r["kind"] == GHOST):
        suspects.update(ghost.get("links") or [])
    if result == "ghost-memory" and not suspects:
        suspects.update(r["pid"] for r in view.records.values() if r["kind"] == HIDDEN and not r["gpus"])
    return sorted(suspects)


def gpu_words(result, data, books, restarted, again):
    # type: (str, Dict[str, Any], Optional[Dict[str, Any]], List[int], Again) -> str
    """A GPU verdict in words (after "GPU N: "); `restarted`: the processes of `again` that hold it."""
    if result == "clean":
        return "clean"
    if result == "orphaned":
        return "not clean: %s orphaned, no process holds it; a reset would free it" % size_words(
            books["orphaned"] if books else 0
        )
    if result == "outside":
        return (
            "not clean: %s used outside this container: another container or the host (no process "
            "here holds it; stop it where it runs)" % size_words(books["outside"] if books else 0)
        )
    if result == "ghost-memory":
        return "ghost memory: NVML lists %s; suspected holders: %s" % (
            pid_list(data["ghosts"]) or "nothing",
            pid_list(data["suspects"]) or "none found (run the probe as root to see every holder)",
        )
    words = "still held by %s" % (pid_list(data["held_by"]) or data["error"] or "memory in use")
    if restarted:
        parents = sorted(set(parent for pid, parent in again if pid in restarted))
        words += " (taken again since it was verified clean: started by %s)" % pid_list(parents)
    return words


def gpu_verdict(index, view, plan, probe, before, idle_ms, again=()):
    # type: (int, View, Settings, Any, Mapping[int, Optional[int]], Mapping[int, float], Again) -> Tuple[Dict[str, Any], str]
    """A GPU the plan cleans: clean, held (by live processes) or ghost memory; its data and words.
    `again`: (pid, parent) of the processes a surviving parent started on it since (restarts):
    held by them."""
    gpu = view.gpus.get(index) or {}
    on_gpu = view.on_gpu(index)
    live = [r for r in on_gpu if r["kind"] in (USER, MONITOR, HIDDEN)]
    strays = goal.sweep_blockers(plan, view)
    # From inside a container, memory no process here holds is `outside`, never `orphaned`.
    foreign = bool(getattr(probe, "foreign_pids", False))
    books = account(gpu, view.listed, view.records, probe.scanner.prefix, foreign) if gpu else None
    result = gpu_result(gpu, on_gpu, strays, books)
    suspects = suspected(on_gpu, view, result)
    held_by = sorted(set(r["pid"] for r in live) | set(r["pid"] for r in strays))
    restarted = sorted(set(pid for pid, _ in again) - set(held_by))
    if restarted:
        result = "held"  # verified clean, then taken again by a surviving parent's new process
        held_by = sorted(set(held_by) | set(restarted))
    data = memory_data(index, gpu, result, before)
    data.update(
        held_by=held_by,
        protected=sorted(r["pid"] for r in live if r.get("protected")),
        ghosts=sorted(r["pid"] for r in on_gpu if r["kind"] == GHOST),
        suspects=suspects,
        idle_ms=idle_ms.get(index),
        error=gpu.get("error") if gpu else "no-such-gpu",
        accounting=books,
    )
    words = gpu_words(result, data, books, restarted, again)
    return data, words


def release_verdict(index, view, plan, rule, procs, before):
    # type: (int, View, Settings, scope.Rule, Mapping[int, Proc], Mapping[int, Optional[int]]) -> Tuple[Dict[str, Any], str]
    """A GPU the plan's processes used but the plan does not clean: was their memory released?
    What else uses it is named, untouched. Its data and words."""
    gpu = view.gpus.get(index) or {}
    own = goal.own_pids(plan, procs)
    still = sorted(pid for pid, mem in view.listed.items() if index in mem and pid in own)
    others = scope.untouched(view.records, rule, [index], set(procs))
    suspects = set()  # type: Set[int]
    for pid in still:
        record = view.records.get(pid) or {}
        if record.get("kind") == GHOST:
            suspects.update(record.get("links") or [])
    result = "released" if not still else "still-listed"
    suspect_pids = sorted(suspects)
    data = memory_data(index, gpu, result, before)
    data.update(
        still_listed=still,
        others=others,
        suspects=suspect_pids,
        error=gpu.get("error") if gpu else "no-such-gpu",
    )
    if result == "released":
        words = "the targets' memory released"
    else:
        words = "NVML still lists %s (memory not released); suspected holders: %s" % (
            pid_list(still),
            pid_list(suspect_pids) or "none found",
        )
    if others:
        words += "; still used by %s (not in the plan, left alone)" % pid_list(others)
    return data, words


# -- the plan ------------------------------------------------------------------------------------


def outcome(plan, gpus, processes, memory_released):
    # type: (Settings, Dict[str, Dict[str, Any]], List[Dict[str, Any]], bool) -> Tuple[str, bool, str]
    """(result, ok, words) of the `done` event: `clean` (a plan of GPUs) or `stopped` (a plan of
    processes) only when the goal was proved."""
    clean = all(gpus[str(i)]["result"] == "clean" for i in plan.gpus)
    # A GPU plan proves its GPUs clean: a target that let go of its GPU by itself is not in the
    # way. A plan of processes proves each target gone: one left running (not signalled: it held
    # no GPU when checked) is not, whatever else went well.
    settled = scope.GONE + scope.MOOT if plan.gpus else scope.ENDED
    gone = all(p["result"] in settled for p in processes)
    ok = clean and gone and memory_released
    if plan.gpus:
        return (
            (CLEAN if ok else NOT_CLEAN),
            ok,
            ("every targeted GPU verified clean" if ok else "NOT clean"),
        )
    return (
        (STOPPED if ok else NOT_STOPPED),
        ok,
        ("every target stopped, its memory released" if ok else "NOT every target stopped"),
    )


def refused(processes):
    # type: (List[Dict[str, Any]]) -> List[int]
    """The processes the kernel or the probe's own rules refused to signal."""
    return [p["pid"] for p in processes if p["result"] in ("permission-denied", "protected")]


def left_words(processes, taken, found):
    # type: (List[Dict[str, Any]], List[int], List[Dict[str, Any]]) -> str
    """What the `done` event adds after its outcome: targets left running, GPUs taken again since
    verified clean, parents that may start the targets again."""
    running = [p["pid"] for p in processes if p["result"] in scope.LEFT_RUNNING]
    left = ""
    if running:
        left = "; not signalled, still running (held no GPU when checked): %s" % pid_list(running[:20])
        if len(running) > 20:
            left += " and %d more" % (len(running) - 20)
    if taken:
        left += "; %s taken again since verified clean" % gpus_words(taken)
    for r in found:
        new = " and has started %s since" % pid_list(r["new"]) if r["new"] else ""
        left += "; parent %d (%s) still runs%s: it may start %s again" % (
            r["pid"],
            brief_command(r["command"]) or r["name"] or "?",
            new,
            pid_list(r["children"]),
        )
    return left


def done_words(plan_id, words, elapsed_ms, left):
    # type: (str, str, float, str) -> str
    return "plan %s: %s in %s%s" % (plan_id, words, took(elapsed_ms), left)

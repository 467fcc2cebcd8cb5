"""The end of a run: the verdict on each process and each GPU, and the `done` event.

docs/ARCHITECTURE.md "Staged kill-and-verify", step 6, and docs/PROTOCOL.md "Verdicts". A process
is settled from /proc as it is now (exited, a zombie, unkillable in state D, survived), not from what
the run expected. A GPU the plan cleans is `clean`, `held` by live processes, or its memory is a
ghost's (`ghost-memory`, with the holders suspected), `orphaned` (no process holds it: only a reset
frees it) or `outside` this container; a GPU its targets only used says whether their memory was
`released`. A parent that outlived the targets and may start them again is named, and a GPU
verified clean that it has already put a new process on is `held`. Apart from the stages
(reaper.py): what a run claims, and the evidence for it, in one place.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

from typing import Any, Dict, List, Optional, Set, Tuple  # noqa: F401  (type comments)

from ..accounting import account
from ..classify import GHOST, HIDDEN, MONITOR, USER
from ..common import brief_command, took
from ..core import Probe
from ..holders import descendants
from ..procfs import holds_device, read_cmdline, read_stat, read_stat_strict, read_status, user_name
from . import scope
from .signals import Proc  # noqa: F401  (type comments)
from .state import (  # noqa: F401  (type comments)
    RunState,
    View,
    by_key,
    gpus_words,
    pid_list,
    short_command,
    zombie_words,
)

MAX_RESTARTS = 16  # parents a verdict names as able to restart what the plan stopped


class Verdicts(RunState):
    """A run's verdicts: per process, per GPU, and the `done` event that sums them up."""

    def finish(self, view):
        # type: (View) -> Dict[str, Any]
        """Every verdict from the final `view`, then the `done` event that sums them up: `clean` (a
        plan of GPUs) or `stopped` (a plan of processes) only when the goal was proved."""
        plan = self.plan
        processes = [self.process_verdict(p) for p in self.procs.values()]
        restarts = self.restarts(view)
        # A GPU verified clean that a surviving parent has already put a new process on (seen
        # before this verdict) is not clean any more: the run that follows would share it.
        again = {}  # type: Dict[int, List[Tuple[int, int]]]
        for r in restarts:
            for index in r["new_gpus"]:
                if index in plan.gpus:
                    again.setdefault(index, []).extend((pid, r["pid"]) for pid in r["new"])
        gpus = {}  # type: Dict[str, Dict[str, Any]]
        for index in sorted(self.touched):
            if index in plan.gpus:
                gpus[str(index)] = self.gpu_verdict(index, view, again.get(index, []))
            else:
                gpus[str(index)] = self.release_verdict(index, view)
        clean = all(gpus[str(i)]["result"] == "clean" for i in plan.gpus)
        # A GPU plan proves its GPUs clean: a target that let go of its GPU by itself is not in the
        # way. A plan of processes proves each target gone: one left running (not signalled: it held
        # no GPU when checked) is not, whatever else went well.
        settled = scope.GONE + scope.MOOT if plan.gpus else scope.ENDED
        gone = all(p["result"] in settled for p in processes)
        released = self.released(view.listed)
        taken = sorted(again)
        ok = clean and gone and released
        refused = [p["pid"] for p in processes if p["result"] in ("permission-denied", "protected")]
        running = [p["pid"] for p in processes if p["result"] in scope.LEFT_RUNNING]
        after = {str(i): g.get("memory_used") for i, g in view.gpus.items() if i in self.touched}
        if plan.gpus:
            result = "clean" if ok else "not-clean"
            words = "every targeted GPU verified clean" if ok else "NOT clean"
        else:
            result = "stopped" if ok else "not-stopped"
            words = "every target stopped, its memory released" if ok else "NOT every target stopped"
        left = ""
        if running:
            left = "; not signalled, still running (held no GPU when checked): %s" % pid_list(running[:20])
            if len(running) > 20:
                left += " and %d more" % (len(running) - 20)
        if taken:
            left += "; %s taken again since verified clean" % gpus_words(taken)
        for r in restarts:
            new = " and has started %s since" % pid_list(r["new"]) if r["new"] else ""
            left += "; parent %d (%s) still runs%s: it may start %s again" % (
                r["pid"],
                brief_command(r["command"]) or r["name"] or "?",
                new,
                pid_list(r["children"]),
            )
        done = self.event(
            "done",
            result,
            "plan %s: %s in %s%s" % (plan.id, words, took(self.ms()), left),
            data={
                "ok": ok,
                "scope": plan.scope,
                "gpus": gpus,
                "processes": processes,
                "refused": refused,
                "memory_before": by_key(self.before),
                "memory_after": after,
                "method": self.killer.method,
                "link_lost": self.link_lost,
                "cancelled": self.cancelled,
                "restarts": restarts,
                "taken_again": taken,
            },
        )
        return done

    def started_by(self, parent, view):
        # type: (int, View) -> Tuple[List[int], List[int]]
        """The GPU processes below `parent` now that the plan did not take on (a restarted worker),
        and the GPUs NVML lists them on: read now, right before the verdict."""
        below = descendants([parent])
        if not below:
            return [], []
        _, listed = self.probe.read_gpus()
        prefix = self.probe.scanner.prefix
        new, gpus = [], set()  # type: List[int], Set[int]
        for pid, start in sorted(below.items()):
            if pid in self.procs and self.procs[pid].start_time == start:
                continue
            record = view.records.get(pid)
            known = (
                record is not None
                and record.get("start_time") == start
                and record.get("kind") in (USER, HIDDEN)
            )
            if known or pid in listed or holds_device(pid, prefix) is True:
                new.append(pid)
                gpus.update(listed.get(pid, {}))
                if known and record is not None:
                    gpus.update(record.get("gpus") or [])
        return new[:64], sorted(gpus)

    def restarts(self, view):
        # type: (View) -> List[Dict[str, Any]]
        """The parents that outlived what the plan stopped and may start it again: each target gone
        whose parent, when checked, was part of the same work (supervisor_of), is alive now (the
        same process) and was not in the plan. With the GPU processes it has started since that the
        final look saw (`new`): a worker restarted before the verdict."""
        by_parent = {}  # type: Dict[Tuple[int, int], List[int]]
        for proc in self.procs.values():
            if proc.parent is None or proc.parent[0] in self.procs:
                continue
            if proc.verdict not in scope.GONE and proc.exited_ms is None:
                continue
            by_parent.setdefault(proc.parent, []).append(proc.pid)
        out = []  # type: List[Dict[str, Any]]
        for (pid, start), children in sorted(by_parent.items()):
            stat = read_stat(pid)
            if stat is None or stat.start_time != start or stat.state == "Z" or len(out) >= MAX_RESTARTS:
                continue
            new, new_gpus = self.started_by(pid, view)
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

    def process_verdict(self, proc):
        # type: (Proc) -> Dict[str, Any]
        if proc.verdict is None:
            self.settle(proc)
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
        record = self.event(
            "verdict",
            proc.verdict,
            "%s: %s%s" % (proc.label(), proc.verdict, " (%s)" % proc.why if proc.why else ""),
            proc,
            data=dict(data),
        )
        return dict(record["data"], pid=proc.pid, start_time=proc.start_time)

    def settle(self, proc):
        # type: (Proc) -> None
        """The final word on a process that was signalled."""
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

    def gpu_verdict(self, index, view, again=()):
        # type: (int, View, Any) -> Dict[str, Any]
        """A GPU the plan cleans: clean, held (by live processes) or ghost memory. `again`: (pid,
        parent) of the processes a surviving parent started on it since (restarts): held by them."""
        gpu = view.gpus.get(index) or {}
        on_gpu = view.on_gpu(index)
        users = [r for r in on_gpu if r["kind"] in (USER, MONITOR)]  # live, listed by NVML
        hidden = [r for r in on_gpu if r["kind"] == HIDDEN]  # attributed through a listed PID
        ghosts = [r for r in on_gpu if r["kind"] == GHOST]
        live = users + hidden
        idle = Probe.gpu_is_idle(gpu) if gpu else False
        strays = self.sweep_blockers(view)
        suspects = set(r["pid"] for r in hidden)  # type: Set[int]
        for ghost in ghosts:
            suspects.update(ghost.get("links") or [])
        result = "clean"
        # From inside a container, memory no process here holds is `outside`, never `orphaned`.
        foreign = bool(getattr(self.probe, "foreign_pids", False))
        books = account(gpu, view.listed, view.records, self.probe.scanner.prefix, foreign) if gpu else None
        if not gpu or gpu.get("error") or users or strays:
            result = "held"
        elif ghosts or hidden or not idle:
            # Only dead PIDs listed (or none), memory held: name who may really hold it.
            result = "ghost-memory"
            if not ghosts and not hidden and books is not None and books["orphaned"]:
                result = "orphaned"  # nothing holds it at all: only a GPU reset frees it
            elif not ghosts and not hidden and books is not None and books.get("outside"):
                # Seen from inside a container: another container's or the host's. Not ours to
                # free, and no reset would be right (it would end a neighbour's work).
                result = "outside"
            elif not suspects:
                # No link to the ghost: any unattributed holder may be the one (a child that setsid()).
                suspects.update(
                    r["pid"] for r in view.records.values() if r["kind"] == HIDDEN and not r["gpus"]
                )
        held_by = sorted(set(r["pid"] for r in live) | set(r["pid"] for r in strays))
        restarted = sorted(set(pid for pid, _ in again) - set(held_by))
        if restarted:
            result = "held"  # verified clean, then taken again by a surviving parent's new process
            held_by = sorted(set(held_by) | set(restarted))
        ghost_pids = sorted(r["pid"] for r in ghosts)
        suspect_pids = sorted(suspects)
        data = self.memory_data(index, gpu, result)
        data.update(
            held_by=held_by,
            protected=sorted(r["pid"] for r in live if r.get("protected")),
            ghosts=ghost_pids,
            suspects=suspect_pids,
            idle_ms=self.idle_ms.get(index),
            error=gpu.get("error") if gpu else "no-such-gpu",
            accounting=books,
        )
        if result == "clean":
            words = "clean"
        elif result == "orphaned":
            words = "not clean: %s orphaned, no process holds it; a reset would free it" % size_words(
                books["orphaned"] if books else 0
            )
        elif result == "outside":
            words = (
                "not clean: %s used outside this container: another container or the host (no process "
                "here holds it; stop it where it runs)" % size_words(books["outside"] if books else 0)
            )
        elif result == "ghost-memory":
            words = "ghost memory: NVML lists %s; suspected holders: %s" % (
                pid_list(ghost_pids) or "nothing",
                pid_list(suspect_pids) or "none found (run the probe as root to see every holder)",
            )
        else:
            words = "still held by %s" % (pid_list(held_by) or data["error"] or "memory in use")
            if restarted:
                parents = sorted(set(parent for pid, parent in again if pid in restarted))
                words += " (taken again since it was verified clean: started by %s)" % pid_list(parents)
        self.event("verdict", result, "GPU %d: %s" % (index, words), gpu=index, data=data)
        return data

    def memory_data(self, index, gpu, result):
        # type: (int, Dict[str, Any], str) -> Dict[str, Any]
        """What every GPU verdict's data begins with: its result, and the GPU's memory before the
        plan, now, and at idle."""
        return {
            "result": result,
            "memory_before": self.before.get(index),
            "memory_after": gpu.get("memory_used"),
            "memory_baseline": gpu.get("memory_baseline"),
        }

    def release_verdict(self, index, view):
        # type: (int, View) -> Dict[str, Any]
        """A GPU the plan's processes used but the plan does not clean: was their memory released?
        What else uses it is named, untouched."""
        gpu = view.gpus.get(index) or {}
        own = self.own_pids()
        still = sorted(pid for pid, mem in view.listed.items() if index in mem and pid in own)
        others = scope.untouched(view.records, self.rule, [index], set(self.procs))
        suspects = set()  # type: Set[int]
        for pid in still:
            record = view.records.get(pid) or {}
            if record.get("kind") == GHOST:
                suspects.update(record.get("links") or [])
        result = "released" if not still else "still-listed"
        suspect_pids = sorted(suspects)
        data = self.memory_data(index, gpu, result)
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
        self.event("verdict", result, "GPU %d: %s" % (index, words), gpu=index, data=data)
        return data


def size_words(nbytes):
    # type: (int) -> str
    """`2.1 GiB`, `615 MiB`: for the probe's own words (the app has gputui.text.units)."""
    if nbytes >= 1 << 30:
        return "%.1f GiB" % (nbytes / float(1 << 30))
    return "%d MiB" % (nbytes >> 20)

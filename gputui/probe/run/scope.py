"""What a plan's rescan may add to it: the rule that keeps a kill inside what the operator chose.

After the first stages, the probe rescans the holders: killing a process can uncover others that
keep its memory (a ghost's data-loader child, a launcher's workers). Which of them it may stop
depends on the scope the operator confirmed (docs/ARCHITECTURE.md "Staged kill-and-verify"):

- a GPU (or host) plan proves GPUs clean: the hidden holders now attributed to those GPUs are its
  business, and, when it sweeps, the listed unattributed holders;
- every plan may stop the hidden holders *tied to a target*: a descendant of a target (it holds the
  target's context; `descendants` is taken before any signal, since a killed parent's children are
  re-parented), or a holder linked (process group, session, ancestry) to a target's PID or to a ghost
  the operator chose (once a target dies while a child keeps its memory, NVML still lists the target:
  the child's link names it).

Anything else found holding a GPU is reported, never signalled: a sibling of a chosen process, or
another job that merely shares its GPU. Pure functions over the probe's records, so the rule is
tested (property tests included) without processes.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple  # noqa: F401

from ..classify import HIDDEN


class Candidate(NamedTuple):
    pid: int
    start_time: int
    why: str
    gpus: List[int]
    origin: str  # "attributed" (to a plan GPU), "tied" (to a target) or "sweep"


class Rule(object):
    """A plan's scope, as the rescan needs it."""

    __slots__ = ("descendants", "ghosts", "gpus", "sweep", "targets")

    def __init__(self, gpus, targets, ghosts=(), descendants=None, sweep=()):
        # type: (Iterable[int], Iterable[int], Iterable[int], Optional[Dict[int, int]], Iterable[Tuple[int, int]]) -> None
        self.gpus = set(gpus)  # GPUs the plan must prove clean (none for a plan of processes)
        self.targets = set(targets)  # PIDs the plan signals (confirmed, or admitted by a rescan)
        self.ghosts = set(ghosts)  # dead PIDs the operator chose: their memory must come back
        self.descendants = dict(descendants or {})  # pid -> start time, under a target before signals
        self.sweep = list(sweep)  # (pid, start time) of the listed unattributed holders, when included


def tie(record, rule):
    # type: (Dict[str, Any], Rule) -> Optional[str]
    """Why this hidden holder is tied to a target (words), or None."""
    pid, start = record["pid"], record.get("start_time")
    if rule.descendants.get(pid) == start and start is not None:
        return "descendant of a target"
    for linked in record.get("links") or ():
        if linked in rule.targets:
            return "%s %d, a target" % (_LINK_WORDS.get(record.get("reason") or "", "tied to"), linked)
        if linked in rule.ghosts:
            return "holds the memory of ghost %d" % linked
    return None


def admissible(records, rule, done):
    # type: (Dict[int, Dict[str, Any]], Rule, Set[int]) -> List[Candidate]
    """The holders a rescan may add to the plan, in PID order. `records` is a full classified view
    {pid: record}; `done` the PIDs already in the plan (signalled or settled)."""
    out = []  # type: List[Candidate]
    for pid in sorted(records):
        record = records[pid]
        start = record.get("start_time")
        if pid in done or record.get("kind") != HIDDEN or start is None or record.get("protected"):
            continue
        gpus = [g for g in record.get("gpus") or [] if g in rule.gpus]
        if gpus:
            links = ",".join(str(p) for p in record.get("links") or []) or "?"
            why = "hidden holder of GPU %s (%s %s)" % (
                ",".join(map(str, gpus)),
                record.get("reason") or "link",
                links,
            )
            out.append(Candidate(pid, start, why, gpus, "attributed"))
            continue
        tied = tie(record, rule)
        if tied is not None:
            out.append(
                Candidate(pid, start, "hidden holder: " + tied, list(record.get("gpus") or []), "tied")
            )
    return out


def sweepable(records, rule, done):
    # type: (Dict[int, Dict[str, Any]], Rule, Set[int]) -> List[Candidate]
    """The listed unattributed holders that are still the processes the operator saw."""
    out = []  # type: List[Candidate]
    for pid, start in rule.sweep:
        record = records.get(pid)
        if pid in done or (record is not None and record.get("protected")):
            continue
        out.append(Candidate(pid, start, "unattributed hidden holder (sweep)", [], "sweep"))
    return out


def untouched(records, rule, gpus, done):
    # type: (Dict[int, Dict[str, Any]], Rule, Iterable[int], Set[int]) -> List[int]
    """Live processes on `gpus` that the plan leaves alone (not its business): reported, not signalled."""
    watch = set(gpus)
    out = set()  # type: Set[int]
    for pid, record in records.items():
        if pid in done or record.get("kind") not in ("user", HIDDEN, "monitor"):
            continue
        if watch & set(record.get("gpus") or []):
            out.add(pid)
    return sorted(out)


_LINK_WORDS = {"pgid": "same process group as", "sid": "same session as", "ancestor": "descendant of"}

# Process verdicts: the process no longer holds anything ...
GONE = ("exited", "vanished", "zombie")
# ... or is not the process the plan meant any more (its PID reused), or no longer holds a GPU.
MOOT = ("pid-reused", "no-gpu")
# The process the plan meant no longer runs (a plan of processes is done with it) ...
ENDED = (*GONE, "pid-reused")
# ... or it was not signalled and runs on: it held no GPU when checked. Never "stopped".
LEFT_RUNNING = ("no-gpu",)

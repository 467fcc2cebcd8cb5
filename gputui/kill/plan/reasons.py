"""Why a process is in a plan, or left out of it, in the words the dialog, the CLI and the audit
log show (docs/GPU_FACTS.md): what it holds and how it is tied to it; protected, a zombie, a ghost.

Apart from the planner because the plans of jobs and of one signal judge a process the same way.
"""

from __future__ import annotations

from ...model import Proc
from ...text.units import fmt_bytes
from ...text.words import gpus_words

PROTECTED_WORDS = {
    "monitor": "a GPU monitor: protected",
    "pid-1": "PID 1 (init): never signalled",
    "probe": "the gputui probe itself: never signalled",
    "probe-ancestor": "an ancestor of the probe (its shell or SSH session): never signalled",
    "gputui": "another gputui's probe (someone watching this host): never signalled",
    "kernel-thread": "a kernel thread: never signalled",
    "session": "a person's session (a login shell, sshd, tmux, screen, a terminal): never signalled",
    "init": "an init (it adopts and runs whole trees): never signalled",
    "boundary": "the edge of a job's container, Slurm job or unit, not part of the job: never signalled",
}
UNATTRIBUTED_WORDS = "unattributed hidden holder: holds /dev/nvidia*, no GPU listed, no link found"


def exclusion(proc: Proc, by_pid: dict[int, Proc]) -> str | None:
    """Why a process must not be a target, or None."""
    if proc.protected:
        words = PROTECTED_WORDS.get(proc.protected, f"protected ({proc.protected})")
        return f"{words}" if proc.protected != "monitor" else f"{proc.name or 'monitor'}: {words}"
    if proc.kind == "monitor":
        return f"{proc.name or 'monitor'}: {PROTECTED_WORDS['monitor']}"
    if proc.kind == "zombie":
        return zombie_words(proc)
    if proc.kind == "ghost":
        return _ghost_words(proc, by_pid)
    if proc.start_time is None:
        return "its start time could not be read: it cannot be identified safely"
    if proc.state == "Z":
        return zombie_words(proc)
    return None


def zombie_words(proc: Proc) -> str:
    parent = proc.ppid if proc.ppid is not None else (proc.links[0] if proc.links else "?")
    return f"zombie: holds nothing, parent {parent} must reap it"


def chosen_zombie_words(proc: Proc, by_pid: dict[int, Proc]) -> str:
    """A zombie the operator chose: why nothing can stop it, who can end it and what holds its GPU
    memory (docs/GPU_FACTS.md, "Zombies hold nothing": its own is released; a hidden holder tied to
    it, a child that kept its device files, may hold some)."""
    parent = proc.ppid if proc.ppid is not None else (proc.links[0] if proc.links else None)
    reaper = f"its parent {parent} reaps it" if parent is not None else "its parent reaps it"
    holders = sorted(p.pid for p in by_pid.values() if proc.pid in p.links and p.kind == "hidden")
    held = (
        f"the GPU memory it had is held by {', '.join(map(str, holders))} (hidden holders tied to it)"
        if holders
        else "it holds no GPU memory"
    )
    return (
        f"{proc.pid} ({proc.name or '?'}) is a zombie: it has exited, no signal reaches it; it stays "
        f"until {reaper}; {held}"
    )


def _ghost_words(proc: Proc, by_pid: dict[int, Proc]) -> str:
    if proc.reason == "other-namespace" and not proc.links:
        return "not in this PID namespace (a container?): stop it where it runs"
    if proc.reason == "zombie":
        parent = proc.links[0] if proc.links else "?"
        return f"already exited (zombie, parent {parent} must reap it); NVML still lists it"
    holders = [pid for pid in proc.links if pid in by_pid]
    if holders:
        return f"already dead; its memory is held by {', '.join(map(str, holders))}"
    return "already dead; no holder found (ghost memory: try the sweep, or run the probe as root)"


def why(proc: Proc, explicit: set[int]) -> str:
    """Why a process is in the plan: what it holds and how it is tied to it; `chosen` first when
    the operator named it (by PID, or selected in the dashboard): what it is still says why."""
    what = holds_words(proc)
    return f"chosen; {what}" if proc.pid in explicit else what


def holds_words(proc: Proc) -> str:
    """`uses GPU 0: 40.0 GiB`, `hidden holder of GPU 2 (same process group as 4121)`."""
    if proc.kind == "hidden":
        link = proc.links[0] if proc.links else None
        how = {"pgid": "same process group as", "sid": "same session as", "ancestor": "descendant of"}
        if proc.gpus and link is not None:
            return (
                f"hidden holder of {gpus_words(proc.gpus)} ({how.get(proc.reason or '', 'tied to')} {link})"
            )
        if link is not None:
            return f"hidden holder tied to {link}"
        if not proc.gpus:
            return UNATTRIBUTED_WORDS
        return f"hidden holder of {gpus_words(proc.gpus)}"
    sizes = sorted(proc.gpu_memory.items())
    if sizes and all(b is not None for _, b in sizes) and {i for i, _ in sizes} == set(proc.gpus):
        return "uses " + ", ".join(f"GPU {i}: {fmt_bytes(b)}" for i, b in sizes)
    return f"uses {gpus_words(proc.gpus)}" if proc.gpus else "uses no GPU NVML lists"

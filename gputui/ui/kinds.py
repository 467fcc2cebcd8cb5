"""What the UI says about each kind of process (docs/ARCHITECTURE.md "Classifying what holds a GPU").

Kinds differ by glyph and word as well as colour, so the colour-blind theme and a monochrome
screenshot still tell them apart.
"""

from __future__ import annotations

from gputui.model import KINDS, Proc, Sample, brief_command

from .fmt import safe

GLYPHS = {"user": "■", "ghost": "◇", "hidden": "▲", "monitor": "○", "zombie": "✕"}
ORDER = {kind: i for i, kind in enumerate(KINDS)}  # user first: what an operator looks for
HOLDING = ("user", "ghost", "hidden")  # kinds that keep a GPU from being free
MEANINGS = {
    "user": "NVML lists it on this GPU, with its memory",
    "ghost": "NVML lists a PID that is dead, a zombie or in another PID namespace",
    "hidden": "holds /dev/nvidia* but NVML lists it on no GPU (often a forked child of a ghost)",
    "monitor": "only watches GPUs (the probe, nvidia-smi, DCGM): protected",
    "zombie": "exited, not reaped: holds nothing; its parent must reap it",
}
STYLE = {kind: f"kind--{kind}" for kind in KINDS}

_GHOST_REASONS = {"dead": "dead PID", "zombie": "zombie PID", "other-namespace": "PID not in this namespace"}
_LINKS = {"pgid": "same process group as", "sid": "same session as", "ancestor": "descends from"}


def label(kind: str) -> str:
    return f"{GLYPHS.get(kind, '?')} {kind}"


def _who(pid: int, sample: Sample | None) -> str:
    other = _find(pid, sample)
    return f"{pid} ({other.kind})" if other is not None else str(pid)


def _find(pid: int, sample: Sample | None) -> Proc | None:
    if sample is None:
        return None
    return next((p for p in sample.processes if p.pid == pid), None)


def note(proc: Proc, sample: Sample | None) -> str:
    """Why this process has its kind, in words (shown after its command line). Plain text."""
    if proc.kind == "ghost":
        why = _GHOST_REASONS.get(proc.reason or "", safe(proc.reason) or "ghost")
        if proc.links:
            return f"{why}; memory held by {', '.join(_who(p, sample) for p in proc.links)}"
        return f"{why}; no holder found (memory may come back by itself)"
    if proc.kind == "hidden":
        if proc.reason == "unattributed" or not proc.links:
            return "holds /dev/nvidia*, on no GPU (unattributed)"
        link = _LINKS.get(proc.reason or "", "linked to")
        return f"{link} {', '.join(_who(p, sample) for p in proc.links)}"
    if proc.kind == "zombie":
        parent_pid = proc.ppid if proc.ppid is not None else (proc.links[0] if proc.links else None)
        if parent_pid is None:
            return "zombie: its parent must reap it"
        parent = _find(parent_pid, sample)
        name = f" {safe(parent.name)}" if parent is not None and parent.name else ""
        return f"zombie: parent {parent_pid}{name} must reap it"
    if proc.kind == "monitor":
        return f"protected: {safe(proc.protected or proc.reason or 'monitor')}"
    if proc.container:
        return f"in container {safe(proc.container)} (pid {proc.nspid} there)"
    return ""


def command(proc: Proc) -> str:
    """The command line as people say it (`python train.py`, long paths cut to `.../name`), made
    safe; empty for a PID that is not in /proc. The filter still searches the full line."""
    if proc.command:
        return safe(brief_command(list(proc.command)))
    return f"[{safe(proc.name)}]" if proc.name else ""

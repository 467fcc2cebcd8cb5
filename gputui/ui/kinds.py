"""What the UI says about each kind of process (docs/ARCHITECTURE.md "Classifying what holds a GPU").

Kinds differ by glyph and word as well as colour, so the colour-blind theme and a monochrome
screenshot still tell them apart.
"""

from __future__ import annotations

from gputui.kill.plan.mps import mps_clients
from gputui.model import KINDS, Proc, Sample, brief_command
from gputui.text.words import MPS_NAMES, kind_word
from gputui.text.words import MPS_WORDS as MPS_WORDS  # the help lists them from here

from .fmt import safe

GLYPHS = {"user": "■", "ghost": "◇", "hidden": "▲", "monitor": "○", "zombie": "✕"}
ORDER = {kind: i for i, kind in enumerate(KINDS)}  # user first: what an operator looks for
HOLDING = ("user", "ghost", "hidden")  # kinds that keep a GPU from being free
KILLABLE = ("user", "hidden")  # kinds a plan signals (a ghost is dead, a zombie has exited)
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


def killable(proc: Proc) -> bool:
    """A process `u` tags (a plan signals it when chosen): a GPU user or a hidden holder attributed
    to a GPU, not protected. An unattributed holder (no GPU: gputui.kill.plan.sweep_candidates) is the
    sweep's, signalled only when the dialog's sweep is on (s), or when chosen by itself."""
    return proc.kind in KILLABLE and proc.protected is None and not (proc.kind == "hidden" and not proc.gpus)


def label(kind: str) -> str:
    return f"{GLYPHS.get(kind, '?')} {kind}"


# CUDA MPS: the Kind column names a process's part in it in place of its kind (the glyph stays);
# the words are gputui.text.words', which `gputui snapshot` says too.
MPS_MEANINGS = {
    "server": "the MPS server: its clients' work runs in its GPU contexts; stopping it ends them all "
    "(protected, like a monitor)",
    "control": "the MPS control daemon: starts the servers; stopping it ends every client (protected)",
    "client": "an MPS client: NVML lists it through the MPS server; stopping it leaves the others",
}
# Jobs (J, X): a job's row in the process table, and a job's processes without a GPU in the dialog.
JOB_GLYPH = "◆"
JOB_MEANINGS = (
    (f"{JOB_GLYPH} job", "a job's row (J): its root (a launcher, a supervisor, a service) with the GPUs "
     "and memory of all its members, which hang under it; X stops the whole job"),
    (f"{JOB_GLYPH} root", "the dialog: a job's root that holds no GPU itself (a launcher): signalled "
     "first, it passes the signal on to its members"),
    (f"{JOB_GLYPH} between", "the dialog: a process between a job's root and its members (an agent)"),
)  # fmt: skip
# How MIG instances read (the GPU table's child rows, the process table's GPU column).
MIG_MEANINGS = (
    ("0/1.0", "a MIG instance, under its GPU: GPU 0, GPU instance 1, compute instance 0"),
    ("0:1.0", "GPU column: the process runs in that MIG instance"),
)


def proc_label(proc: Proc) -> str:
    """The Kind column: the kind's glyph and word, or its MPS part (`○ mps-srv`) for MPS processes."""
    return f"{GLYPHS.get(proc.kind, '?')} {kind_word(proc)}"


NotePart = tuple[str, bool]  # (text, is a number: shown whole or not at all)


def _who(pid: int, sample: Sample | None) -> list[NotePart]:
    other = _find(pid, sample)
    return [(str(pid), True), (f" ({other.kind})" if other is not None else "", False)]


def _whom(pids: tuple[int, ...], sample: Sample | None) -> list[NotePart]:
    parts: list[NotePart] = []
    for i, pid in enumerate(pids):
        if i:
            parts.append((", ", False))
        parts.extend(_who(pid, sample))
    return parts


def _find(pid: int, sample: Sample | None) -> Proc | None:
    if sample is None:
        return None
    return next((p for p in sample.processes if p.pid == pid), None)


def note_parts(proc: Proc, sample: Sample | None, container: bool = True) -> list[NotePart]:
    """Why this process has its kind, in words, with its numbers (PIDs) marked: a narrow column cuts
    the words around them, never them (widgets.table.fit). Plain text, made safe. `container`:
    name its container and its PID there (False where a column of its own shows the container)."""
    if proc.mps in ("server", "control") and proc.kind == "monitor":
        what = MPS_NAMES[proc.mps]
        clients = list(mps_clients(sample, proc)) if sample is not None else []
        ends = " client ends with it)" if len(clients) == 1 else " clients end with it)"
        return [(f"{what} (", False), (str(len(clients)), True), (ends, False)]
    if proc.mps == "client" and proc.kind == "user":
        return [(MPS_NAMES["client"], False)]
    if proc.kind == "ghost":
        why = _GHOST_REASONS.get(proc.reason or "", safe(proc.reason) or "ghost")
        if proc.links:
            return [(f"{why}; memory held by ", False), *_whom(proc.links, sample)]
        return [(f"{why}; no holder found (memory may come back by itself)", False)]
    if proc.kind == "hidden":
        if proc.reason == "unattributed" or not proc.links:
            return [("holds /dev/nvidia*, on no GPU (unattributed)", False)]
        link = _LINKS.get(proc.reason or "", "linked to")
        return [(f"{link} ", False), *_whom(proc.links, sample)]
    if proc.kind == "zombie":
        parent_pid = proc.ppid if proc.ppid is not None else (proc.links[0] if proc.links else None)
        if parent_pid is None:
            return [("zombie: its parent must reap it", False)]
        parent = _find(parent_pid, sample)
        name = f" {safe(parent.name)}" if parent is not None and parent.name else ""
        return [("zombie: parent ", False), (str(parent_pid), True), (f"{name} must reap it", False)]
    if proc.kind == "monitor":
        return [(f"protected: {safe(proc.protected or proc.reason or 'monitor')}", False)]
    if proc.container and container:
        parts: list[NotePart] = [(f"in container {safe(proc.container)}", False)]
        if proc.nspid is not None:
            parts += [(" (pid ", False), (str(proc.nspid), True), (" there)", False)]
        return parts
    return []  # a container in its own column: the command says more (the detail has its PID there)


def note(proc: Proc, sample: Sample | None) -> str:
    """Why this process has its kind, in words (shown before its command line). Plain text."""
    return "".join(text for text, _ in note_parts(proc, sample))


def command(proc: Proc) -> str:
    """The command line as people say it (`python train.py`, long paths cut to `.../name`), made
    safe; empty for a PID that is not in /proc. The filter still searches the full line."""
    if proc.command:
        return safe(brief_command(list(proc.command)))
    return f"[{safe(proc.name)}]" if proc.name else ""

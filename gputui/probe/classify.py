"""What each GPU-related process is: user, ghost, hidden holder, monitor or zombie.

The rules are docs/ARCHITECTURE.md "Classifying what holds a GPU", grounded in GPU_FACTS.md:
holding /dev/nvidiaN does not mean using GPU N (every CUDA process and every NVML client opens them
all), so per-GPU attribution comes from NVML's lists alone, and a holder NVML does not list is tied to
a GPU only through its process group, session or ancestry.

Pure functions over plain inputs, so the rules are tested without processes.
Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

from typing import Callable, Dict, List, NamedTuple, Optional, Set  # noqa: F401  (type comments)

from .peers import PROTECTED as PEER

# Processes that only watch GPUs: never targeted by default. /proc comm is cut at 15 characters.
# Another gputui's probe is recognised by what it is, not by a name (peers.py).
MONITOR_NAMES = frozenset(
    name[:15]
    for name in (
        "nvidia-smi",
        "nvitop",
        "nvtop",
        "gpustat",
        "nvidia-persistenced",
        "nv-hostengine",
        "dcgm-exporter",
        "dcgmi",
        "nvidia-cuda-mps-control",
        "nvidia-cuda-mps-server",
        "Xorg",
        "X",
        "Xwayland",
        "gnome-shell",
        "kwin_x11",
        "kwin_wayland",
    )
)

USER, GHOST, HIDDEN, MONITOR, ZOMBIE = "user", "ghost", "hidden", "monitor", "zombie"
KINDS = (USER, GHOST, HIDDEN, MONITOR, ZOMBIE)  # every record's `kind` is one of these

# CUDA MPS (Multi-Process Service): the control daemon starts one server per user; the server holds
# the GPU contexts its clients' work runs in. Both are cut to this comm (15 characters).
MPS_COMM = "nvidia-cuda-mps"
MPS_SERVER, MPS_CONTROL, MPS_CLIENT = "server", "control", "client"
MPS_ROLES = (MPS_SERVER, MPS_CONTROL, MPS_CLIENT)  # a record's `mps`: one of these, or absent


class ProcFacts(NamedTuple):
    """What classification needs to know of a live process (a subset of procfs.Stat)."""

    comm: str
    state: str
    ppid: int
    pgid: int
    sid: int


class Verdict(NamedTuple):
    kind: str
    reason: Optional[str]
    gpus: List[int]
    links: List[int]


def _attribute(pid, facts, listed, lookup, stop):
    # type: (int, ProcFacts, Dict[int, Dict[int, Optional[int]]], Callable[[int], Optional[ProcFacts]], Set[int]) -> Verdict
    """A hidden holder belongs to the GPUs of the listed PID its group, session or ancestry names."""
    if facts.pgid in listed and facts.pgid != pid:
        return Verdict(HIDDEN, "pgid", sorted(listed[facts.pgid]), [facts.pgid])
    if facts.sid in listed and facts.sid != pid:
        return Verdict(HIDDEN, "sid", sorted(listed[facts.sid]), [facts.sid])
    seen = set()  # type: Set[int]
    parent = facts.ppid
    while parent > 1 and parent not in seen and parent not in stop:
        if parent in listed:
            return Verdict(HIDDEN, "ancestor", sorted(listed[parent]), [parent])
        seen.add(parent)
        up = lookup(parent)
        if up is None:
            break
        parent = up.ppid
    return Verdict(HIDDEN, "unattributed", [], [])


def classify(listed, holders, lookup, self_pid, stop=None, foreign_pids=False, zombies=None, peer=None):
    # type: (Dict[int, Dict[int, Optional[int]]], Set[int], Callable[[int], Optional[ProcFacts]], int, Optional[Set[int]], bool, Optional[Set[int]], Optional[Callable[[int], bool]]) -> Dict[int, Verdict]
    """Classify every PID NVML lists, every device-file holder, and the given zombie candidates.

    listed: NVML's process lists, {pid: {gpu index: bytes or None}}.
    holders: PIDs holding any GPU device file.
    lookup: facts of a live process, None when it is gone.
    stop: PIDs where an ancestry walk ends (the probe and its ancestors: they link everything).
    foreign_pids: this /proc is not the host's PID namespace, so a missing listed PID may be alive.
    zombies: exited-unreaped PIDs that were GPU processes or are tied to one; each gets kind zombie.
    peer: whether a holder NVML does not list is another gputui's probe (peers.py): a monitor.
    """
    stop = stop or set()
    out = {}  # type: Dict[int, Verdict]
    for pid, mem in listed.items():
        facts = lookup(pid)
        gpus = sorted(mem)
        if facts is None:
            out[pid] = Verdict(GHOST, "other-namespace" if foreign_pids else "dead", gpus, [])
        elif facts.state == "Z":
            out[pid] = Verdict(GHOST, "zombie", gpus, [facts.ppid])
        elif pid == self_pid:
            out[pid] = Verdict(MONITOR, "self", gpus, [])
        elif facts.comm in MONITOR_NAMES:
            out[pid] = Verdict(MONITOR, "known-monitor", gpus, [])
        else:
            out[pid] = Verdict(USER, None, gpus, [])
    for pid in holders:
        if pid in out:
            continue
        facts = lookup(pid)
        if facts is None:
            continue  # gone since the scan
        if pid == self_pid:
            out[pid] = Verdict(MONITOR, "self", [], [])
        elif facts.comm in MONITOR_NAMES:
            out[pid] = Verdict(MONITOR, "known-monitor", [], [])
        elif peer is not None and peer(pid):
            out[pid] = Verdict(MONITOR, PEER, [], [])
        else:
            out[pid] = _attribute(pid, facts, listed, lookup, stop)
    for pid in zombies or ():
        if pid in out:
            continue
        facts = lookup(pid)
        if facts is not None and facts.state == "Z":
            out[pid] = Verdict(ZOMBIE, "parent %d" % facts.ppid, [], [facts.ppid])
    # A ghost names the hidden holders tied to it: the suspects that keep its memory.
    for pid, verdict in out.items():
        if verdict.kind == HIDDEN:
            for linked in verdict.links:
                owner = out.get(linked)
                if owner is not None and owner.kind == GHOST and pid not in owner.links:
                    owner.links.append(pid)
    return out


def mps_role(comm, command, listed, mps_client):
    # type: (Optional[str], List[str], bool, bool) -> Optional[str]
    """A process's part in CUDA MPS: "server", "control" (the daemon), "client" or None.

    Both daemons have the comm "nvidia-cuda-mps" (cut at 15): the program's name on the command line
    tells them apart, else the server is the one NVML lists on a GPU (it holds the contexts). A client
    is what NVML lists through its MPS process list. Names are untrusted: this only labels a process
    (and adds a warning to a plan); it never makes one a target."""
    if comm == MPS_COMM:
        for arg in command[:3]:
            base = arg.rsplit("/", 1)[-1]
            if base.startswith("nvidia-cuda-mps-server"):
                return MPS_SERVER
            if base.startswith("nvidia-cuda-mps-control"):
                return MPS_CONTROL
        return MPS_SERVER if listed else MPS_CONTROL
    return MPS_CLIENT if mps_client else None


def zombie_candidates(zombie_pids, lookup, gpu_pids, seen_before):
    # type: (List[int], Callable[[int], Optional[ProcFacts]], Set[int], Set[int]) -> Set[int]
    """Zombies worth showing: once GPU processes themselves, or children/group members of one.

    Any zombie on the host is not a GPU matter; one tied to a GPU job explains where its memory went
    (released) and who must reap it (its parent)."""
    keep = set()  # type: Set[int]
    for pid in zombie_pids:
        if pid in seen_before:
            keep.add(pid)
            continue
        facts = lookup(pid)
        if facts is not None and (facts.ppid in gpu_pids or facts.pgid in gpu_pids or facts.sid in gpu_pids):
            keep.add(pid)
    return keep


def protection(pid, kind, self_pid, probe_ancestors, kthread=False, reason=None):
    # type: (int, str, int, Set[int], bool, Optional[str]) -> Optional[str]
    """Why a process must never be signalled by default, or None. Another gputui's probe is never
    signalled, not even as a monitor the operator includes: it is someone else's view of the host."""
    if pid == 1:
        return "pid-1"
    if pid == self_pid:
        return "probe"
    if pid in probe_ancestors:
        return "probe-ancestor"
    if kthread:
        return "kernel-thread"
    if kind == MONITOR and reason == PEER:
        return PEER
    if kind == MONITOR:
        return "monitor"
    return None

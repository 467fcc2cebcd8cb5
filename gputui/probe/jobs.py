"""Jobs: the work each GPU process belongs to, named by its root (docs/ARCHITECTURE.md "Jobs: how a
job's root is found"; the wire format is docs/PROTOCOL.md "Jobs").

People stop "my torchrun job", "Slurm job 4711", "the vLLM service", not PIDs. A job's root is the
highest ancestor of a GPU process that is still part of the same work: the walk up the parent chain
stops below the first boundary people recognise: a container, a Slurm job, a systemd unit, an init
(PID 1, a PID namespace's init, a subreaper), or a person's session (an interactive shell, sshd,
tmux, screen, a terminal). What is below it is the job: a launcher (torchrun, accelerate, deepspeed,
mpirun) with its ranks, a supervisor with its worker, a `bash run.sh` loop with its runs.

`find_root` and `build_jobs` are pure functions over `Node` records (tested on fake /proc trees and
hand-made nodes); `JobFinder` reads the nodes from /proc, only for the GPU processes and their
ancestors, cached per (PID, start time).
Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple  # noqa: F401

from .pods import Containers
from .procfs import (  # noqa: F401  (Stat: type comments)
    PROC,
    Stat,
    container_in,
    read_cmdline,
    read_stat,
    read_status,
    slurm_job_in,
    unit_in,
    user_name,
)
from .wire import clip_arg

MAX_WALK = 64  # ancestors walked up from one GPU process (boundary "limit" past it)
MAX_JOBS = 64  # jobs per sample (jobs_omitted counts the rest)
MAX_MEMBERS = 256  # members listed per job (the lowest PIDs)
MAX_JOB_PROCESSES = 256  # [pid, start] entries per job
MAX_ALL_PROCESSES = 1024  # [pid, start] entries over all the jobs of a sample
MAX_ALL_MEMBERS = 1024  # members listed over all the jobs of a sample
ROOT_ARGS = 8  # arguments of a root's command, each at most ROOT_ARG characters (as `parents`)
ROOT_ARG = 64
JOB_TEXT = 128  # characters of a root's name and user, a job's container, unit, Slurm job
# The kinds of process record that belong to a job: GPU users and hidden holders (a ghost's holders
# among them). Not monitors, zombies, or a ghost's dead PID.
JOB_KINDS = ("user", "hidden")
BOUNDARIES = ("container", "slurm", "unit", "init", "shell", "limit")

# Processes that adopt orphans and run whole trees: a job is below them. /proc comm is cut at 15.
INIT_COMMS = frozenset(
    name[:15]
    for name in (
        "systemd", "init", "tini", "dumb-init", "catatonit", "docker-init", "containerd-shim",
        "containerd-shim-runc-v2", "conmon", "runsvdir", "s6-svscan", "lxc-start", "kthreadd",
    )
)  # fmt: skip
# A person's session: a job started from it stops below it.
SESSION_COMMS = frozenset(
    name[:15]
    for name in (
        "sshd", "sshd-session", "login", "tmux: server", "tmux", "screen", "SCREEN", "mosh-server",
        "gnome-terminal-server", "konsole", "xterm", "urxvt", "rxvt", "alacritty", "kitty", "wezterm-gui",
        "foot", "tilix", "terminator", "xfce4-terminal", "lxterminal", "st", "Terminal", "iTerm2",
        "dropbear", "agetty", "getty",
    )
)  # fmt: skip
SHELLS = frozenset(("bash", "zsh", "sh", "dash", "fish", "ksh", "mksh", "tcsh", "csh", "ash", "busybox",
                    "nu", "xonsh", "elvish", "yash", "rbash"))  # fmt: skip
SLURMSTEPD = "slurmstepd"


class Node(NamedTuple):
    """What the root finding needs to know of one live process."""

    pid: int
    start: int  # /proc/PID/stat field 22: with the pid, the process's identity
    ppid: int
    comm: str
    state: str = "S"
    uid: Optional[int] = None
    ns_init: bool = False  # PID 1 of a PID namespace nested below the probe's: a container's edge
    container: Optional[str] = None
    slurm_job: Optional[str] = None
    unit: Optional[str] = None
    argv: Tuple[str, ...] = ()


def interactive_shell(node):
    # type: (Node) -> bool
    """A shell a person types in: a login shell (`-bash`), or one with no script and no `-c` (`bash`,
    `zsh -l`, `bash -i`). `bash run.sh` and `sh -c "..."` are work, not a session."""
    comm = node.comm
    argv = node.argv
    name = argv[0] if argv else comm
    if name.startswith("-"):
        return True  # login shell (argv[0] "-bash")
    if comm not in SHELLS:
        return False
    # Options only: a command (`-c`) or a script operand makes it work, not a session.
    return all(arg.startswith("-") and arg != "-c" for arg in argv[1:])


def boundary(child, parent, stop):
    # type: (Node, Optional[Node], Set[int]) -> Optional[str]
    """What ends the walk between `child` and its `parent` (see BOUNDARIES); None: the parent is
    part of the same work. `stop`: PIDs that act as init here (PID 1 and 2, the probe and its
    ancestors, a reader's subreaper)."""
    if parent is None or child.ppid <= 0:
        return "init"
    if child.ns_init or parent.container != child.container:
        return "container"
    if parent.slurm_job != child.slurm_job or parent.comm == SLURMSTEPD:
        return "slurm"
    if parent.unit != child.unit:
        return "unit"
    # A namespace's PID 1 that is no init program (Docker's `python train.py`) is the container's
    # main process: part of the job, whose edge is then its container's (above).
    if parent.pid in stop or parent.pid <= 2 or parent.comm in INIT_COMMS:
        return "init"
    if parent.comm in SESSION_COMMS or interactive_shell(parent):
        return "shell"
    return None


def find_root(pid, node_of, stop, limit=MAX_WALK):
    # type: (int, Callable[[int], Optional[Node]], Set[int], int) -> Tuple[Optional[List[Node]], str]
    """The chain from process `pid` up to its job's root (the root last) and the boundary that ended
    it; (None, "init") when `pid` itself cannot be read (it has gone)."""
    node = node_of(pid)
    if node is None:
        return None, "init"
    chain = [node]
    if node.pid in stop or node.pid <= 2:
        return chain, "init"  # a protected process is a job of its own, never climbed through
    seen = {node.pid}
    while True:
        if len(chain) > limit:
            return chain, "limit"
        child = chain[-1]
        parent = node_of(child.ppid) if child.ppid > 0 and child.ppid not in seen else None
        where = boundary(child, parent, stop)
        if where is not None:
            return chain, where
        assert parent is not None
        seen.add(parent.pid)
        chain.append(parent)


def clip(text, limit):
    # type: (str, int) -> str
    if len(text) <= limit:
        return text
    return "%s\u2026(%d bytes)" % (text[:limit], len(text.encode("utf-8", "replace")))


def root_command(argv):
    # type: (Iterable[str]) -> List[str]
    """A root's command line within ROOT_ARGS arguments of ROOT_ARG characters, marked where cut (a
    path keeps its name: clip_arg)."""
    args = list(argv)
    out = [clip_arg(a, ROOT_ARG) for a in args[:ROOT_ARGS]]
    if len(args) > ROOT_ARGS:
        out.append("... (%d more)" % (len(args) - ROOT_ARGS))
    return out


def _memory(record):
    # type: (Dict[str, Any]) -> int
    return sum(b for b in (record.get("gpu_memory") or {}).values() if isinstance(b, int))


def _same(container):
    # type: (Optional[str]) -> Optional[str]
    return container


def build_jobs(records, node_of, stop, name_of=user_name, label=_same):
    # type: (Iterable[Dict[str, Any]], Callable[[int], Optional[Node]], Set[int], Callable[[Optional[int]], Optional[str]], Callable[[Optional[str]], Optional[str]]) -> Tuple[List[Dict[str, Any]], Dict[int, str], int]
    """The jobs of the sample's process records: (jobs, {pid: job id}, how many jobs were left out).

    Every live GPU process (JOB_KINDS, not a zombie) gets the job of its root; processes that share
    a root are one job. Jobs sorted by memory (largest first), then root; bounded (docs/PROTOCOL.md).
    `label`: a container as people name it (a pod's namespace and name: pods.py)."""
    roots = {}  # type: Dict[int, Dict[str, Any]]
    job_of = {}  # type: Dict[int, str]
    for record in records:
        pid = record.get("pid")
        if record.get("kind") not in JOB_KINDS or record.get("state") == "Z" or not isinstance(pid, int):
            continue
        chain, where = find_root(pid, node_of, stop)
        if not chain or chain[0].start != record.get("start_time"):
            continue  # gone, or another process at that PID by now
        root = chain[-1]
        job = roots.get(root.pid)
        if job is None:
            job = roots[root.pid] = {
                "root": root,
                "boundary": where,
                "members": [],
                "nodes": {},
                "records": [],
            }
        job["members"].append(pid)
        job["records"].append(record)
        for depth, node in enumerate(reversed(chain)):
            job["nodes"].setdefault(node.pid, (depth, node))
        job_of[pid] = str(root.pid)
    jobs = [_job_record(job, name_of, label) for job in roots.values()]
    jobs.sort(key=lambda j: (-j["memory"], j["root"]))
    kept = jobs[:MAX_JOBS]
    room, members = MAX_ALL_PROCESSES, MAX_ALL_MEMBERS
    for job in kept:
        job["processes"] = job["processes"][: max(0, min(room, MAX_JOB_PROCESSES))]
        room -= len(job["processes"])
        job["members"] = job["members"][: max(0, members)]
        members -= len(job["members"])
    return kept, job_of, len(jobs) - len(kept)


def _job_record(job, name_of, label):
    # type: (Dict[str, Any], Callable[[Optional[int]], Optional[str]], Callable[[Optional[str]], Optional[str]]) -> Dict[str, Any]
    root = job["root"]  # type: Node
    gpus = set()  # type: Set[int]
    for record in job["records"]:
        gpus.update(g for g in record.get("gpus") or [] if isinstance(g, int))
    # Parents before children (the root first): the order a plan stops them in.
    order = sorted(job["nodes"].values(), key=lambda item: (item[0], item[1].pid))
    return {
        "id": str(root.pid),
        "root": root.pid,
        "root_start": root.start,
        "name": clip(root.comm, JOB_TEXT),
        "command": root_command(root.argv),
        "user": _clip_or_none(name_of(root.uid)),
        "uid": root.uid,
        "state": root.state,
        "ppid": root.ppid,
        "boundary": job["boundary"],
        "members": sorted(job["members"])[:MAX_MEMBERS],
        "processes": [[node.pid, node.start] for _, node in order],
        "gpus": sorted(gpus),
        "memory": sum(_memory(r) for r in job["records"]),
        "slurm_job": _clip_or_none(root.slurm_job),
        "container": _clip_or_none(label(root.container)),
        "unit": _clip_or_none(root.unit),
    }


def _clip_or_none(text):
    # type: (Optional[str]) -> Optional[str]
    return clip(text, JOB_TEXT) if text is not None else None


def read_node(pid, proc=PROC):
    # type: (int, str) -> Optional[Node]
    """One process's node, read from /proc now (None when it has gone)."""
    stat = read_stat(pid, proc)
    if stat is None:
        return None
    return _node(stat, proc, Containers(proc))


def _node(stat, proc, containers):
    # type: (Any, str, Containers) -> Node
    status = read_status(stat.pid, proc)
    nspid = status.nspid if status is not None else None
    cgroup = containers.cgroup(stat.pid)
    return Node(
        pid=stat.pid,
        start=stat.start_time,
        ppid=stat.ppid,
        comm=stat.comm,
        state=stat.state,
        uid=status.uid if status is not None else None,
        # NSpid "5000 1": PID 1 of a namespace below this one (a container's init, `unshare --pid`).
        ns_init=bool(nspid and len(nspid) > 1 and nspid[-1] == 1),
        container=container_in(cgroup),
        slurm_job=slurm_job_in(cgroup),
        unit=unit_in(cgroup),
        argv=tuple(read_cmdline(stat.pid, proc)[: ROOT_ARGS + 1]),
    )


class JobFinder(object):
    """Reads the nodes the root finding needs from /proc: for each sample, the GPU processes and
    their ancestors only. A node's cgroup, status and command line are read once per (PID, start
    time); its stat (parent, state) every sample. `containers`: where cgroups come from and how a
    pod is named (pods.py; the probe's own, so a reader that plays a node is heard)."""

    def __init__(self, stop, proc=PROC, containers=None):
        # type: (Set[int], str, Optional[Containers]) -> None
        self.stop = set(stop)
        self.proc = proc
        self.containers = containers if containers is not None else Containers(proc)
        self._cache = {}  # type: Dict[Tuple[int, int], Node]

    def compute(self, records, stats=None):
        # type: (List[Dict[str, Any]], Optional[Dict[int, Optional[Stat]]]) -> Tuple[List[Dict[str, Any]], Dict[int, str], int]
        """build_jobs over `records`, reading /proc now. `stats`: the stats read so far this
        sample, by PID (those read here are added)."""
        if stats is None:
            stats = {}
        seen = {}  # type: Dict[int, Optional[Node]]
        used = {}  # type: Dict[Tuple[int, int], Node]

        def node_of(pid):
            # type: (int) -> Optional[Node]
            if pid in seen:
                return seen[pid]
            if pid not in stats:
                stats[pid] = read_stat(pid, self.proc)
            stat = stats[pid]
            node = None  # type: Optional[Node]
            if stat is not None:
                key = (pid, stat.start_time)
                known = self._cache.get(key)
                node = (
                    _node(stat, self.proc, self.containers)
                    if known is None
                    else known._replace(ppid=stat.ppid, state=stat.state)
                )
                used[key] = node
            seen[pid] = node
            return node

        out = build_jobs(records, node_of, self.stop, label=self.containers.label)
        self._cache = used  # what no sample walked through any more is forgotten
        return out

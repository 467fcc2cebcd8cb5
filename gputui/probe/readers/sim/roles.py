"""The jobs of a sim: the roles a job can play (what each holds and does, see SimReader.spawn), their
defaults (script names, process names, a launcher's children), the checks of a spawn's arguments,
and SimJob, what the reader knows of a job it started.

Apart from the session that starts jobs: this is what a job *is*, with no process machinery; the
demo daemon and the tests hold SimJobs.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import random  # noqa: F401  (in type comments)
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple  # noqa: F401  (used in type comments)

from ...classify import MPS_COMM  # both MPS daemons' comm: what classify knows them by
from .client import CONTEXT_ROLES
from .processes import signal_checked

ROLES = (
    "busy", "idle", "ignore-term", "ghost", "hidden", "zombie", "monitor", "workers",
    "mps-control", "mps-server", "mps-client", "launcher", "supervisor", "neighbour", "stopped",
)  # fmt: skip
# Roles that hold no GPU themselves but run CUDA-like children on their GPUs (one each).
PARENT_ROLES = ("launcher", "supervisor")
GPU_ROLES = (*CONTEXT_ROLES, *PARENT_ROLES, "neighbour")  # roles whose `gpu` is used
LIFETIME_ROLES = ("busy", "idle", "ignore-term")  # roles that may end by themselves (spawn's lifetime)
# The children a launcher or a supervisor starts: script name and arguments ("{rank}": its number).
DEFAULT_CHILD = {
    "launcher": {"name": "train.py", "argv": ["--local-rank", "{rank}"]},
    "supervisor": {"name": "worker.py", "argv": ["--queue", "default"]},
}
DEFAULT_NAMES = {
    "busy": "train.py",
    "idle": "notebook_kernel.py",
    "ignore-term": "serve.py",
    "ghost": "train.py",
    "hidden": "probe_cuda.py",
    "zombie": "bench.py",
    "monitor": "nv_hostengine.py",
    "workers": "launch.py",
    "mps-control": "nvidia-cuda-mps-control",
    "mps-server": "nvidia-cuda-mps-server",
    "mps-client": "infer.py",
    "launcher": "torchrun",
    "supervisor": "supervisor.py",
    "neighbour": "train.py",
    "stopped": "train.py",
}
MONITOR_COMM = "nv-hostengine"


class SimError(RuntimeError):
    """A sim job could not be started or did not settle."""


@dataclass(eq=False)  # a job is one thing: equal only to itself (and hashed so); its own __repr__
class SimJob(object):
    """A process started by SimReader.spawn (plain attributes; pids are set once it is ready).

    - pid, start_time: the job (for a ghost: the parent, which has exited by the time spawn returns);
    - child_pid, child_start_time: ghost: the data-loader child that really holds the memory;
      zombie: the unreaped child (state Z); None for other roles;
    - workers: workers: [(pid, start_time)] of the forked children that hold the parent's context;
    - role, name (script name), argv (full command line), gpus (GPUs it has contexts on),
      memory (bytes per context), util (percent), uid, serial;
    - session: (pid, start time) of the sim's session: a process is signalled only below it.

    The PIDs are the job's own report (its own PID is checked: the report comes from it); what it says
    of its children is its word only, which `signal` never acts on outside the sim."""

    role: str
    name: str
    argv: List[str]
    gpus: List[int]
    memory: int
    util: int
    uid: Optional[int]
    serial: int
    log: str
    # Set once it is ready (the job's report), not by whoever makes it.
    pid: Optional[int] = field(default=None, init=False)
    start_time: Optional[int] = field(default=None, init=False)
    child_pid: Optional[int] = field(default=None, init=False)
    child_start_time: Optional[int] = field(default=None, init=False)
    workers: List[Tuple[int, Optional[int]]] = field(default_factory=list, init=False)
    session: Optional[Tuple[int, Optional[int]]] = field(default=None, init=False)

    def processes(self):
        # type: () -> List[Tuple[int, Optional[int]]]
        """(pid, start_time) of every process of this job."""
        found = []  # type: List[Tuple[int, Optional[int]]]
        if self.pid is not None:
            found.append((self.pid, self.start_time))
        if self.child_pid is not None:
            found.append((self.child_pid, self.child_start_time))
        return found + list(self.workers)

    def signal(self, sig, child=False):
        # type: (int, bool) -> bool
        """Signal the job (or its child) if it is still that process, below the sim's session."""
        if child:
            return self.child_pid is not None and signal_checked(
                self.child_pid, self.child_start_time, sig, self.session
            )
        return self.pid is not None and signal_checked(self.pid, self.start_time, sig, self.session)

    def __repr__(self):
        # type: () -> str
        fields = (self.role, self.name, self.pid, self.child_pid, self.gpus)
        return "SimJob(%s %s pid=%s child=%s gpus=%s)" % fields


# A spawn's arguments once checked, with the role's defaults filled in (checked_job).
CheckedJob = NamedTuple(
    "CheckedJob",
    [
        ("gpus", List[int]),  # the GPUs it makes a context on (or runs its children on)
        ("util", int),
        ("name", str),  # its script's name
        ("comm", Optional[str]),  # its process name, where not its script's
        ("child", Optional[Dict[str, Any]]),  # a launcher's or supervisor's children: {"name", "argv"}
        ("mig", Optional[Tuple[int, int]]),  # the MIG instance (gi, ci) its contexts run in
    ],
)


def _plain_name(name, what):
    # type: (str, str) -> str
    """`name` if it is a plain file name (the script goes to <base>/bin/); ValueError if not."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError("%s is a plain file name, not %r" % (what, name))
    return name


def checked_job(role, gpu, util, name, comm, child, lifetime, mig, sim_gpus, rng, mig_instances):
    # type: (str, Any, Optional[int], Optional[str], Optional[str], Optional[Dict[str, Any]], Optional[float], Optional[Tuple[int, int]], int, random.Random, Callable[[int], List[Tuple[int, Optional[int]]]]) -> CheckedJob
    """A spawn's arguments checked, with the role's defaults filled in (ValueError for a wrong one).
    `sim_gpus`: how many GPUs the sim has;
    `rng`: the sim's, for a busy job's utilization when not given; `mig_instances`: a GPU's MIG
    instances (gi, ci) now, where a job with `mig` must find its own on each of its GPUs."""
    if role not in ROLES:
        raise ValueError("unknown sim role %r (known: %s)" % (role, ", ".join(ROLES)))
    if lifetime is not None and (role not in LIFETIME_ROLES or not 0 < float(lifetime) < 1e9):
        raise ValueError("a lifetime is for a %s job, in seconds > 0" % " or ".join(LIFETIME_ROLES))
    gpus = [] if role not in GPU_ROLES else ([gpu] if isinstance(gpu, int) else list(gpu))
    if role in PARENT_ROLES and not gpus:
        raise ValueError("a %s runs its children on at least one GPU" % role)
    for index in gpus:
        if not 0 <= index < sim_gpus:
            raise ValueError("no GPU %r in this sim (%d GPUs)" % (index, sim_gpus))
    if util is None:
        util = rng.randint(85, 99) if role in ("busy", *PARENT_ROLES) else 0
    kid = dict(child or DEFAULT_CHILD.get(role) or {}) if role in PARENT_ROLES else None
    if kid is not None:
        kid_name = _plain_name(str(kid.get("name") or ""), "a child's name")
        restart = kid.get("restart_s")
        kid = {"name": kid_name, "argv": [str(a) for a in kid.get("argv") or []]}
        if restart is not None:  # a supervisor's wait before it starts a new worker
            if role != "supervisor" or not 0 < float(restart) < 1e6:
                raise ValueError("restart_s is a supervisor's child's, in seconds > 0")
            kid["restart_s"] = float(restart)
    util = max(0, min(100, int(util)))
    name = _plain_name(name or DEFAULT_NAMES[role], "a job name")
    if comm is None and role == "monitor":
        comm = MONITOR_COMM
    if comm is None and role in ("mps-control", "mps-server"):
        comm = MPS_COMM
    if comm is None and role == "launcher" and not name.endswith(".py"):
        comm = name  # a console script (torchrun, accelerate, deepspeed) shows its own name
    if mig is not None:
        mig = (int(mig[0]), int(mig[1]))
        for index in gpus:
            if mig not in mig_instances(index):
                raise ValueError("GPU %d has no MIG instance %d.%d" % (index, mig[0], mig[1]))
    return CheckedJob(gpus, util, name, comm, kid, mig)

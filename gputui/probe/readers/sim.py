"""Simulated GPUs whose memory is owned by real processes (the `sim` reader, for --demo and tests).

It behaves like docs/GPU_FACTS.md says the real driver does, using real processes and real files:

- The "driver" lives in a directory, `<base>/`: device files `<base>/dev/nvidia*` (regular files) and
  one file per CUDA context, `<base>/ctx/<uid>/<gpu>-<pid>-<serial>.ctx`, JSON {"gpu", "pid",
  "start", "bytes", "util"}, on which the process that made it holds flock(LOCK_SH). flock locks
  belong to the open file description, so a forked child that inherits the fd keeps the memory after
  its parent died (a ghost), and exit (any exit: SIGKILL, crash) releases it. A zombie has no fds: it
  holds nothing.
- The real driver cannot be lied to, so the sim's context files are trusted no more than they must
  be: nobody else writes in ctx/, and each user allocates in a ctx/<uid>/ that the reader made and
  only that user writes in (every user may read them all, as every user may ask NVML); a file is opened without following a link or blocking (O_NOFOLLOW, O_NONBLOCK) and
  believed only if it is a small regular file of that user, whose record names its file's GPU and
  PID and the start time (/proc/PID/stat field 22) of a process of that user living at that PID. A
  context whose process has exited stays listed (a ghost) only if it was seen alive, or the sim's own
  session reported that process; a new process that gets the PID is never it. What was not believed
  is in `SimReader.ignored`, with the reason.
- The reader watches every context from a thread blocked in flock(LOCK_EX); when that returns, every
  holder is gone, and the memory is released 0.10 to 0.18 s later (seeded), like NVML. Until then
  the context's owner PID stays listed, alive or not. Any process of the sim's user (or of a user
  it runs jobs as) may make contexts (`create_context`); any SimReader of that user on the
  directory (`attach=True`) sees the same state, a ghost whose parent it never saw alive included:
  the owner publishes in `<base>/owner.json` its session and the processes its session reported.
  An attached reader holds flock(LOCK_SH) on `<base>/sim.json` while open, so the owner can tell
  whether anyone watches (`watched`: the live demo's daemon, gputui/demod.py, ends without clients).
- Jobs are real `python3 -S <base>/bin/<name>.py ARGS` processes (source: simjob.py) started by a
  session process (a child subreaper that reaps them and their orphans). The reader holds the write
  end of a "lifeline" pipe every sim process watches: when the reader closes or its process dies,
  even by SIGKILL, every job exits (and the session removes the directory).
- The sim signals only processes of its own sim. Jobs report their PIDs on a status socket that every
  job inherits, even one run as another user, so a report is taken only from the process it is
  about (the kernel says who wrote it: SCM_CREDENTIALS), and a reported PID is signalled only through
  a pidfd, while it is below the session process (a subreaper: every job and every orphan of a job
  stays below it while alive) and has the reported start time.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import errno
import fcntl
import json
import os
import pwd
import random
import select
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple  # noqa: F401  (used in type comments)

from .base import Listed, Reader, ReaderError, Tags, instance_id  # noqa: F401
from .scenarios import SCENARIOS
from .simjob import WORKER_SOURCE

GiB = 1 << 30
MEMORY_TOTAL = 150754820096  # H200, GPU_FACTS "Memory figures"
MEMORY_RESERVED = 644874240  # 615 MiB, reported apart from `used` by memory info v2
POWER_LIMIT = 700.0
RELEASE_DELAY = (0.10, 0.18)  # GPU_FACTS: NVML stops listing and memory is back 0.10 to 0.18 s after exit
GPU_NAME = "NVIDIA H200 (sim)"
FACTS = {
    "driver_version": "580.159.04-sim",
    "nvml_version": "13.580.159.04-sim",
    "cuda_driver_version": 13000,
}

ROLES = (
    "busy", "idle", "ignore-term", "ghost", "hidden", "zombie", "monitor", "workers",
    "mps-control", "mps-server", "mps-client", "launcher", "supervisor", "neighbour",
)  # fmt: skip
CONTEXT_ROLES = ("busy", "idle", "ignore-term", "ghost", "zombie", "workers", "mps-server", "mps-client")
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
}
# GPUs of a sim whose scenario wants more than the default 4 (the seed's 8-GPU guest), when the
# caller does not say (a config has no sim_gpus).
DEFAULT_GPUS = 4
SCENARIO_GPUS = {"jobs": 8}
MONITOR_COMM = "nv-hostengine"
MPS_COMM = "nvidia-cuda-mps"  # both MPS daemons, cut at 15 characters like every comm
MIG_NAME = "NVIDIA H200 MIG %dg.%dgb (sim)"
SESSION_SCRIPT = "gputui_sim_session.py"
SPAWN_TIMEOUT = 20.0  # seconds for a job to start and settle (Python start-up on a loaded 2-core CI box)
CLOSE_TIMEOUT = 10.0
JITTER_LEN = 97  # utilization jitter repeats after this many reads
MAX_CONTEXT_BYTES = 4096  # a context's record is under 200 bytes: a bigger file is not one
MAX_META_BYTES = 65536  # sim.json, read when attaching
MAX_OWNER_BYTES = 1 << 20  # owner.json: what the owner vouches for (pruned to what is still there)
OWNER_FILE = "owner.json"
MAX_REPORT_BYTES = 65536  # one status report (a ready one with its workers is under 1 KiB)
MAX_REFUSED = 32  # refused status reports kept for people and tests to look at
# How far below its session a sim process may be signalled: a job, its child, an orphan of a job
# (the session adopts them) are one to three levels down.
MAX_DEPTH = 64
_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid
# No directory of the sim may be written by group or others: a context names a process that a plan
# for its GPU stops. Reading is fine: every user may ask NVML which processes use a GPU.
NO_WRITE = 0o022
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_OPEN_DIR = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


def _worker_functions():
    # type: () -> Dict[str, Any]
    """The worker's helpers (open_devices, create_context, start_time), run in this process."""
    namespace = {"__name__": "gputui_sim_worker"}  # type: Dict[str, Any]
    exec(compile(WORKER_SOURCE, "<gputui sim worker>", "exec"), namespace)
    return namespace


_WORKER = _worker_functions()


def create_context(directory, gpu, nbytes, util=0):
    # type: (str, int, int, int) -> int
    """Allocate `nbytes` on `gpu` of the sim at `directory` for the calling process.

    Returns the fd that holds the memory: it is released once this fd is closed in every process
    that has a copy (a forked child keeps it). The caller should also hold the device files
    (`open_devices`), as a CUDA process does."""
    return _WORKER["create_context"](directory, gpu, nbytes, util)


def open_devices(directory):
    # type: (str) -> List[int]
    """Open every device file of the sim at `directory`, as an NVML client does; return the fds
    (the caller closes them)."""
    return _WORKER["open_devices"](directory, False)


def start_time(pid):
    # type: (int) -> Optional[int]
    """Field 22 of /proc/PID/stat, or None when the process is gone."""
    return _WORKER["start_time"](pid)


def _pidfd_open(pid):
    # type: (int) -> Optional[int]
    """A pidfd for `pid`, or None where the kernel or Python (< 3.9) has none.

    Raises ProcessLookupError when the process does not exist."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return opener(pid)
    except ProcessLookupError:
        raise
    except OSError:
        return None


def _parent_and_start(pid):
    # type: (int) -> Optional[Tuple[int, int]]
    """Fields 4 (ppid) and 22 (start time) of /proc/PID/stat, or None when the process is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            raw = f.read()
        fields = raw[raw.rindex(b")") + 2 :].split()
        return int(fields[1]), int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def _lineage(pid, ancestor):
    # type: (int, int) -> Optional[List[Tuple[int, int, int]]]
    """(pid, start, ppid) from `pid` up to a child of `ancestor`; None if the chain does not reach it
    within MAX_DEPTH (or a process on it is gone)."""
    chain = []  # type: List[Tuple[int, int, int]]
    while len(chain) < MAX_DEPTH:
        found = _parent_and_start(pid)
        if found is None:
            return None
        ppid, started = found
        chain.append((pid, started, ppid))
        if ppid == ancestor:
            return chain
        if ppid <= 1:
            return None
        pid = ppid
    return None


def descends_from(pid, ancestor, ancestor_start):
    # type: (int, int, Optional[int]) -> bool
    """Whether process `pid` is below `ancestor`, the process that started at `ancestor_start`
    (walking the ppid chain in /proc, at most MAX_DEPTH levels).

    The chain must read the same twice in a row: a link read while a parent died and its PID went
    to another process would differ (its child's ppid changes when it is re-parented). A few tries,
    for a chain that changes as it is read (a ghost's parent exiting: its child goes to the session)."""
    if pid == ancestor or ancestor_start is None or start_time(ancestor) != ancestor_start:
        return False
    chain = _lineage(pid, ancestor)
    for _ in range(3):
        again = _lineage(pid, ancestor)
        if again == chain:
            return chain is not None and start_time(ancestor) == ancestor_start
        chain = again
    return False


def signal_checked(pid, expected_start, sig, session):
    # type: (int, Optional[int], int, Optional[Tuple[int, Optional[int]]]) -> bool
    """Send `sig` to `pid` only if it is a process of the sim whose session is `session` ((pid, start
    time)): below the session, and still the process that started at `expected_start`.

    The pidfd is opened before the checks, so the checks and the signal are about the same process
    (without pidfds, Python 3.8, the checks come just before kill). Returns whether it was sent."""
    if session is None or expected_start is None:
        return False
    try:
        fd = _pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        if start_time(pid) != expected_start or not descends_from(pid, session[0], session[1]):
            return False
        if start_time(pid) != expected_start:
            return False  # replaced during the walk (only possible without a pidfd)
        if fd is not None and hasattr(signal, "pidfd_send_signal"):
            signal.pidfd_send_signal(fd, sig)  # novermin (3.9+, guarded by hasattr)
        else:
            os.kill(pid, sig)
        return True
    except OSError:
        return False
    finally:
        if fd is not None:
            os.close(fd)


def wait_exit(pid, expected_start, timeout):
    # type: (int, Optional[int], float) -> bool
    """Wait until the process `pid` (started at `expected_start`) has exited and been reaped.

    Event-driven with a pidfd; the /proc check after it only covers the instant between exit and
    reaping. Without pidfds (Python 3.8, old kernels) it polls every 5 ms. Returns whether it is gone."""
    deadline = time.monotonic() + timeout
    try:
        fd = _pidfd_open(pid)
    except ProcessLookupError:
        return True
    if fd is not None:
        try:
            if start_time(pid) == expected_start:
                poller = select.poll()  # a pidfd is readable once the process has exited
                poller.register(fd, select.POLLIN)
                poller.poll(max(0, int((deadline - time.monotonic()) * 1000)))
        finally:
            os.close(fd)
    while start_time(pid) == expected_start:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.002 if fd is not None else 0.005)
    return True


def pid_namespace():
    # type: () -> Optional[str]
    """This process's PID namespace ("pid:[4026531836]"), None where /proc does not say."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def directory_problem(path, what, owners):
    # type: (str, str, Tuple[int, ...]) -> Optional[str]
    """Why `path` is not a real directory of one of `owners` that only its owner can write; None
    when it is. lstat: a symbolic link is refused, not followed."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        return "%s: %s" % (what, exc.strerror)
    if stat.S_ISLNK(info.st_mode):
        return "%s is a symbolic link" % what
    if not stat.S_ISDIR(info.st_mode):
        return "%s is not a directory" % what
    if info.st_uid not in owners:
        names = " or ".join("uid %d" % uid for uid in owners)
        return "%s is owned by uid %d, not by %s" % (what, info.st_uid, names)
    if info.st_mode & NO_WRITE:
        return "%s can be written by others (mode %o)" % (what, info.st_mode & 0o7777)
    return None


def watched(directory):
    # type: (str) -> bool
    """Whether a reader is attached to the sim at `directory` (each holds flock(LOCK_SH) on its
    sim.json while open): how the process that runs a sim for others (the demo daemon) knows it
    still has clients. Takes LOCK_EX for an instant when nobody holds it; a sim that is gone is
    watched by nobody."""
    try:
        fd = os.open(os.path.join(directory, "sim.json"), _OPEN_FILE)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # releases the lock, if it was taken
    return False


def read_bounded(fd, limit):
    # type: (int, int) -> Optional[bytes]
    """At most `limit` bytes from `fd` to its end; None if there are more."""
    chunks = []  # type: List[bytes]
    size = 0
    while size <= limit:
        chunk = os.read(fd, limit + 1 - size)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    return None


def _number(record, key, low, high):
    # type: (Dict[str, Any], str, int, int) -> Optional[int]
    """record[key] if it is an integer (not a bool) from low to high, else None."""
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


def _is_process(value):
    # type: (Any) -> bool
    """Whether `value` is [pid, start time], as a status report names a process."""
    if not isinstance(value, list) or len(value) != 2:
        return False
    record = {"pid": value[0], "start": value[1]}
    return _number(record, "pid", 1, 1 << 22) is not None and _number(record, "start", 0, 1 << 62) is not None


class SimError(RuntimeError):
    """A sim job could not be started or did not settle."""


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

    def __init__(self, role, name, argv, gpus, memory, util, uid, serial, log):
        # type: (str, str, List[str], List[int], int, int, Optional[int], int, str) -> None
        self.role = role
        self.name = name
        self.argv = argv
        self.gpus = gpus
        self.memory = memory
        self.util = util
        self.uid = uid
        self.serial = serial
        self.log = log
        self.pid = None  # type: Optional[int]
        self.start_time = None  # type: Optional[int]
        self.child_pid = None  # type: Optional[int]
        self.child_start_time = None  # type: Optional[int]
        self.workers = []  # type: List[Tuple[int, Optional[int]]]
        self.session = None  # type: Optional[Tuple[int, Optional[int]]]

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


class _Context(object):
    """One context as the reader sees it; `release_at` (monotonic) is set once every holder is gone.
    `name`: "<uid>/<file name>" under ctx/; `start`: its process's start time; `gi`, `ci`: the MIG
    instance it runs in (None outside MIG); `mps`: an MPS client's; `outside`: another guest's, as a
    reader playing a container's probe sees it (its memory counts, no process is listed); `listed`: whether the latest
    read found its PID still its process (alive, or gone: a ghost), not another one."""

    __slots__ = (
        "ci", "gi", "gpu", "listed", "mps", "name", "nbytes", "outside", "pid", "release_at", "start", "util",
    )  # fmt: skip

    def __init__(self, name, gpu, pid, start, nbytes, util, gi=None, ci=None, mps=False, outside=False):
        # type: (str, int, int, int, int, int, Optional[int], Optional[int], bool, bool) -> None
        self.name = name
        self.gpu = gpu
        self.pid = pid
        self.start = start
        self.nbytes = nbytes
        self.util = util
        self.gi = gi
        self.ci = ci
        self.mps = mps
        self.outside = outside  # another PID namespace's (the "neighbour" scenario): never listed
        self.listed = True
        self.release_at = None  # type: Optional[float]


class SimReader(Reader):
    """Simulated H200s. `open()` builds the sim directory and runs the scenario ("demo", "empty");
    `attach=True` reads the existing sim directory `base_dir` instead (no jobs of its own)."""

    name = "sim"

    def __init__(
        self,
        gpus=None,
        scenario="demo",
        variant=0,
        seed=0,
        base_dir=None,
        attach=False,
        hostname=None,
        hold_devices=True,
    ):
        # type: (Optional[int], Optional[str], Optional[int], Optional[int], Optional[str], bool, Optional[str], bool) -> None
        scenario = scenario or "demo"
        if scenario not in SCENARIOS:
            raise ValueError("unknown sim scenario %r (known: %s)" % (scenario, ", ".join(SCENARIOS)))
        if gpus is None:
            gpus = SCENARIO_GPUS.get(scenario, DEFAULT_GPUS)
        if not 1 <= int(gpus) <= 64:
            raise ValueError("sim gpus must be 1 to 64, not %r" % (gpus,))
        if attach and not base_dir:
            raise ValueError("attach=True needs base_dir, the sim directory to read")
        self.gpus = int(gpus)
        self.scenario = scenario
        self.variant = int(variant or 0)
        self.seed = int(seed or 0)
        self.base_dir = base_dir
        self.attach = attach
        self.hostname = hostname
        # Whether the reader holds every device file while open, as an NVML client does. A process
        # that only runs the sim for others (the demo daemon) holds none: it is no GPU client, and
        # a plan must never see it as a holder.
        self.hold_devices = hold_devices
        self.directory = None  # type: Optional[str]
        self.device_paths = []  # type: List[str]
        self.jobs = []  # type: List[SimJob]
        self._cond = threading.Condition()  # guards everything below that threads share
        self._contexts = {}  # type: Dict[str, _Context]
        self._retired = set()  # type: set  # released or refused names whose file may still be listed
        # Files under ctx/ that are not believed, and why (only those still there): tests and people look.
        self.ignored = {}  # type: Dict[str, str]
        # (pid, start time, uid) of every process the session reported (its own jobs): a context of
        # one of them is believed after its process exited even if no read saw it alive (a ghost).
        self._vouched = set()  # type: set
        self._spawn_uids = {}  # type: Dict[int, int]  # serial -> the job's uid
        self._foreign_pids = False  # attached from another PID namespace than the sim's
        self._state_stamp = None  # type: Optional[int]
        self._state_cache = {}  # type: Dict[str, Any]
        self.resets = []  # type: List[int]  # GPUs this reader reset (tests look)
        self._tags = {}  # type: Tags
        self._reads = 0
        self._serial = 0
        self._spawns = {}  # type: Dict[int, Dict[str, Dict[str, Any]]]  # serial -> event -> message
        self._spawned = []  # type: List[Tuple[int, Optional[int]]]  # every pid the session started
        # Status reports not taken (not from the process they are about, malformed), with the reason.
        self.refused_reports = []  # type: List[str]
        self._all_gone = False  # EOF on the status socket: the session and every job have exited
        self._stop = threading.Event()
        self._send_lock = threading.Lock()
        self._device_fds = []  # type: List[int]
        self._session = None  # type: Optional[subprocess.Popen]
        self._session_id = None  # type: Optional[Tuple[int, Optional[int]]]  # its pid, start time
        self._lifeline_w = None  # type: Optional[int]
        self._commands_w = None  # type: Optional[int]
        self._status = None  # type: Optional[socket.socket]
        self._status_thread = None  # type: Optional[threading.Thread]
        self._opened = False
        self._closed = False
        # Attach mode: sim.json, held with flock(LOCK_SH) while open (`watched`); the owner's uid;
        # owner.json's stamp (what the owner publishes: its session, the processes it vouches for).
        self._meta_fd = None  # type: Optional[int]
        self._owner_uid = None  # type: Optional[int]
        self._owner_stamp = None  # type: Optional[Tuple[int, int]]
        self._owner_session = None  # type: Optional[Tuple[int, int]]
        self._rng = random.Random("gputui-sim:%d:%d" % (self.seed, self.variant))
        self._play_container()

    def _play_container(self):
        # type: () -> None
        """The "neighbour" scenario plays a probe inside an LXC guest (docs/PROTOCOL.md hello
        `host_pid_namespace`): the probe is told it is not in the host's PID namespace, and the
        contexts of other guests' jobs (role "neighbour") count in their GPU's memory with no
        process listed, as NVML inside a container lists none of another namespace's processes.
        Elsewhere such a context is listed like any other (its process is visible here)."""
        if self.scenario == "neighbour":
            self.host_pid_namespace = False
            self.in_container = True

    def init_pids(self):
        # type: () -> List[int]
        """The session process adopts and reaps every job and orphan of the sim (a subreaper): each
        job is its own, not the session's (jobs.py). Attached, the owner's session (owner.json), while
        it is that process."""
        if self._session is not None:
            return [self._session.pid]
        session = self._owner_session
        if session is not None and start_time(session[0]) == session[1]:
            return [session[0]]
        return []

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self):
        # type: () -> Dict[str, object]
        if self._opened:
            raise ReaderError("no-driver", "the sim reader is already open")
        self._opened = True
        try:
            if self.attach:
                self._attach_directory()
            else:
                self._make_directory()
            self._setup_gpus()
            # Like every NVML client, the reader holds every device file while it is open.
            if self.hold_devices:
                self._device_fds = [os.open(path, os.O_RDONLY) for path in self.device_paths]
            if not self.attach:
                self._start_session()
                self._run_scenario()
            self.read()
        except ReaderError:
            self.close()
            raise
        except (OSError, SimError) as exc:
            self.close()
            raise ReaderError("no-driver", "sim: %s" % exc) from exc
        facts = dict(FACTS)  # type: Dict[str, object]
        if self.hostname:
            facts["hostname"] = self.hostname
        return facts

    def close(self):
        # type: () -> None
        """Stop every process of the sim and remove its directory (the attach mode only lets go)."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._session is not None:
            self._stop_session()
        for fd in self._device_fds:
            os.close(fd)
        self._device_fds = []
        if self._meta_fd is not None:
            os.close(self._meta_fd)  # no longer watching: the flock goes with it
            self._meta_fd = None
        if not self.attach and self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self):
        # type: () -> SimReader
        self.open()
        return self

    def __exit__(self, *exc_info):
        # type: (*Any) -> None
        self.close()

    @property
    def session_pid(self):
        # type: () -> Optional[int]
        """PID of the session process that starts and reaps the jobs (None in attach mode)."""
        return self._session.pid if self._session is not None else None

    def jobs_with_role(self, role):
        # type: (str) -> List[SimJob]
        return [job for job in self.jobs if job.role == role]

    def forget_gone(self):
        # type: () -> None
        """Forget the jobs every process of which has exited, and what the session said of them: a
        sim that starts jobs on a schedule for days (the demo daemon) keeps only what lives. Call it
        from the thread that spawns (a job being started has no PID yet and is kept)."""
        with self._cond:
            keep = []  # type: List[SimJob]
            for job in self.jobs:
                processes = job.processes()
                if not processes or any(start_time(pid) == started for pid, started in processes):
                    keep.append(job)
                else:
                    self._spawns.pop(job.serial, None)
                    self._spawn_uids.pop(job.serial, None)
            self.jobs = keep
            self._spawned = [(pid, started) for pid, started in self._spawned if start_time(pid) == started]

    # -- the sim directory -------------------------------------------------------------------

    def _make_directory(self):
        # type: () -> None
        # realpath: /proc/PID/fd links name the real path, and the holder scan matches on the prefix.
        base = os.path.realpath(tempfile.mkdtemp(prefix="gputui-sim-", dir=self.base_dir))
        self.directory = base
        os.chmod(base, 0o755)  # mkdtemp makes it 0700; jobs may run as another user
        for sub, mode in (("dev", 0o755), ("dev/nvidia-caps", 0o755), ("bin", 0o755), ("log", 0o755)):
            os.mkdir(os.path.join(base, sub))
            os.chmod(os.path.join(base, sub), mode)
        # Nobody else writes here: contexts are what makes a process a GPU user that a plan stops.
        # Each user that allocates gets a directory of its own in it (`_user_dir`), this user's first.
        os.mkdir(os.path.join(base, "ctx"), 0o755)
        os.chmod(os.path.join(base, "ctx"), 0o755)
        self._ctx_dir = os.path.join(base, "ctx")
        self._user_dir(os.geteuid())
        for path in self._device_path_list(base):
            # 4 KiB, so CUDA-like jobs can mmap them (a CUDA process maps nvidiaN, nvidiactl, nvidia-uvm).
            with open(path, "wb") as f:
                f.truncate(4096)
            os.chmod(path, 0o666)
        meta = {
            "version": 1,
            "gpus": self.gpus,
            "seed": self.seed,
            "variant": self.variant,
            "scenario": self.scenario,
            "hostname": self.hostname,
            "pid_ns": pid_namespace(),  # where the PIDs of its contexts live
        }
        self._write_file(os.path.join(base, "sim.json"), json.dumps(meta, indent=1) + "\n", 0o644)

    def _user_dir(self, uid):
        # type: (int) -> str
        """ctx/<uid>/, where that user's processes make their contexts: made 0755 and given to the
        user (only root runs jobs as another user); one that is there already must be as private."""
        path = os.path.join(self._ctx_dir, str(uid))
        try:
            os.mkdir(path, 0o755)
        except FileExistsError:
            pass
        else:
            # Nobody else can have replaced it since: ctx/ is this user's, and no one else writes there.
            os.chmod(path, 0o755)
            if uid != os.geteuid():
                os.chown(path, uid, -1)
        problem = directory_problem(path, "context directory %s" % path, (uid,))
        if problem:
            raise SimError(problem)
        return path

    def _attach_directory(self):
        # type: () -> None
        """Read an existing sim: only one that nobody else could have made or changed: a real directory
        of this user or of root (every user may read root's sim, as every user may read NVML) that
        no one else can write, its ctx/ too; else one clear ReaderError."""
        base = os.path.realpath(str(self.base_dir))
        owners = tuple(sorted({os.geteuid(), 0}))
        problem = directory_problem(base, "the sim directory %s" % base, owners)
        if problem:
            raise ReaderError("no-driver", "sim: refusing to use it: %s" % problem)
        owner = os.stat(base).st_uid
        meta = self._read_meta(os.path.join(base, "sim.json"), owner)
        ctx = os.path.join(base, "ctx")
        problem = directory_problem(ctx, "its context directory %s" % ctx, (owner,))
        if problem:
            raise ReaderError("no-driver", "sim: refusing to use it: %s" % problem)
        try:
            gpus = int(meta["gpus"])
            seed = int(meta["seed"])
            variant = int(meta.get("variant", 0))
        except (KeyError, TypeError, ValueError) as exc:
            raise ReaderError("no-gpu", "no sim at %s: sim.json: bad %s" % (base, exc)) from None
        if not 1 <= gpus <= 64:
            raise ReaderError("no-gpu", "no sim at %s: sim.json: %r GPUs" % (base, gpus))
        self.directory = base
        self.gpus, self.seed, self.variant = gpus, seed, variant
        scenario = meta.get("scenario")
        self.scenario = scenario if scenario in SCENARIOS else self.scenario
        self._play_container()
        hostname = meta.get("hostname")
        self.hostname = self.hostname or (hostname if isinstance(hostname, str) else None)
        # A reader in another PID namespace (a container's probe) cannot see the processes contexts
        # name, as a probe beside the real driver cannot: it lists their PIDs as NVML does.
        theirs, ours = meta.get("pid_ns"), pid_namespace()
        self._foreign_pids = isinstance(theirs, str) and ours is not None and theirs != ours
        self._owner_uid = owner
        self._watch_sim(os.path.join(base, "sim.json"))
        self._load_owner()

    def _watch_sim(self, path):
        # type: (str) -> None
        """Hold flock(LOCK_SH) on sim.json while attached: whoever runs the sim can tell that someone
        watches it (`watched`: the demo daemon lives while it has clients). Its own test takes
        LOCK_EX for an instant; a few tries get past it. Best effort: a reader that cannot say it
        watches still reads."""
        try:
            fd = os.open(path, _OPEN_FILE)
        except OSError:
            return
        for _ in range(50):
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(0.01)
            except OSError:
                break
        self._meta_fd = fd

    def _load_owner(self):
        # type: () -> None
        """Attached: what the sim's owner publishes in owner.json (`_publish_owner`): its session, and
        the processes its session reported, whose contexts are believed after they exited (a ghost
        whose parent exited before this reader looked). Read again when it changes; only a small
        regular file of the sim's owner is read (called with self._cond held, or before any thread)."""
        if self._owner_uid is None:
            return
        path = os.path.join(str(self.directory), OWNER_FILE)
        try:
            fd = os.open(path, _OPEN_FILE)
        except OSError:
            return
        try:
            info = os.fstat(fd)
            stamp = (info.st_ino, info.st_mtime_ns)
            if stamp == self._owner_stamp:
                return
            if not stat.S_ISREG(info.st_mode) or info.st_uid != self._owner_uid:
                return
            raw = read_bounded(fd, MAX_OWNER_BYTES)
        except OSError:
            return
        finally:
            os.close(fd)
        try:
            record = json.loads(raw.decode("utf-8")) if raw is not None else None
        except ValueError:
            record = None
        if not isinstance(record, dict):
            return
        self._owner_stamp = stamp
        session = record.get("session") or []  # type: List[Any]
        self._owner_session = (session[0], session[1]) if _is_process(session) else None
        vouched = set()
        for entry in record.get("vouched") or []:
            if isinstance(entry, list) and len(entry) == 3 and _is_process(entry[:2]):
                uid = _number({"uid": entry[2]}, "uid", 0, (1 << 32) - 1)
                if uid is not None:
                    vouched.add((entry[0], entry[1], uid))
        self._vouched = vouched

    def _publish_owner(self):
        # type: () -> None
        """The owner's word for readers that attach (`_load_owner`): its session and the processes it
        vouches for, those still alive or named by a context file still there (called with
        self._cond held). Pruned here, so a sim that runs jobs for days keeps it small."""
        named = set()  # type: set
        try:
            for user in os.listdir(self._ctx_dir):
                for name in os.listdir(os.path.join(self._ctx_dir, user)):
                    if name.endswith(".ctx") and name.count("-") >= 2:
                        named.add(name.split("-")[1])
        except OSError:
            pass
        self._vouched = {
            (pid, started, uid)
            for pid, started, uid in self._vouched
            if str(pid) in named or start_time(pid) == started
        }
        record = {
            "version": 1,
            "session": list(self._session_id) if self._session_id else None,
            "vouched": sorted(list(v) for v in self._vouched),
        }
        try:
            self._write_file(os.path.join(str(self.directory), OWNER_FILE), json.dumps(record), 0o644)
        except OSError:
            pass  # the sim is being removed

    @staticmethod
    def _read_meta(path, uid):
        # type: (str, int) -> Dict[str, Any]
        """sim.json: a small regular file of the sim's user (not a link, not a FIFO), a JSON object."""
        try:
            fd = os.open(path, _OPEN_FILE)
        except OSError as exc:
            raise ReaderError("no-gpu", "no sim at %s: %s" % (os.path.dirname(path), exc.strerror)) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != uid:
                raise ReaderError("no-driver", "sim: refusing %s: not a regular file of uid %d" % (path, uid))
            raw = read_bounded(fd, MAX_META_BYTES)
        except OSError as exc:
            raise ReaderError("no-gpu", "no sim at %s: %s" % (os.path.dirname(path), exc.strerror)) from None
        finally:
            os.close(fd)
        try:
            meta = json.loads((raw or b"").decode("utf-8")) if raw is not None else None
        except ValueError:
            meta = None
        if not isinstance(meta, dict):
            raise ReaderError("no-gpu", "no sim at %s: sim.json is not a sim's" % os.path.dirname(path))
        return meta

    def _device_path_list(self, base):
        # type: (str) -> List[str]
        dev = os.path.join(base, "dev")
        paths = [os.path.join(dev, "nvidia%d" % i) for i in range(self.gpus)]
        paths += [os.path.join(dev, name) for name in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")]
        paths += [os.path.join(dev, "nvidia-caps", "nvidia-cap%d" % i) for i in (1, 2)]
        return paths

    def _setup_gpus(self):
        # type: () -> None
        """Fixed per-GPU looks (UUIDs, temperature offsets, jitter), all from the seed and variant."""
        base = str(self.directory)
        self.device_paths = self._device_path_list(base)
        self.device_prefix = os.path.join(base, "dev", "nvidia")
        self._ctx_dir = os.path.join(base, "ctx")
        rng = random.Random("gputui-sim-gpus:%d:%d" % (self.seed, self.variant))
        self._uuids = []  # type: List[str]
        self._offsets = []  # type: List[int]
        self._jitter = []  # type: List[List[int]]
        for _ in range(self.gpus):
            h = "%032x" % rng.getrandbits(128)
            self._uuids.append("GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:]))
            self._offsets.append(rng.randint(0, 3))
            self._jitter.append([rng.randint(-3, 3) for _ in range(JITTER_LEN)])

    def _write_file(self, path, text, mode):
        # type: (str, str, int) -> None
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.rename(tmp, path)

    def _script(self, name):
        # type: (str) -> str
        """`<base>/bin/<name>`, holding the worker program, so `ps` shows a realistic command."""
        path = os.path.join(str(self.directory), "bin", name)
        if not os.path.exists(path):
            self._write_file(path, WORKER_SOURCE, 0o644)
        return path

    # -- reading -----------------------------------------------------------------------------

    def read(self):
        # type: () -> Tuple[List[Dict[str, Any]], Listed]
        """GPU records and NVML's listing: a listdir of ctx/ plus dict work (polled every 20 ms)."""
        if self._closed or self.directory is None:
            raise ReaderError("no-driver", "the sim reader is closed")
        now = time.monotonic()
        used = [0] * self.gpus
        util = [0] * self.gpus
        listed = {}  # type: Listed
        tags = {}  # type: Tags
        by_instance = {}  # type: Dict[Tuple[int, int], int]  # (gpu, gi) -> bytes
        with self._cond:
            self._reads += 1
            reads = self._reads
            self._track_new()
            for name, ctx in list(self._contexts.items()):
                if ctx.release_at is not None and now >= ctx.release_at:
                    self._retire(name)
                    continue
                used[ctx.gpu] += ctx.nbytes
                if ctx.outside and self.host_pid_namespace is False:
                    util[ctx.gpu] += ctx.util  # the GPU is busy with it; nobody here is listed
                    continue
                # Its PID is its process, or no process (a ghost); a new process there is not it: the
                # memory is still held (by the ghost's heirs), by no process NVML could name.
                ctx.listed = start_time(ctx.pid) in (ctx.start, None)
                if not ctx.listed:
                    continue
                util[ctx.gpu] += ctx.util
                on_gpu = listed.setdefault(ctx.pid, {})
                on_gpu[ctx.gpu] = (on_gpu.get(ctx.gpu) or 0) + ctx.nbytes
                if ctx.mps:
                    tags.setdefault(ctx.pid, {})["mps"] = True
                if ctx.gi is not None:
                    # Compute instances of one GPU instance share its memory (as on a real GPU).
                    key = (ctx.gpu, ctx.gi)
                    by_instance[key] = by_instance.get(key, 0) + ctx.nbytes
                    places = tags.setdefault(ctx.pid, {}).setdefault("mig", [])
                    if (ctx.gpu, ctx.gi, ctx.ci) not in places:
                        places.append((ctx.gpu, ctx.gi, ctx.ci))
        state = self._state()
        for i in range(self.gpus):
            used[i] += int(state.get(str(i), {}).get("orphaned") or 0)  # memory no process holds
        gpus = [self._gpu_record(i, used[i], min(100, util[i]), reads, state) for i in range(self.gpus)]
        for gpu in gpus:
            layout = self._mig_layout(state, int(gpu["index"]))  # type: ignore[call-overload]
            if layout is None:
                gpu["mig_instances"] = None
                for pid in listed:  # outside MIG mode the driver gives no instance ids
                    places = tags.get(pid, {}).get("mig")
                    if places:
                        places[:] = [p for p in places if p[0] != gpu["index"]]
                continue
            # A GPU in MIG mode reports no utilization of its own (NVML: not supported).
            gpu.update(util_gpu=None, util_mem=None)
            gpu["mig_instances"] = [
                dict(inst, memory_used=by_instance.get((gpu["index"], inst["gi"]), 0))  # type: ignore[arg-type]
                for inst in layout
            ]
        with self._cond:
            self._tags = tags
        return gpus, listed

    def process_tags(self):
        # type: () -> Tags
        with self._cond:
            return self._tags

    def _mig_layout(self, state, index):
        # type: (Dict[str, Any], int) -> Optional[List[Dict[str, Any]]]
        """GPU `index`'s MIG instances as the sim's state sets them (knob `mig_instances`: a list of
        {gi, ci, memory_total, name}), with UUIDs; None where MIG is off."""
        raw = state.get(str(index), {}).get("mig_instances")
        if not isinstance(raw, list):
            return None
        out = []  # type: List[Dict[str, Any]]
        for inst in raw:
            if not isinstance(inst, dict) or instance_id(inst.get("gi")) is None:
                continue
            gi, ci = int(inst["gi"]), instance_id(inst.get("ci"))
            h = random.Random("gputui-sim-mig:%d:%d:%d:%s" % (self.seed, index, gi, ci)).getrandbits(128)
            h_text = "%032x" % h
            out.append(
                {
                    "gi": gi,
                    "ci": ci,
                    "uuid": "MIG-%s-%s-%s-%s-%s"
                    % (h_text[:8], h_text[8:12], h_text[12:16], h_text[16:20], h_text[20:]),
                    "name": inst.get("name"),
                    "memory_total": inst.get("memory_total"),
                }
            )
        return out

    def process_utilization(self):
        # type: () -> Optional[Dict[int, Dict[int, Dict[str, Optional[int]]]]]
        """Each live context's utilization on its GPU (its `util`; memory utilization 3/5 of it, as
        for the whole GPU; no encoder or decoder work in the sim)."""
        out = {}  # type: Dict[int, Dict[int, Dict[str, Optional[int]]]]
        with self._cond:
            for ctx in self._contexts.values():
                if ctx.release_at is not None or not ctx.listed:
                    continue
                if ctx.outside and self.host_pid_namespace is False:
                    continue
                share = out.setdefault(ctx.pid, {}).setdefault(
                    ctx.gpu, {"sm": 0, "mem": 0, "enc": 0, "dec": 0}
                )
                sm = min(100, (share["sm"] or 0) + ctx.util)
                share["sm"], share["mem"] = sm, (sm * 3) // 5
        return out

    def _gpu_record(self, index, used, util, reads, state=None):
        # type: (int, int, int, int, Optional[Dict[str, Any]]) -> Dict[str, object]
        if util > 0:
            # Jitter by read count, not wall time, so screenshots are reproducible.
            util = max(1, min(100, util + self._jitter[index][reads % JITTER_LEN]))
        offset = self._offsets[index]
        knobs = (state or {}).get(str(index), {})
        temperature = 30 + offset + util // 3
        cooling = knobs.get("cooling")
        if cooling:
            # A GPU that ran hot and cools slowly: from `from` degrees at `rate` per second.
            since = max(0.0, time.time() - float(cooling["since"]))
            temperature = max(temperature, round(float(cooling["from"]) - float(cooling["rate"]) * since))
        return {
            "index": index,
            "minor": index,
            "uuid": self._uuids[index],
            "pci_bus_id": "00000000:%02X:00.0" % (0x18 + 0x10 * index),
            "name": GPU_NAME,
            "memory_total": MEMORY_TOTAL,
            "memory_used": used,
            "memory_reserved": MEMORY_RESERVED,
            "memory_version": 2,
            "util_gpu": util,
            "util_mem": (util * 3) // 5,
            "temperature": temperature,
            "power_draw": round(min(POWER_LIMIT, 75.0 + 0.7 * offset + 6.0 * util), 1),
            "power_limit": POWER_LIMIT,
            "persistence": knobs.get("persistence", True),
            "error": None,
        }

    # -- the driver's state beyond memory: preflight, persistence, reset --------------------------

    def _state_path(self):
        # type: () -> str
        return os.path.join(str(self.directory), "state.json")

    def _state(self):
        # type: () -> Dict[str, Any]
        """The sim's driver state by GPU ("0": {...}), shared by every reader of the sim through
        <base>/state.json (read again only when it changed): orphaned memory, persistence mode,
        clock-event reasons, ECC counts, a cooling curve, locked clocks, MIG, display, NVLink."""
        try:
            stamp = os.stat(self._state_path()).st_mtime_ns
        except OSError:
            return {}
        if stamp != self._state_stamp:
            try:
                with open(self._state_path()) as f:
                    loaded = json.load(f)
            except (OSError, ValueError):
                return self._state_cache
            self._state_cache = loaded.get("gpus", {}) if isinstance(loaded, dict) else {}
            self._state_stamp = stamp
        return self._state_cache

    def set_state(self, index, **knobs):
        # type: (int, Any) -> None
        """Change GPU `index`'s driver state (tests and scenarios; the reset and persistence calls)."""
        with self._cond:
            state = json.loads(json.dumps(self._state()))
            gpu = state.setdefault(str(index), {})
            for key, value in knobs.items():
                if value is None:
                    gpu.pop(key, None)
                else:
                    gpu[key] = value
            tmp = self._state_path() + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"version": 1, "gpus": state}, f)
            os.chmod(tmp, 0o644)
            os.rename(tmp, self._state_path())
            self._state_stamp = None  # read it again, whatever the clock's resolution

    def preflight(self):
        # type: () -> Dict[int, Dict[str, Any]]
        state = self._state()
        out = {}  # type: Dict[int, Dict[str, Any]]
        for index in range(self.gpus):
            knobs = state.get(str(index), {})
            locked = knobs.get("sm_clock_locked")
            out[index] = {
                "persistence": knobs.get("persistence", True),
                "compute_mode": knobs.get("compute_mode", "default"),
                "mig": bool(knobs.get("mig", False) or knobs.get("mig_instances")),
                "mig_pending": bool(knobs.get("mig", False) or knobs.get("mig_instances")),
                "sm_clock": locked or 1980,
                "sm_clock_max": 1980,
                "mem_clock": 3201,
                "mem_clock_max": 3201,
                "sm_app_clock": locked or 1980,
                "sm_app_clock_default": 1980,
                "mem_app_clock": 3201,
                "mem_app_clock_default": 3201,
                "power_limit": knobs.get("power_limit", POWER_LIMIT),
                "power_default": POWER_LIMIT,
                "throttle": list(knobs.get("throttle", [])),
                "fan": None,  # H200: no fan of its own (NVML: not supported)
                "ecc_corrected": knobs.get("ecc_corrected", 0),
                "ecc_uncorrected": knobs.get("ecc_uncorrected", 0),
                "retired_pending": False,
                "remap_pending": knobs.get("remap_pending", False),
                "remap_failed": False,
                "pcie_gen": 5,
                "pcie_gen_max": 5,
                "pcie_width": 16,
                "pcie_width_max": 16,
                "display_active": knobs.get("display", False),
                "nvlink_peers": list(knobs.get("nvlink_peers", [])),
            }
        return out

    def set_persistence(self, index, on):
        # type: (int, bool) -> Tuple[bool, str]
        if not 0 <= index < self.gpus:
            return False, "no GPU %d" % index
        self.set_state(index, persistence=bool(on))
        return True, "persistence mode %s for GPU %d" % ("on" if on else "off", index)

    def reset(self, index):
        # type: (int) -> Tuple[bool, str]
        """Like `nvidia-smi --gpu-reset`: refused while persistence mode is on or a context is alive
        on the GPU; else every byte of its memory comes back, orphaned included."""
        if not 0 <= index < self.gpus:
            return False, "no GPU %d" % index
        knobs = self._state().get(str(index), {})
        if knobs.get("persistence", True):
            return False, "GPU %d: persistence mode is on: turn it off before a reset" % index
        with self._cond:
            alive = [c for c in self._contexts.values() if c.gpu == index and c.release_at is None]
        if alive:
            return False, "GPU %d is in use by %s" % (index, ", ".join(str(c.pid) for c in alive))
        self.set_state(index, orphaned=None, ecc_corrected=None, ecc_uncorrected=None, remap_pending=None)
        self.resets.append(index)
        return True, "GPU %d reset (sim)" % index

    def _track_new(self):
        # type: () -> None
        """Start watching contexts not seen before (called with self._cond held): every private
        ctx/<uid>/ and, in it, every file named like a context that is not known yet."""
        if self.attach:
            self._load_owner()  # the owner may vouch for a ghost that exited before we looked
        present = set()
        try:
            users = os.listdir(self._ctx_dir)
        except OSError:
            users = []
        for user in users:
            present.add(user)
            if not (user.isascii() and user.isdigit()):
                self.ignored[user] = "not a user's context directory"
                continue
            uid = int(user)
            path = os.path.join(self._ctx_dir, user)
            try:
                dir_fd = os.open(path, _OPEN_DIR)
            except OSError as exc:
                self.ignored[user] = "not a directory (%s)" % exc.strerror
                continue
            try:
                info = os.fstat(dir_fd)
                if info.st_uid != uid or info.st_mode & NO_WRITE:
                    self.ignored[user] = "not private to uid %d (owner %d, mode %o)" % (
                        uid,
                        info.st_uid,
                        info.st_mode & 0o7777,
                    )
                    continue
                self.ignored.pop(user, None)
                for name in os.listdir(dir_fd):
                    if not name.endswith(".ctx"):
                        continue  # ".<name>.tmp": a context being made, not visible yet
                    key = user + "/" + name
                    present.add(key)
                    if key not in self._contexts and key not in self._retired:
                        self._load(dir_fd, uid, key, name)
            except OSError:
                continue
            finally:
                os.close(dir_fd)
        # A name never comes back (names carry a random part): forget those that are gone.
        self._retired &= present
        for key in [k for k in self.ignored if k not in present]:
            del self.ignored[key]

    def _refuse(self, key, reason):
        # type: (str, str) -> None
        """A file that is not a context, for good: never read again while it is there."""
        self.ignored[key] = reason
        self._retired.add(key)

    def _load(self, dir_fd, uid, key, name):
        # type: (int, int, str, str) -> None
        """Watch the context `name` in ctx/<uid>/ if it is one that its process made.

        Opened without following a link or waiting for a writer, then checked on the open file: a
        regular file of the directory's user, small, whose record names the file's GPU and PID and
        the start time of a process of that user living at that PID. A process that is gone is
        believed only if the sim's own session reported it (a ghost whose parent exited before any
        read); else the file is looked at again next time."""
        try:
            gpu_text, pid_text, _ = name.split("-", 2)
            gpu, pid = int(gpu_text), int(pid_text)
        except ValueError:
            return self._refuse(key, "not a context's name")
        try:
            fd = os.open(name, _OPEN_FILE, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return self._refuse(key, "a symbolic link, not a context")
            return None  # gone already
        watched = False
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return self._refuse(key, "not a regular file")
            if info.st_uid != uid:
                return self._refuse(
                    key, "owned by uid %d, not by uid %d whose directory it is in" % (info.st_uid, uid)
                )
            if info.st_nlink != 1:
                return self._refuse(key, "a file with %d names (hard links)" % info.st_nlink)
            raw = read_bounded(fd, MAX_CONTEXT_BYTES) if info.st_size <= MAX_CONTEXT_BYTES else None
            if raw is None:
                return self._refuse(key, "too big for a context (%d bytes)" % info.st_size)
            try:
                record = json.loads(raw.decode("utf-8"))
            except ValueError:
                record = None
            if not isinstance(record, dict):
                return self._refuse(key, "not a context's record")
            start = _number(record, "start", 0, 1 << 62)
            nbytes = _number(record, "bytes", 0, MEMORY_TOTAL)
            util = _number(record, "util", 0, 100) if "util" in record else 0
            if not 0 <= gpu < self.gpus or record.get("gpu") != gpu or record.get("pid") != pid or pid <= 0:
                return self._refuse(key, "its record does not name the GPU and PID of its name")
            if start is None:
                return self._refuse(key, "its record has no start time of its process")
            if nbytes is None or util is None:
                return self._refuse(key, "its record has no valid bytes or util")
            problem = self._bound_to(pid, start, uid)
            if problem is not None:
                return self._refuse(key, problem)
            if start_time(pid) is None and (pid, start, uid) not in self._vouched and not self._foreign_pids:
                # Maybe a ghost the session will report in a moment, maybe a PID nobody has yet.
                self.ignored[key] = "process %d is gone and was never seen alive" % pid
                return None
            gi, ci, mps = (
                instance_id(record.get("gi")),
                instance_id(record.get("ci")),
                record.get("mps") is True,
            )
            outside = record.get("outside") is True
            ctx = _Context(key, gpu, pid, start, nbytes, util, gi, ci, mps, outside)
            self.ignored.pop(key, None)
            self._contexts[key] = ctx
            threading.Thread(target=self._watch, args=(ctx, fd), name="gputui-sim-ctx", daemon=True).start()
            watched = True
        except OSError:
            return None
        finally:
            if not watched:
                os.close(fd)
        return None

    @staticmethod
    def _bound_to(pid, start, uid):
        # type: (int, int, int) -> Optional[str]
        """Why the process living at `pid` (if any) is not the one that started at `start` as `uid`;
        None when it is, or when no process lives there."""
        now = start_time(pid)
        if now is None:
            return None
        if now != start:
            return "its start time %d is not that of process %d (%d)" % (start, pid, now)
        try:
            owner = os.stat("/proc/%d" % pid).st_uid
        except OSError:
            return None  # gone in between
        if start_time(pid) not in (start, None):
            return "process %d was replaced while it was checked" % pid
        if owner != uid:
            return "it names process %d of user %d, not of the file's user %d" % (pid, owner, uid)
        return None

    def _retire(self, name):
        # type: (str) -> None
        """Forget a released context and delete its file (called with self._cond held)."""
        del self._contexts[name]
        self._retired.add(name)
        try:
            os.unlink(os.path.join(self._ctx_dir, name))
        except OSError:
            pass

    def _release_delay(self, name):
        # type: (str) -> float
        # Seeded per context, so every reader of this sim (attach mode too) releases it at once.
        return random.Random("gputui-sim-release:%d:%s" % (self.seed, name)).uniform(*RELEASE_DELAY)

    def _watch(self, ctx, fd):
        # type: (_Context, int) -> None
        """Wait, blocked in flock(LOCK_EX) on the file `_load` checked (fd), until every holder of
        the context has exited."""
        path = os.path.join(self._ctx_dir, ctx.name)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        finally:
            os.close(fd)  # let other readers' watchers through at once
        delay = self._release_delay(ctx.name)
        with self._cond:
            ctx.release_at = time.monotonic() + delay
            self._cond.notify_all()
        # Delete the file when the memory is back even if nobody reads, so a reader attaching later
        # never sees a long-dead context.
        if not self._stop.wait(delay):
            try:
                os.unlink(path)
            except OSError:
                pass

    def wait_released(self, pid, timeout=5.0):
        # type: (int, float) -> bool
        """Wait until `pid` is listed on no GPU (its memory released); return whether it happened."""
        deadline = time.monotonic() + timeout
        while True:
            if pid not in self.read()[1]:
                return True
            with self._cond:
                now = time.monotonic()
                if now >= deadline:
                    return False
                pending = [c.release_at for c in self._contexts.values() if c.pid == pid]
                if not pending:
                    continue
                if None in pending:
                    wait = deadline - now  # a watcher notifies when a holder goes
                else:
                    wait = max(0.0, min(r for r in pending if r is not None) - now)
                self._cond.wait(min(wait, deadline - now))

    # -- the session process and jobs --------------------------------------------------------

    def _start_session(self):
        # type: () -> None
        lifeline_r, self._lifeline_w = os.pipe()
        commands_r, self._commands_w = os.pipe()
        # Not a pipe: every job inherits the status channel, even one run as another user, so the
        # reader must know who wrote each report. Over a SOCK_SEQPACKET socket with SO_PASSCRED, each
        # write is one message that comes with its writer's PID.
        self._status, status_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._status.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        status_w = status_sock.detach()
        config = {"dir": self.directory, "lifeline": lifeline_r, "commands": commands_r, "status": status_w}
        env = self._env(None)
        env["GPUTUI_SIM_INIT"] = json.dumps(config)
        script = self._script(SESSION_SCRIPT)
        with open(os.path.join(str(self.directory), "log", "session.log"), "ab") as log:
            self._session = subprocess.Popen(
                [sys.executable, "-S", script],
                pass_fds=(lifeline_r, commands_r, status_w),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )
        # Not reaped before _stop_session waits for it: its PID is not reused while we signal below it.
        self._session_id = (self._session.pid, start_time(self._session.pid))
        with self._cond:
            self._publish_owner()
        # Only the session and the jobs may hold these; the status socket reaches EOF when all are gone.
        for fd in (lifeline_r, commands_r, status_w):
            os.close(fd)
        self._status_thread = threading.Thread(
            target=self._read_status, name="gputui-sim-status", daemon=True
        )
        self._status_thread.start()

    def _stop_session(self):
        # type: () -> None
        session = self._session
        assert session is not None
        with self._cond:
            known = list(self._spawned)
        for job in self.jobs:
            known.extend(job.processes())
        for pid, started in known:
            signal_checked(pid, started, signal.SIGKILL, self._session_id)
        # EOF on the lifeline: every job exits; the session kills and reaps whatever is left.
        with self._send_lock:  # a concurrent spawn must not write to a closed (or reused) fd
            for fd in (self._lifeline_w, self._commands_w):
                if fd is not None:
                    os.close(fd)
            self._lifeline_w = self._commands_w = None
        try:
            session.wait(CLOSE_TIMEOUT)
        except subprocess.TimeoutExpired:
            session.kill()
            session.wait(CLOSE_TIMEOUT)
        with self._cond:
            self._cond.wait_for(lambda: self._all_gone, CLOSE_TIMEOUT)
            all_gone = self._all_gone
        if all_gone and self._status is not None:
            self._status.close()  # the status thread has finished with it
            self._status = None

    def _read_status(self):
        # type: () -> None
        """Dispatch the reports the session and the jobs send (spawned, ready, error), each with the
        PID of the process that sent it."""
        status = self._status
        assert status is not None
        while True:
            try:
                data, ancillary, flags, _ = status.recvmsg(
                    MAX_REPORT_BYTES, socket.CMSG_SPACE(_CREDENTIALS.size)
                )
            except OSError:
                break
            sender = None  # type: Optional[int]
            for level, kind, value in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    sender = _CREDENTIALS.unpack(value[: _CREDENTIALS.size])[0]
            if not data and sender is None:
                break  # EOF: every holder of the other end is gone (an empty message has a sender)
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                self._refuse_report("a report too big (from PID %s)" % sender)
                continue
            try:
                message = json.loads(data.decode("utf-8"))
            except ValueError:
                self._refuse_report("not JSON (from PID %s)" % sender)
                continue
            self._on_status(message, sender)
        with self._cond:
            self._all_gone = True
            self._cond.notify_all()

    def _refuse_report(self, reason):
        # type: (str) -> None
        with self._cond:  # reentrant: _on_status holds it
            self.refused_reports.append(reason)
            del self.refused_reports[:-MAX_REFUSED]

    def _report_problem(self, message, sender):
        # type: (Any, Optional[int]) -> Optional[str]
        """Why a status report is not taken (None: it is). Called with self._cond held.

        "spawned" comes from the session; "ready" and "error" for job N come from the process the
        session reported for N, a ready report names that process (PID, start time), and only the
        first of each is taken. What a job says of its children is checked when signalling."""
        if not isinstance(message, dict):
            return "not a report"
        serial = _number(message, "serial", 1, self._serial)
        event = message.get("event")
        if serial is None or event not in ("spawned", "ready", "error"):
            return "not a report of a job of this sim"
        events = self._spawns.get(serial, {})
        if event in events:
            return "a second %s report for job %d" % (event, serial)
        spawned = events.get("spawned") or {}
        if event == "spawned":
            source, what = (self._session_id or (None, None))[0], "the session"
        else:
            source, what = spawned.get("pid"), "its process"
        if sender is None or sender != source:
            return "a %s report for job %d not from %s (from PID %s)" % (event, serial, what, sender)
        if event == "error":
            return None
        pid, started = _number(message, "pid", 1, 1 << 22), _number(message, "start_time", 0, 1 << 62)
        if pid is None or started is None:
            return "a %s report for job %d without its PID and start time" % (event, serial)
        if event == "ready" and (pid, started) != (spawned.get("pid"), spawned.get("start_time")):
            return "a ready report for job %d naming another process than the job" % serial
        child = [message.get("child_pid"), message.get("child_start_time")]
        if child != [None, None] and not _is_process(child):
            return "a ready report for job %d with a malformed child" % serial
        workers = message.get("workers") or []
        if not isinstance(workers, list) or not all(_is_process(w) for w in workers):
            return "a ready report for job %d with malformed workers" % serial
        return None

    def _on_status(self, message, sender):
        # type: (Any, Optional[int]) -> None
        with self._cond:
            problem = self._report_problem(message, sender)
            if problem is not None:
                return self._refuse_report(problem)
            serial = message["serial"]
            self._spawns.setdefault(serial, {})[message["event"]] = message
            uid = self._spawn_uids.get(serial)
            for key, start_key in (("pid", "start_time"), ("child_pid", "child_start_time")):
                if message.get(key) is None:
                    continue
                pid, started = message[key], message[start_key]
                self._spawned.append((pid, started))
                # Vouch (list its context even if it exited before a read saw it) for the job itself,
                # and for the child it names only while that is a process of the sim: the job's own
                # word, in its own user's name only.
                if uid is not None and (key == "pid" or self._is_ours(pid, started)):
                    self._vouched.add((pid, started, uid))
            if uid is not None:
                self._publish_owner()
            self._cond.notify_all()

    def _is_ours(self, pid, started):
        # type: (int, Optional[int]) -> bool
        """Whether `pid` is a live process of this sim (below its session) that started at `started`."""
        if self._session_id is None or start_time(pid) != started:
            return False
        return descends_from(pid, self._session_id[0], self._session_id[1])

    def _env(self, user):
        # type: (Optional[pwd.struct_passwd]) -> Dict[str, str]
        env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "LANG": "C.UTF-8"}
        if user is not None:
            env.update(HOME=user.pw_dir, USER=user.pw_name, LOGNAME=user.pw_name)
        elif "HOME" in os.environ:
            env["HOME"] = os.environ["HOME"]
        return env

    def _user(self, user):
        # type: (Any) -> Optional[pwd.struct_passwd]
        if user is None:
            return None
        try:
            entry = pwd.getpwuid(user) if isinstance(user, int) else pwd.getpwnam(str(user))
        except KeyError:
            raise SimError("no such user: %r" % (user,)) from None
        if entry.pw_uid != os.getuid() and os.geteuid() != 0:
            raise SimError("only root can run a sim job as another user (%s)" % entry.pw_name)
        return entry

    def spawn(
        self,
        role,
        gpu=0,
        memory=GiB,
        util=None,
        name=None,
        argv=None,
        user=None,
        comm=None,
        timeout=None,
        workers=3,
        mig=None,
        child=None,
        lifetime=None,
    ):
        # type: (str, Any, int, Optional[int], Optional[str], Optional[List[str]], Any, Optional[str], Optional[float], int, Optional[Tuple[int, int]], Optional[Dict[str, Any]], Optional[float]) -> SimJob
        """Start a job and return it once settled (see docs in the module and SimJob).

        role: busy (util 85-99 unless given, burns a little CPU), idle (util 0), ignore-term
        (SIG_IGN for SIGTERM), ghost (parent allocates, forks a child that inherits everything, exits),
        hidden (holds the device files only, own session), zombie (allocates, forks a child that
        allocates and exits unreaped), monitor (holds the device files, comm "nv-hostengine"),
        workers (allocates, then forks `workers` children that hold its context, in its process
        group, like a launcher's data-loader workers; the parent lives on), mps-control (the MPS
        control daemon: holds the device files, comm "nvidia-cuda-mps"), mps-server (the MPS server:
        same comm, a context of its own), mps-client (a context NVML lists as an MPS client's).
        gpu: an index or a list (one context on each); memory: bytes per context; name: the script
        name; argv: its arguments; user: a uid or user name (root only); comm: a process name;
        mig: (gi, ci), the MIG instance its contexts run in (set up with set_state(mig_instances=...)).
        launcher (like torchrun: holds no device file; starts one CUDA-like rank per GPU of `gpu` as a
        new program, `child`'s script; forwards SIGTERM, SIGINT and SIGHUP to them and exits once
        they have, stopping the rest when one ends; the ranks are the job's `workers`), supervisor
        (holds no device file; runs one worker on the first GPU of `gpu` and starts a new one 0.5 s
        after it ends; a signal is passed on to the worker, then it exits), neighbour (another
        guest's job: a context and nothing else; listed by nobody where the reader plays a
        container's probe, the "neighbour" scenario). child: {"name": script, "argv": [...]} of a
        launcher's ranks or a supervisor's workers ("{rank}" in an argument: the rank's number).
        lifetime: seconds after which a busy, idle or ignore-term job exits by itself (a benchmark
        that ends; None: it lives until stopped or the sim closes)."""
        job = self._start_job(role, gpu, memory, util, name, argv, user, comm, workers, mig, child, lifetime)
        return self._finish_job(job, time.monotonic() + (timeout or SPAWN_TIMEOUT))

    def _start_job(
        self, role, gpu, memory, util, name, argv, user, comm, workers=3, mig=None, child=None, lifetime=None
    ):
        # type: (str, Any, int, Optional[int], Optional[str], Optional[List[str]], Any, Optional[str], int, Optional[Tuple[int, int]], Optional[Dict[str, Any]], Optional[float]) -> SimJob
        if self._session is None or self._closed:
            raise SimError("only an open SimReader that created its sim (not attach=True) can spawn")
        if role not in ROLES:
            raise ValueError("unknown sim role %r (known: %s)" % (role, ", ".join(ROLES)))
        if lifetime is not None and (role not in LIFETIME_ROLES or not 0 < float(lifetime) < 1e9):
            raise ValueError("a lifetime is for a %s job, in seconds > 0" % " or ".join(LIFETIME_ROLES))
        gpus = [] if role not in GPU_ROLES else ([gpu] if isinstance(gpu, int) else list(gpu))
        if role in PARENT_ROLES and not gpus:
            raise ValueError("a %s runs its children on at least one GPU" % role)
        for index in gpus:
            if not 0 <= index < self.gpus:
                raise ValueError("no GPU %r in this sim (%d GPUs)" % (index, self.gpus))
        if util is None:
            util = self._rng.randint(85, 99) if role in ("busy", *PARENT_ROLES) else 0
        kid = dict(child or DEFAULT_CHILD.get(role) or {}) if role in PARENT_ROLES else None
        if kid is not None:
            kid_name = str(kid.get("name") or "")
            if not kid_name or "/" in kid_name or kid_name.startswith("."):
                raise ValueError("a child's name is a plain file name, not %r" % (kid_name,))
            kid = {"name": kid_name, "argv": [str(a) for a in kid.get("argv") or []]}
            self._script(kid_name)
        util = max(0, min(100, int(util)))
        name = name or DEFAULT_NAMES[role]
        if "/" in name or name.startswith("."):
            raise ValueError("a job name is a plain file name, not %r" % (name,))
        if comm is None and role == "monitor":
            comm = MONITOR_COMM
        if comm is None and role in ("mps-control", "mps-server"):
            comm = MPS_COMM
        if comm is None and role == "launcher" and not name.endswith(".py"):
            comm = name  # a console script (torchrun, accelerate, deepspeed) shows its own name
        if mig is not None:
            mig = (int(mig[0]), int(mig[1]))
            state = self._state()
            for index in gpus:
                layout = self._mig_layout(state, index) or []
                if not any((i["gi"], i["ci"]) == mig for i in layout):
                    raise ValueError("GPU %d has no MIG instance %d.%d" % (index, mig[0], mig[1]))
        entry = self._user(user)
        uid = entry.pw_uid if entry is not None else None
        if gpus:
            self._user_dir(os.geteuid() if uid is None else uid)  # where its contexts go
        with self._cond:
            self._serial += 1
            serial = self._serial
            self._spawns[serial] = {}
            self._spawn_uids[serial] = os.geteuid() if uid is None else uid
        log = os.path.join(str(self.directory), "log", "%d-%s.log" % (serial, name))
        command = [sys.executable, "-S", self._script(name)] + [str(a) for a in (argv or [])]
        job = SimJob(role, name, command, gpus, int(memory), util, uid, serial, log)
        job.session = self._session_id
        config = {
            "serial": serial,
            "role": role,
            "dir": self.directory,
            "gpus": gpus,
            "memory": int(memory),
            "util": util,
            "comm": comm,
            "workers": int(workers),
            "mig": list(mig) if mig is not None else None,
            "child": kid,
            "lifetime": float(lifetime) if lifetime is not None else None,
        }
        env = self._env(entry)
        env["GPUTUI_SIM_JOB"] = json.dumps(config)
        request = {"serial": serial, "argv": command, "env": env, "uid": uid, "log": log}
        request["gid"] = entry.pw_gid if entry is not None else None
        self._send(request)
        self.jobs.append(job)
        return job

    def _send(self, request):
        # type: (Dict[str, Any]) -> None
        data = (json.dumps(request) + "\n").encode()
        with self._send_lock:
            fd = self._commands_w
            if fd is None:
                raise SimError("the sim is closed")
            try:
                while data:
                    data = data[os.write(fd, data) :]
            except OSError as exc:
                raise SimError("the sim session process is gone: %s" % exc) from exc

    def _finish_job(self, job, deadline):
        # type: (SimJob, float) -> SimJob
        """Wait for the job's ready report, then until its role has settled."""
        ready = self._wait_ready(job, deadline)
        job.pid, job.start_time = ready["pid"], ready.get("start_time")
        job.child_pid, job.child_start_time = ready.get("child_pid"), ready.get("child_start_time")
        job.workers = [(pid, start) for pid, start in ready.get("workers") or []]
        if job.role == "ghost" and not wait_exit(job.pid, job.start_time, deadline - time.monotonic()):
            raise SimError("%r: the ghost's parent did not exit" % job)
        if job.role == "zombie":
            assert job.child_pid is not None  # a zombie job's ready report always names its child
            if not self.wait_released(job.child_pid, deadline - time.monotonic()):
                raise SimError("%r: the zombie's memory was not released" % job)
        self.read()  # start watching its contexts now
        return job

    def _wait_ready(self, job, deadline):
        # type: (SimJob, float) -> Dict[str, Any]
        died = None  # type: Optional[float]
        with self._cond:
            while True:
                events = self._spawns.get(job.serial, {})
                if "error" in events:
                    raise SimError("%s %s: %s" % (job.role, job.name, events["error"].get("message")))
                if "ready" in events:
                    return events["ready"]
                spawned = events.get("spawned")
                if died is None and spawned and start_time(spawned["pid"]) != spawned.get("start_time"):
                    died = time.monotonic()
                if died is not None and time.monotonic() - died > 1.0:
                    # A ghost's parent reports ready, then exits: give its report a moment to arrive.
                    raise SimError("%s %s died at start-up: %s" % (job.role, job.name, self._log_tail(job)))
                left = deadline - time.monotonic()
                if left <= 0 or self._all_gone:
                    raise SimError("%s %s did not start: %s" % (job.role, job.name, self._log_tail(job)))
                # Woken by the status thread; the timeout only catches a job dying before it reports.
                self._cond.wait(min(left, 0.25))

    def _log_tail(self, job):
        # type: (SimJob) -> str
        try:
            with open(job.log, "rb") as f:
                return f.read()[-2000:].decode("utf-8", "replace").strip() or "(no output)"
        except OSError:
            return "(no log)"

    # -- scenarios ---------------------------------------------------------------------------

    def _run_scenario(self):
        # type: () -> None
        """Start every job of the scenario at once, then wait for each to settle, so the first sample
        already shows everything (the ghost's parent reaped, the zombie in state Z, its memory back)."""
        for index, knobs in SCENARIO_STATE.get(self.scenario, lambda gpus: {})(self.gpus).items():
            self.set_state(index, **knobs)
        specs = SCENARIO_JOBS[self.scenario](self.variant, self.gpus)
        deadline = time.monotonic() + SPAWN_TIMEOUT
        started = [
            self._start_job(
                role,
                spec.get("gpu", 0),
                spec.get("memory", GiB),
                spec.get("util"),
                spec.get("name"),
                spec.get("argv"),
                None,
                None,
                spec.get("workers", 3),
                spec.get("mig"),
                spec.get("child"),
            )
            for role, spec in specs
        ]
        for job in started:
            self._finish_job(job, deadline)


def demo_jobs(variant, gpus):
    # type: (int, int) -> List[Tuple[str, Dict[str, Any]]]
    """The demo scenario: every kind of process at once. Variant 0 and 1 look like two different
    hosts; variant 1 leaves GPU 3 free. Fewer than 4 GPUs: the jobs share them."""

    def on(*indexes):
        # type: (*int) -> List[int]
        return sorted({i % gpus for i in indexes})

    if variant % 2 == 0:
        return [
            ("busy", dict(gpu=on(0, 1), memory=118 * GiB, util=93, name="vllm_serve.py",
                          argv=["--model", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "2",
                                "--port", "8000"])),
            ("ghost", dict(gpu=on(2), memory=41 * GiB, name="train.py",
                           argv=["--model", "llama-3.1-8b", "--epochs", "3", "--num-workers", "4"])),
            ("idle", dict(gpu=on(2), memory=12 * GiB, name="notebook_kernel.py",
                          argv=["-f", "/run/user/1000/jupyter/kernel-4f1c.json"])),
            ("ignore-term", dict(gpu=on(3), memory=30 * GiB, util=38, name="serve_embed.py",
                                 argv=["--model", "BAAI/bge-large-en-v1.5", "--port", "9000"])),
            ("zombie", dict(gpu=on(3), memory=22 * GiB, util=97, name="bench.py",
                            argv=["--suite", "matmul", "--dtype", "bf16"])),
            ("hidden", dict(name="probe_cuda.py", argv=["--check", "all"])),
            ("monitor", dict(name="nv_hostengine.py", argv=["-n", "--service-account", "nvidia-dcgm"])),
        ]  # fmt: skip
    return [
        ("busy", dict(gpu=on(0, 1), memory=104 * GiB, util=98, name="train.py",
                      argv=["--model", "mixtral-8x7b", "--fsdp", "--batch-size", "8"])),
        ("idle", dict(gpu=on(0), memory=9 * GiB, name="notebook_kernel.py",
                      argv=["-f", "/run/user/1001/jupyter/kernel-93ab.json"])),
        ("ignore-term", dict(gpu=on(1), memory=20 * GiB, util=35, name="vllm_serve.py",
                             argv=["--model", "Qwen/Qwen2.5-7B-Instruct", "--port", "8001"])),
        ("ghost", dict(gpu=on(2), memory=63 * GiB, name="finetune.py",
                       argv=["--model", "qwen2.5-32b", "--lora", "--num-workers", "2"])),
        ("zombie", dict(gpu=on(2), memory=16 * GiB, util=88, name="bench.py",
                        argv=["--suite", "attention", "--seq-len", "8192"])),
        ("hidden", dict(name="probe_cuda.py", argv=["--device", "all", "--loop"])),
        ("monitor", dict(name="nv_hostengine.py", argv=["-n", "--service-account", "nvidia-dcgm"])),
    ]  # fmt: skip


def workers_jobs(variant, gpus):
    # type: (int, int) -> List[Tuple[str, Dict[str, Any]]]
    """A launcher on GPU 0 with three data-loader workers in its process group, another user's job
    sharing GPU 0, and a job on GPU 1: what a kill of one worker, or of GPU 0, must tell apart."""
    return [
        ("workers", dict(gpu=[0], memory=24 * GiB, util=90, name="launch.py", workers=3,
                         argv=["--nproc", "1", "--num-workers", "3"])),
        ("busy", dict(gpu=[0], memory=8 * GiB, util=40, name="serve.py", argv=["--port", "8000"])),
        ("busy", dict(gpu=[1 % gpus], memory=16 * GiB, util=70, name="train.py", argv=["--lr", "3e-4"])),
    ]  # fmt: skip


def preflight_state(gpus):
    # type: (int) -> Dict[int, Dict[str, Any]]
    """The "preflight" scenario: four GPUs that are each not ready in their own way. GPU 0 is ready;
    GPU 1 has 2.1 GiB that no process holds (orphaned: only a reset frees it); GPU 2 ran hot and cools
    slowly (78 °C, falling 0.5 °C a second) while throttling; GPU 3 has persistence mode off and ECC
    errors (1 uncorrected, a row remap pending)."""
    state = {  # type: Dict[int, Dict[str, Any]]
        1: {"orphaned": int(2.1 * GiB)},
        2: {"cooling": {"from": 78.0, "rate": 0.5, "since": time.time()}, "throttle": ["hw-thermal"]},
        3: {"persistence": False, "ecc_corrected": 4, "ecc_uncorrected": 1, "remap_pending": True},
    }
    return {i: dict(knobs) for i, knobs in state.items() if i < gpus}


# The "mig" scenario's GPU 0: three GPU instances of an H200 (3g.71gb, 2g.35gb, 1g.18gb).
MIG_LAYOUT = (
    {"gi": 1, "ci": 0, "memory_total": 71 * GiB, "name": MIG_NAME % (3, 71)},
    {"gi": 2, "ci": 0, "memory_total": 35 * GiB, "name": MIG_NAME % (2, 35)},
    {"gi": 5, "ci": 0, "memory_total": 18 * GiB, "name": MIG_NAME % (1, 18)},
)


def mig_state(gpus):
    # type: (int) -> Dict[int, Dict[str, Any]]
    """The "mig" scenario: GPU 0 in MIG mode with three instances (MIG_LAYOUT); the rest whole."""
    return {0: {"mig_instances": [dict(i) for i in MIG_LAYOUT]}}


def mig_jobs(variant, gpus):
    # type: (int, int) -> List[Tuple[str, Dict[str, Any]]]
    """Jobs in two of GPU 0's MIG instances (two in 1.0, one in 2.0; 5.0 is free), and one on
    GPU 1 (not in MIG mode) when there is one."""
    jobs = [
        ("busy", dict(gpu=[0], memory=40 * GiB, util=80, name="train.py", argv=["--model", "llama-3.1-8b"],
                      mig=(1, 0))),
        ("idle", dict(gpu=[0], memory=6 * GiB, name="notebook_kernel.py", argv=["-f", "kernel-mig.json"],
                      mig=(1, 0))),
        ("busy", dict(gpu=[0], memory=20 * GiB, util=60, name="serve.py", argv=["--port", "8000"],
                      mig=(2, 0))),
    ]  # fmt: skip
    if gpus > 1:
        jobs.append(
            ("busy", dict(gpu=[1], memory=30 * GiB, util=90, name="bench.py", argv=["--suite", "gemm"]))
        )
    return jobs


def mps_jobs(variant, gpus):
    # type: (int, int) -> List[Tuple[str, Dict[str, Any]]]
    """CUDA MPS on GPU 0: the control daemon, the server (its own context) and three clients whose
    work runs in the server's contexts (NVML lists them through its MPS process list)."""
    return [
        ("mps-control", dict(argv=["-d"])),
        ("mps-server", dict(gpu=[0], memory=512 << 20, util=0)),
        ("mps-client", dict(gpu=[0], memory=10 * GiB, util=60, name="infer.py", argv=["--rank", "0"])),
        ("mps-client", dict(gpu=[0], memory=10 * GiB, util=55, name="infer.py", argv=["--rank", "1"])),
        ("mps-client", dict(gpu=[0], memory=6 * GiB, util=30, name="embed.py", argv=["--batch", "64"])),
    ]


def jobs_jobs(variant, gpus):
    # type: (int, int) -> List[Tuple[str, Dict[str, Any]]]
    """The "jobs" scenario: what people stop by name (docs/PROTOCOL.md "Jobs"). A torchrun-like
    launcher holding no device file, with two ranks on GPUs 0 and 1; a supervisor that restarts its
    worker on GPU 2 half a second after it ends; one user's two jobs on GPUs 3 and 4 (8 GPUs by
    default: with fewer, the indexes wrap round, as in the demo)."""

    def on(*indexes):
        # type: (*int) -> List[int]
        return sorted({i % gpus for i in indexes})

    return [
        ("launcher", dict(gpu=[0 % gpus, 1 % gpus], memory=18 * GiB, util=92, name="torchrun",
                          argv=["--nproc-per-node", "2", "train.py", "--config", "llama-8b.yaml"],
                          child={"name": "train.py", "argv": ["--local-rank", "{rank}", "--config",
                                                              "llama-8b.yaml"]})),
        ("supervisor", dict(gpu=on(2), memory=6 * GiB, util=30, name="supervisor.py",
                            argv=["--program", "worker", "--autorestart", "true"],
                            child={"name": "worker.py", "argv": ["--queue", "embeddings"]})),
        ("busy", dict(gpu=on(3), memory=24 * GiB, util=88, name="train.py", argv=["--model", "qwen2.5-7b"])),
        ("busy", dict(gpu=on(4), memory=10 * GiB, util=45, name="eval.py", argv=["--suite", "mmlu"])),
    ]  # fmt: skip


def neighbour_jobs(variant, gpus):
    # type: (int, int) -> List[Tuple[str, Dict[str, Any]]]
    """The "neighbour" scenario: seen from inside an LXC guest (the reader plays one). This guest's
    own `train.py` on GPU 0 and `serve.py` on GPU 2; other guests' jobs use 4.6 GiB of GPU 1 and
    30 GiB of GPU 2 that NVML here lists for nobody (`outside`); GPU 3 is free."""

    def on(*indexes):
        # type: (*int) -> List[int]
        return sorted({i % gpus for i in indexes})

    return [
        ("busy", dict(gpu=on(0), memory=20 * GiB, util=80, name="train.py", argv=["--model", "llama-3.1-8b"])),
        ("neighbour", dict(gpu=on(1), memory=int(4.6 * GiB), util=35, name="train.py",
                           argv=["--guest", "131"])),
        ("busy", dict(gpu=on(2), memory=12 * GiB, util=40, name="serve.py", argv=["--port", "8000"])),
        ("neighbour", dict(gpu=on(2), memory=30 * GiB, util=50, name="vllm_serve.py",
                           argv=["--guest", "132"])),
    ]  # fmt: skip


SCENARIO_JOBS = {
    "demo": demo_jobs,
    "empty": lambda variant, gpus: [],
    "workers": workers_jobs,
    "preflight": lambda variant, gpus: [],
    "mig": mig_jobs,
    "mps": mps_jobs,
    "jobs": jobs_jobs,
    "neighbour": neighbour_jobs,
}  # type: Dict[str, Callable[[int, int], List[Tuple[str, Dict[str, Any]]]]]
SCENARIO_STATE = {
    "preflight": preflight_state,
    "mig": mig_state,
}  # type: Dict[str, Callable[[int], Dict[int, Dict[str, Any]]]]

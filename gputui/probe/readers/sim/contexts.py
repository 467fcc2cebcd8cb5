"""The sim driver's memory: the CUDA contexts under ctx/<uid>/ that a reader believes, and when
each is released.

A context file is believed only if its process made it (the checks of `ContextTable._load`); a
thread per context waits in flock(LOCK_EX) until every holder is gone, then the memory comes back
0.10 to 0.18 s later (seeded, so every reader of the sim releases it at once), as NVML does. From the
believed contexts, `listing` says what NVML would: memory and utilization by GPU, the processes
listed, their MIG instances and MPS tags.

Apart from the reader: this is the part that must not be lied to (a context names a process that a
plan stops), and it knows nothing of GPUs' looks or of the jobs that made the contexts.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import errno
import fcntl
import json
import os
import random
import stat
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Set, Tuple  # noqa: F401  (used in type comments)

from ..base import Listed, Tags, instance_id  # noqa: F401  (Listed, Tags: in type comments)
from .client import start_time
from .directory import Vouched  # noqa: F401  (used in type comments)
from .files import NO_WRITE, OPEN_DIR, OPEN_FILE, number, read_bounded
from .gpus import MEMORY_TOTAL

RELEASE_DELAY = (0.10, 0.18)  # GPU_FACTS: NVML stops listing and memory is back 0.10 to 0.18 s after exit
MAX_CONTEXT_BYTES = 4096  # a context's record is under 200 bytes: a bigger file is not one


@dataclass(eq=False)  # one context is one thing: equal only to itself (and hashed so)
class Context(object):
    """One context as the reader sees it; `release_at` (monotonic) is set once every holder is gone.
    `name`: "<uid>/<file name>" under ctx/; `start`: its process's start time; `gi`, `ci`: the MIG
    instance it runs in (None outside MIG); `mps`: an MPS client's; `outside`: another guest's, as a
    reader playing a container's probe sees it (its memory counts, no process is listed); `listed`: whether the latest
    read found its PID still its process (alive, or gone: a ghost), not another one."""

    __slots__ = (
        "ci", "gi", "gpu", "listed", "mps", "name", "nbytes", "outside", "pid", "release_at", "start", "util",
    )  # fmt: skip

    # No defaults: a class attribute would take a slot's name (Python 3.8 has no dataclass(slots=)).
    name: str
    gpu: int
    pid: int
    start: int
    nbytes: int
    util: int
    gi: Optional[int]
    ci: Optional[int]
    mps: bool
    outside: bool  # another PID namespace's (the "neighbour" scenario): never listed

    def __post_init__(self):
        # type: () -> None
        self.listed = True
        self.release_at = None  # type: Optional[float]


class Listing(object):
    """What NVML would say of the contexts at one instant (ContextTable.listing): by GPU index the
    bytes and utilization they add up to, the processes listed, their tags, and the bytes in use in
    each MIG GPU instance ((gpu, gi) -> bytes)."""

    def __init__(self, gpus):
        # type: (int) -> None
        self.used = [0] * gpus
        self.util = [0] * gpus
        self.listed = {}  # type: Listed
        self.tags = {}  # type: Tags
        self.by_instance = {}  # type: Dict[Tuple[int, int], int]


class ContextTable(object):
    """The contexts a reader believes (`contexts`, by name), what it does not and why (`ignored`:
    only files still there; people and tests look), and the processes whose contexts are believed
    after they exited even if no read saw them alive (`vouched`: the session's reports, or the
    owner's word in owner.json). Everything is guarded by `cond`, shared with the reader."""

    def __init__(self, seed, cond, stop):
        # type: (int, threading.Condition, threading.Event) -> None
        self.seed = seed
        self.cond = cond
        self.stop = stop  # set when the reader closes: watchers no longer delete files
        self.ctx_dir = ""  # <base>/ctx, once the reader has its directory
        self.gpus = 0
        self.contexts = {}  # type: Dict[str, Context]
        self.retired = set()  # type: Set[str]  # released or refused names whose file may still be listed
        self.ignored = {}  # type: Dict[str, str]
        self.vouched = set()  # type: Vouched
        self.foreign_pids = False  # attached from another PID namespace than the sim's

    def place(self, ctx_dir, gpus):
        # type: (str, int) -> None
        """Where the contexts are, and how many GPUs they may be on (known once the reader opens)."""
        self.ctx_dir = ctx_dir
        self.gpus = gpus

    # -- what NVML would say ---------------------------------------------------------------------

    def listing(self, now, in_guest):
        # type: (float, bool) -> Listing
        """Retire the contexts released by `now`, and sum up the rest (called with `cond` held).
        `in_guest`: the reader plays a container's probe, to which other guests' contexts list nobody."""
        out = Listing(self.gpus)
        for name, ctx in list(self.contexts.items()):
            if ctx.release_at is not None and now >= ctx.release_at:
                self._retire(name)
                continue
            out.used[ctx.gpu] += ctx.nbytes
            if ctx.outside and in_guest:
                out.util[ctx.gpu] += ctx.util  # the GPU is busy with it; nobody here is listed
                continue
            # Its PID is its process, or no process (a ghost); a new process there is not it: the
            # memory is still held (by the ghost's heirs), by no process NVML could name.
            ctx.listed = start_time(ctx.pid) in (ctx.start, None)
            if not ctx.listed:
                continue
            out.util[ctx.gpu] += ctx.util
            on_gpu = out.listed.setdefault(ctx.pid, {})
            on_gpu[ctx.gpu] = (on_gpu.get(ctx.gpu) or 0) + ctx.nbytes
            if ctx.mps:
                out.tags.setdefault(ctx.pid, {})["mps"] = True
            if ctx.gi is not None:
                # Compute instances of one GPU instance share its memory (as on a real GPU).
                key = (ctx.gpu, ctx.gi)
                out.by_instance[key] = out.by_instance.get(key, 0) + ctx.nbytes
                places = out.tags.setdefault(ctx.pid, {}).setdefault("mig", [])
                if (ctx.gpu, ctx.gi, ctx.ci) not in places:
                    places.append((ctx.gpu, ctx.gi, ctx.ci))
        return out

    def utilization(self, in_guest):
        # type: (bool) -> Dict[int, Dict[int, Dict[str, Optional[int]]]]
        """Each live context's utilization on its GPU (its `util`; memory utilization 3/5 of it, as
        for the whole GPU; no encoder or decoder work in the sim)."""
        out = {}  # type: Dict[int, Dict[int, Dict[str, Optional[int]]]]
        with self.cond:
            for ctx in self.contexts.values():
                if ctx.release_at is not None or not ctx.listed:
                    continue
                if ctx.outside and in_guest:
                    continue
                share = out.setdefault(ctx.pid, {}).setdefault(
                    ctx.gpu, {"sm": 0, "mem": 0, "enc": 0, "dec": 0}
                )
                sm = min(100, (share["sm"] or 0) + ctx.util)
                share["sm"], share["mem"] = sm, (sm * 3) // 5
        return out

    def holders(self, gpu):
        # type: (int) -> List[int]
        """The PIDs of the contexts on `gpu` whose holders are not all gone yet."""
        with self.cond:
            return [c.pid for c in self.contexts.values() if c.gpu == gpu and c.release_at is None]

    def release_times(self, pid):
        # type: (int) -> List[Optional[float]]
        """When each context of `pid` is released (None: a holder is still there); called with
        `cond` held."""
        return [c.release_at for c in self.contexts.values() if c.pid == pid]

    # -- finding and believing contexts --------------------------------------------------------

    def track_new(self):
        # type: () -> None
        """Start watching contexts not seen before (called with `cond` held): every private
        ctx/<uid>/ and, in it, every file named like a context that is not known yet."""
        present = set()
        try:
            users = os.listdir(self.ctx_dir)
        except OSError:
            users = []
        for user in users:
            present.add(user)
            if not (user.isascii() and user.isdigit()):
                self.ignored[user] = "not a user's context directory"
                continue
            uid = int(user)
            path = os.path.join(self.ctx_dir, user)
            try:
                dir_fd = os.open(path, OPEN_DIR)
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
                    if key not in self.contexts and key not in self.retired:
                        self._load(dir_fd, uid, key, name)
            except OSError:
                continue
            finally:
                os.close(dir_fd)
        # A name never comes back (names carry a random part): forget those that are gone.
        self.retired &= present
        for key in [k for k in self.ignored if k not in present]:
            del self.ignored[key]

    def _refuse(self, key, reason):
        # type: (str, str) -> None
        """A file that is not a context, for good: never read again while it is there."""
        self.ignored[key] = reason
        self.retired.add(key)

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
            fd = os.open(name, OPEN_FILE, dir_fd=dir_fd)
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
            start = number(record, "start", 0, 1 << 62)
            nbytes = number(record, "bytes", 0, MEMORY_TOTAL)
            util = number(record, "util", 0, 100) if "util" in record else 0
            if not 0 <= gpu < self.gpus or record.get("gpu") != gpu or record.get("pid") != pid or pid <= 0:
                return self._refuse(key, "its record does not name the GPU and PID of its name")
            if start is None:
                return self._refuse(key, "its record has no start time of its process")
            if nbytes is None or util is None:
                return self._refuse(key, "its record has no valid bytes or util")
            problem = self._bound_to(pid, start, uid)
            if problem is not None:
                return self._refuse(key, problem)
            if start_time(pid) is None and (pid, start, uid) not in self.vouched and not self.foreign_pids:
                # Maybe a ghost the session will report in a moment, maybe a PID nobody has yet.
                self.ignored[key] = "process %d is gone and was never seen alive" % pid
                return None
            gi, ci, mps = (
                instance_id(record.get("gi")),
                instance_id(record.get("ci")),
                record.get("mps") is True,
            )
            outside = record.get("outside") is True
            ctx = Context(key, gpu, pid, start, nbytes, util, gi, ci, mps, outside)
            self.ignored.pop(key, None)
            self.contexts[key] = ctx
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

    # -- release ---------------------------------------------------------------------------------

    def _retire(self, name):
        # type: (str) -> None
        """Forget a released context and delete its file (called with `cond` held)."""
        del self.contexts[name]
        self.retired.add(name)
        try:
            os.unlink(os.path.join(self.ctx_dir, name))
        except OSError:
            pass

    def _release_delay(self, name):
        # type: (str) -> float
        # Seeded per context, so every reader of this sim (attach mode too) releases it at once.
        return random.Random("gputui-sim-release:%d:%s" % (self.seed, name)).uniform(*RELEASE_DELAY)

    def _watch(self, ctx, fd):
        # type: (Context, int) -> None
        """Wait, blocked in flock(LOCK_EX) on the file `_load` checked (fd), until every holder of
        the context has exited."""
        path = os.path.join(self.ctx_dir, ctx.name)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        finally:
            os.close(fd)  # let other readers' watchers through at once
        delay = self._release_delay(ctx.name)
        with self.cond:
            ctx.release_at = time.monotonic() + delay
            self.cond.notify_all()
        # Delete the file when the memory is back even if nobody reads, so a reader attaching later
        # never sees a long-dead context.
        if not self.stop.wait(delay):
            try:
                os.unlink(path)
            except OSError:
                pass

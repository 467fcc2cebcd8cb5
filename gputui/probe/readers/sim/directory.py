"""The sim directory, `<base>/`: its layout (dev/ with the device files, ctx/<uid>/ for contexts,
bin/ for the jobs' programs, log/), made by the reader that runs the sim; the checks a reader that
attaches makes before it believes any of it (sim.json and ctx/ are the sim owner's, and only the
owner can write them); and owner.json, in which the owner vouches for its session and its jobs.

Apart from the reader: these are the files both sides of an attached sim agree on, and who may have
written them; the reader only keeps what they say.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import fcntl
import json
import os
import shutil
import stat
import tempfile
import time
from typing import Any, Dict, List, Optional, Set, Tuple  # noqa: F401  (used in type comments)

from ..base import ReaderError
from .client import DEVICE_SIZE, start_time
from .files import OPEN_FILE, directory_problem, is_process, number, read_bounded, write_file
from .roles import SimError
from .worker import WORKER_SOURCE

META_FILE = "sim.json"
OWNER_FILE = "owner.json"
MAX_META_BYTES = 65536  # sim.json, read when attaching
MAX_OWNER_BYTES = 1 << 20  # owner.json: what the owner vouches for (pruned to what is still there)

# A process the owner's session reported, whose contexts are believed after it exited: (pid, start
# time, uid).
Vouched = Set[Tuple[int, int, int]]


def device_paths(base, gpus):
    # type: (str, int) -> List[str]
    """Every device file of a sim of `gpus` GPUs at `base`, as /dev/nvidia* on a real host."""
    dev = os.path.join(base, "dev")
    paths = [os.path.join(dev, "nvidia%d" % i) for i in range(gpus)]
    paths += [os.path.join(dev, name) for name in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")]
    paths += [os.path.join(dev, "nvidia-caps", "nvidia-cap%d" % i) for i in (1, 2)]
    return paths


def make_directory(base_dir, gpus, meta):
    # type: (Optional[str], int, Dict[str, Any]) -> str
    """A new sim directory under `base_dir` (the temporary directory when None) for `gpus` GPUs,
    its sim.json saying `meta`; returns its real path. Removed again if it cannot be made whole.
    A job run as another user must reach it by path (`reach_problem` says when it cannot)."""
    # realpath: /proc/PID/fd links name the real path, and the holder scan matches on the prefix.
    base = os.path.realpath(tempfile.mkdtemp(prefix="gputui-sim-", dir=base_dir))
    try:
        os.chmod(base, 0o755)  # mkdtemp makes it 0700; jobs may run as another user
        for sub, mode in (("dev", 0o755), ("dev/nvidia-caps", 0o755), ("bin", 0o755), ("log", 0o755)):
            os.mkdir(os.path.join(base, sub))
            os.chmod(os.path.join(base, sub), mode)
        # Nobody else writes here: contexts are what makes a process a GPU user that a plan stops.
        # Each user that allocates gets a directory of its own in it (`user_dir`), this user's first.
        os.mkdir(os.path.join(base, "ctx"), 0o755)
        os.chmod(os.path.join(base, "ctx"), 0o755)
        user_dir(base, os.geteuid())
        for path in device_paths(base, gpus):
            # Not empty, so CUDA-like jobs can mmap them (a CUDA process maps nvidiaN, nvidiactl, nvidia-uvm).
            with open(path, "wb") as f:
                f.truncate(DEVICE_SIZE)
            os.chmod(path, 0o666)
        write_file(os.path.join(base, META_FILE), json.dumps(meta, indent=1) + "\n", 0o644)
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise
    return base


def reach_problem(path, uid, gid):
    # type: (str, int, int) -> Optional[str]
    """Why a process of `uid` (group `gid`, no other group: a job drops them) cannot reach `path`
    by its name, in words; None when it can."""
    for name, info in _chain(path):
        if info is None:
            return "%s cannot be read" % name
        if not _searchable(info, uid, gid):
            return "%s (mode %o, uid %d) is not searchable by uid %d" % (
                name,
                stat.S_IMODE(info.st_mode),
                info.st_uid,
                uid,
            )
    return None


def _chain(path):
    # type: (str) -> List[Tuple[str, Optional[os.stat_result]]]
    """`path` (real) and every directory above it, `/` last, each with its stat (None: unreadable)."""
    names = [os.path.realpath(path)]
    while os.path.dirname(names[-1]) != names[-1]:
        names.append(os.path.dirname(names[-1]))
    out = []  # type: List[Tuple[str, Optional[os.stat_result]]]
    for name in names:
        try:
            out.append((name, os.stat(name)))
        except OSError:
            out.append((name, None))
    return out


def _searchable(info, uid, gid):
    # type: (Optional[os.stat_result], int, int) -> bool
    """Whether a process of `uid` and `gid` (-1: any user at all) may search this directory."""
    if info is None:
        return False
    if uid == 0:
        return True
    if info.st_uid == uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid == gid:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)


def user_dir(base, uid):
    # type: (str, int) -> str
    """ctx/<uid>/, where that user's processes make their contexts: made 0755 and given to the
    user (only root runs jobs as another user); one that is there already must be as private."""
    path = os.path.join(base, "ctx", str(uid))
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


def script(base, name):
    # type: (str, str) -> str
    """`<base>/bin/<name>`, holding the worker program, so `ps` shows a realistic command."""
    path = os.path.join(base, "bin", name)
    if not os.path.exists(path):
        write_file(path, WORKER_SOURCE, 0o644)
    return path


def checked_directory(base_dir):
    # type: (str) -> Tuple[str, int, Dict[str, Any], Tuple[int, int, int]]
    """An existing sim to attach to: (its real path, its owner's uid, its sim.json, (gpus, seed,
    variant)). Only one that nobody else could have made or changed: a real directory of this user
    or of root (every user may read root's sim, as every user may read NVML) that no one else can
    write, its ctx/ too; else one clear ReaderError."""
    base = os.path.realpath(str(base_dir))
    owners = tuple(sorted({os.geteuid(), 0}))
    problem = directory_problem(base, "the sim directory %s" % base, owners)
    if problem:
        raise ReaderError("no-driver", "sim: refusing to use it: %s" % problem)
    owner = os.stat(base).st_uid
    meta = read_meta(os.path.join(base, META_FILE), owner)
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
    return base, owner, meta, (gpus, seed, variant)


def read_meta(path, uid):
    # type: (str, int) -> Dict[str, Any]
    """sim.json: a small regular file of the sim's user (not a link, not a FIFO), a JSON object."""
    try:
        fd = os.open(path, OPEN_FILE)
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


def watch(base):
    # type: (str) -> Optional[int]
    """Hold flock(LOCK_SH) on sim.json while attached (the fd returned; closing it lets go): whoever
    runs the sim can tell that someone watches it (files.watched: the demo daemon lives while it has
    clients). Its own test takes LOCK_EX for an instant; a few tries get past it. Best effort: a
    reader that cannot say it watches still reads (None: nothing to close)."""
    try:
        fd = os.open(os.path.join(base, META_FILE), OPEN_FILE)
    except OSError:
        return None
    for _ in range(50):
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            time.sleep(0.01)
        except OSError:
            break
    return fd


class OwnerFile(object):
    """<base>/owner.json: the owner's word for readers that attach: its session (pid, start time),
    and the processes its session reported (Vouched), whose contexts are believed after they exited
    (a ghost whose parent exited before an attached reader looked)."""

    def __init__(self, base):
        # type: (str) -> None
        self.path = os.path.join(base, OWNER_FILE)
        self.ctx_dir = os.path.join(base, "ctx")
        self._stamp = None  # type: Optional[Tuple[int, int]]

    def publish(self, session, vouched):
        # type: (Optional[Tuple[int, Optional[int]]], Vouched) -> Vouched
        """The owner's side: write the session and those of `vouched` still alive or named by a
        context file still there; returns them. Pruned here, so a sim that runs jobs for days keeps
        it small."""
        named = set()  # type: Set[str]
        try:
            for user in os.listdir(self.ctx_dir):
                for name in os.listdir(os.path.join(self.ctx_dir, user)):
                    if name.endswith(".ctx") and name.count("-") >= 2:
                        named.add(name.split("-")[1])
        except OSError:
            pass
        kept = {
            (pid, started, uid)
            for pid, started, uid in vouched
            if str(pid) in named or start_time(pid) == started
        }
        record = {
            "version": 1,
            "session": list(session) if session else None,
            "vouched": sorted(list(v) for v in kept),
        }
        try:
            write_file(self.path, json.dumps(record), 0o644)
        except OSError:
            pass  # the sim is being removed
        return kept

    def load(self, owner_uid):
        # type: (int) -> Optional[Tuple[Optional[Tuple[int, int]], Vouched]]
        """An attached reader's side: (the owner's session, what it vouches for) when the file changed
        since the last load; None when it did not, or is not a small regular file of the sim's owner
        holding a record."""
        try:
            fd = os.open(self.path, OPEN_FILE)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            stamp = (info.st_ino, info.st_mtime_ns)
            if stamp == self._stamp:
                return None
            if not stat.S_ISREG(info.st_mode) or info.st_uid != owner_uid:
                return None
            raw = read_bounded(fd, MAX_OWNER_BYTES)
        except OSError:
            return None
        finally:
            os.close(fd)
        try:
            record = json.loads(raw.decode("utf-8")) if raw is not None else None
        except ValueError:
            record = None
        if not isinstance(record, dict):
            return None
        self._stamp = stamp
        found = record.get("session") or []  # type: List[Any]
        session = (found[0], found[1]) if is_process(found) else None
        vouched = set()  # type: Vouched
        for entry in record.get("vouched") or []:
            if isinstance(entry, list) and len(entry) == 3 and is_process(entry[:2]):
                uid = number({"uid": entry[2]}, "uid", 0, (1 << 32) - 1)
                if uid is not None:
                    vouched.add((entry[0], entry[1], uid))
        return session, vouched

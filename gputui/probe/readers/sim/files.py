"""Reading and writing the sim directory's files without trusting them: how a file is opened (no
link followed, no blocking on a FIFO), the checks of a directory nobody else may write, reads that
stop at a bound, the numbers a record may hold, an atomic write, and `watched` (whether a reader is
attached to a sim).

Apart from the reader: every part of the sim (contexts, the directory, the status reports) checks
what others wrote with these, and the demo daemon asks `watched`.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import fcntl
import os
import stat
from typing import Any, Dict, List, Optional, Tuple  # noqa: F401  (used in type comments)

# No directory of the sim may be written by group or others: a context names a process that a plan
# for its GPU stops. Reading is fine: every user may ask NVML which processes use a GPU.
NO_WRITE = 0o022
OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
OPEN_DIR = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


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
        fd = os.open(os.path.join(directory, "sim.json"), OPEN_FILE)
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


def number(record, key, low, high):
    # type: (Dict[str, Any], str, int, int) -> Optional[int]
    """record[key] if it is an integer (not a bool) from low to high, else None."""
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


def is_process(value):
    # type: (Any) -> bool
    """Whether `value` is [pid, start time], as a status report names a process."""
    if not isinstance(value, list) or len(value) != 2:
        return False
    record = {"pid": value[0], "start": value[1]}
    return number(record, "pid", 1, 1 << 22) is not None and number(record, "start", 0, 1 << 62) is not None


def write_file(path, text, mode):
    # type: (str, str, int) -> None
    """Write `path` whole, with `mode`: readers see the old file or the new one, never a part."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.rename(tmp, path)

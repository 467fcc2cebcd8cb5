"""One process in full, read from /proc when the app asks: the `detail` request (docs/PROTOCOL.md).

A sample says what every GPU process is, in a few bounded fields; the dashboard's process detail
wants more of one process: its whole command line, working directory, executable, threads, cgroup,
the device files it holds (by fd), and its parents up to init. That is read here, on demand, for one
(pid, start time): a process that has exited, or whose PID now belongs to another process (another
start time), is answered as gone, never described.

The environment holds secrets: it is read only when the request asks (`environ`: the detail
screen's `e`), only where /proc would let this user read it anyway (the probe runs as root, or
every uid of the process is the probe's: `environ_refusal`), and the values of secret-looking names
(`secret_looking`) are sent only when asked again (`secrets`: the operator pressed `s`). Bounded
(MAX_ENVIRON_BYTES, MAX_ENVIRON_VARS), and cut further if the record would not fit one line.

Every string is bounded, and marked where cut, like the sample's (wire.clip_text): the record always
fits in one line. Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import os
import re
import time
from typing import Any, Dict, List, Optional, Set, Tuple  # noqa: F401  (type comments)

from .procfs import CLOCK_TICKS, Stat, read_cmdline, read_container, read_stat, user_name  # noqa: F401
from .wire import MAX_LINE, VERSION, clip_arg, clip_list, clip_text, dumps

MAX_DETAIL_ARG = 4096  # characters of one argument; more: "<first 4096>…(N bytes)"
MAX_DETAIL_ARGS = 256  # arguments; more: a last entry "... (N more)"
MAX_DETAIL_COMMAND = 32768  # characters of the whole command line; the arguments past it are counted
MAX_PATH = 4096  # characters of cwd and exe (PATH_MAX)
MAX_FD_PATH = 256  # characters of a device file's path
MAX_CGROUP_LINES = 16
MAX_CGROUP_LINE = 512
MAX_FDS = 64  # device files listed by fd; the rest is counted in `fds_more`
MAX_CHAIN = 64  # parents listed, from the parent up
# So the answer always fits in one line (wire.MAX_LINE, 1 MiB), even when every character is sent as
# a 12-byte JSON escape: 32 Ki of command, 2 x 4 Ki of paths, 8 Ki of cgroup, 16 Ki of device paths.
ID_CHARS = 64  # a request's id, as a plan's
MAX_ENVIRON_BYTES = 64 << 10  # of /proc/PID/environ read; the rest is left out (`environ_cut`)
MAX_ENVIRON_VARS = 512  # variables sent; the rest are counted in `environ_more`
# Names whose values are sent only when asked again: any of these words in the name, upper-cased.
SECRET_WORDS = ("TOKEN", "SECRET", "KEY", "PASS", "CREDENTIAL", "AUTH", "COOKIE", "PRIVATE", "SIGNATURE")
_URL_PASSWORD = re.compile(r"^[a-z][a-z0-9+.-]*://[^/@\s:]*:[^/@\s]+@", re.IGNORECASE)


def clip_long_command(argv):
    # type: (List[str]) -> List[str]
    """A command line for the detail: at most MAX_DETAIL_ARGS arguments of at most MAX_DETAIL_ARG
    characters, MAX_DETAIL_COMMAND in all; every cut is marked, so nothing is lost silently."""
    out = []  # type: List[str]
    used = 0
    for i, arg in enumerate(argv):
        clipped = clip_arg(arg, MAX_DETAIL_ARG)
        if i == MAX_DETAIL_ARGS or used + len(clipped) > MAX_DETAIL_COMMAND:
            out.append("... (%d more)" % (len(argv) - i))
            break
        used += len(clipped)
        out.append(clipped)
    return out


def _read_text(path):
    # type: (str) -> Tuple[Optional[str], Optional[str]]
    """(text, None), or (None, why) when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace"), None
    except OSError as exc:
        return None, _why(exc)


def _link(path):
    # type: (str) -> Tuple[Optional[str], Optional[str]]
    try:
        return clip_text(os.readlink(path), MAX_PATH), None
    except OSError as exc:
        return None, _why(exc)


def _why(exc):
    # type: (OSError) -> str
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, FileNotFoundError):
        return "gone"
    return exc.strerror or type(exc).__name__


def _status_fields(text):
    # type: (str) -> Dict[str, str]
    out = {}  # type: Dict[str, str]
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key in ("Uid", "Threads", "NSpid", "VmRSS"):
            out[key] = value.strip()
    return out


def _parents(stat, stop, proc):
    # type: (Stat, Set[int], str) -> Tuple[List[Dict[str, Any]], str]
    """The parent chain of `stat`'s process, nearest first, and why it ends: "init" (PID 1 reached),
    "probe" (a process of the probe's own chain: the probe or its ancestors), "gone" (a parent
    could not be read), "none" (no parent: PID 0) or "limit"."""
    chain = []  # type: List[Dict[str, Any]]
    ppid = stat.ppid
    seen = set()  # type: Set[int]
    while len(chain) < MAX_CHAIN:
        if ppid <= 0 or ppid in seen:
            return chain, "none"
        seen.add(ppid)
        parent = read_stat(ppid, proc)
        if parent is None:
            chain.append({"pid": ppid, "start_time": None, "name": None})
            return chain, "gone"
        chain.append({"pid": ppid, "start_time": parent.start_time, "name": clip_text(parent.comm)})
        if ppid == 1:
            return chain, "init"
        if ppid in stop:
            return chain, "probe"
        ppid = parent.ppid
    return chain, "limit"


def _device_fds(pid, prefix, proc):
    # type: (int, str, str) -> Tuple[Optional[List[Dict[str, Any]]], int, Optional[int], Optional[str]]
    """(device files held as [{fd, path}], how many more, how many fds in all, why unreadable)."""
    base = "%s/%d/fd" % (proc, pid)
    try:
        names = os.listdir(base)
    except OSError as exc:
        return None, 0, None, _why(exc)
    held = []  # type: List[Dict[str, Any]]
    for name in sorted((n for n in names if n.isdigit()), key=int):
        try:
            target = os.readlink("%s/%s" % (base, name))
        except OSError:
            continue  # closed between listdir and readlink
        if target.startswith(prefix):
            held.append({"fd": int(name), "path": clip_text(target, MAX_FD_PATH)})
    return held[:MAX_FDS], max(0, len(held) - MAX_FDS), len(names), None


def secret_looking(name, value):
    # type: (str, str) -> bool
    """Whether a variable's value is kept back until the operator asks: a name with a secret's word
    in it (`GITHUB_TOKEN`, `db_password`, `MYSQL_PWD`), or a URL with a password in it."""
    upper = name.upper()
    if any(word in upper for word in SECRET_WORDS) or upper.endswith("_PWD"):
        return True
    return bool(_URL_PASSWORD.match(value))


def environ_refusal(uids, euid):
    # type: (Optional[Tuple[int, ...]], int) -> Optional[str]
    """Why this probe does not read a process's environment, or None: as /proc/PID/environ itself
    (ptrace's read check), root reads any, another user only a process whose every uid (real,
    effective, saved, filesystem) is its own; a setuid program's is not."""
    if euid == 0:
        return None
    if not uids:
        return "its owner could not be read: not read"
    if all(uid == euid for uid in uids):
        return None
    return "another user's process: only its own user or root may read its environment"


def read_environ(pid, proc, secrets):
    # type: (int, str, bool) -> Tuple[Optional[List[Dict[str, Any]]], int, bool, Optional[str]]
    """(the variables as [{name, value, secret}], how many more there are, whether the read was cut
    at MAX_ENVIRON_BYTES, why it could not be read). A secret-looking value is null unless
    `secrets`; undecodable bytes are replaced (U+FFFD)."""
    try:
        with open("%s/%d/environ" % (proc, pid), "rb") as f:
            raw = f.read(MAX_ENVIRON_BYTES + 1)
    except OSError as exc:
        return None, 0, False, _why(exc)
    cut = len(raw) > MAX_ENVIRON_BYTES
    items = raw[:MAX_ENVIRON_BYTES].split(b"\0")
    if cut or (items and items[-1]):
        cut = True
        items = items[:-1]  # the last one was cut in the middle: left out whole
    items = [item for item in items if item]
    out = []  # type: List[Dict[str, Any]]
    for item in items[:MAX_ENVIRON_VARS]:
        name, _, value = item.decode("utf-8", "replace").partition("=")
        secret = secret_looking(name, value)
        out.append({"name": name, "value": None if secret and not secrets else value, "secret": secret})
    return out, max(0, len(items) - MAX_ENVIRON_VARS), cut, None


def _fit(out):
    # type: (Dict[str, Any]) -> None
    """Leave out environment variables from the end until the record fits one line (its strings'
    escapes can make it up to six times the bytes read); says so in `environ_cut`."""
    env = out.get("environ")
    if not env:
        return
    size = len(dumps(out))
    while env and size > MAX_LINE - 1024:
        dropped = env[len(env) // 2 :]
        del env[len(env) // 2 :]
        size -= sum(len(dumps(e)) + 1 for e in dropped)
        out["environ_more"] += len(dropped)
        out["environ_cut"] = True


def request_problem(record):
    # type: (Dict[str, Any]) -> Optional[str]
    """Why a `detail` request cannot be answered (None when it can)."""
    pid, start = record.get("pid"), record.get("start_time")
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < 1 << 22:
        return "'pid' must be a PID (1 to 4194303)"
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        return "'start_time' must be the process's start time (clock ticks since boot)"
    for key in ("environ", "secrets"):
        if key in record and not isinstance(record[key], bool):
            return "'%s' must be true or false" % key
    return None


def request_id(record):
    # type: (Dict[str, Any]) -> Optional[str]
    rid = record.get("id")
    return rid if isinstance(rid, str) and 0 < len(rid) <= ID_CHARS else None


def _answer(record):
    # type: (Dict[str, Any]) -> Dict[str, Any]
    """What every `detail` answer begins with: the request it answers, `ok` until found otherwise."""
    return {
        "type": "detail",
        "v": VERSION,
        "id": request_id(record),
        "pid": record.get("pid") if isinstance(record.get("pid"), int) else None,
        "start_time": record.get("start_time") if isinstance(record.get("start_time"), int) else None,
        "result": "ok",
        "message": None,
    }


def describe(record, prefix, probe_pid, stop, argv=None, proc="/proc", boot=0.0, euid=None):
    # type: (Dict[str, Any], str, int, Set[int], Optional[List[str]], str, float, Optional[int]) -> Dict[str, Any]
    """The `detail` answer to `record` (a request: pid, start_time, id; `environ` and `secrets`
    to read the environment). `prefix`: the device files to list (the reader's); `probe_pid`,
    `stop`: the probe and its chain (where the parents end); `argv`: the probe's own options (its
    command line when asked about itself); `euid`: the probe's (os.geteuid() by default)."""
    out = _answer(record)
    problem = request_problem(record)
    if problem is not None:
        out.update(result="refused", message="detail: %s" % problem)
        return out
    pid, start = record["pid"], record["start_time"]
    stat = read_stat(pid, proc)
    gone = _gone(stat, start)
    if gone is not None:
        out.update(result=gone[0], message=gone[1])
        return out
    assert stat is not None  # _gone said it is the process asked about
    unreadable = {}  # type: Dict[str, str]
    command = read_cmdline(pid, proc)
    if pid == probe_pid:
        command = ["gputui-probe", *(argv or [])]  # shipped over SSH, its cmdline is the bootstrap
    status_text, why = _read_text("%s/%d/status" % (proc, pid))
    if why:
        unreadable["status"] = why
    status = _status_fields(status_text or "")
    uid = _first_int(status.get("Uid"))
    cwd, exe, cgroup = _places(pid, proc, unreadable)
    fds, more, fd_count, why = _device_fds(pid, prefix, proc)
    if why:
        unreadable["fds"] = why
    parents, end = _parents(stat, stop | {probe_pid}, proc)
    environ = None  # type: Optional[Dict[str, Any]]
    if record.get("environ") is True:
        environ = _environ(pid, proc, status, record.get("secrets") is True, euid, unreadable)
    now = time.time()
    started = boot + stat.start_time / float(CLOCK_TICKS) if boot else None
    # Read last: a process that exited (and whose PID was taken) while it was read is not described.
    gone = _gone(read_stat(pid, proc), start)
    if gone is not None:
        out.update(result=gone[0], message=gone[1])
        return out
    nspid = [int(p) for p in (status.get("NSpid") or "").split() if p.isdigit()]
    out.update(
        name=clip_text(stat.comm),
        command=clip_long_command(command),
        cwd=cwd,
        exe=exe,
        uid=uid,
        user=clip_text(user_name(uid)),
        state=stat.state,
        ppid=stat.ppid,
        pgid=stat.pgid,
        sid=stat.sid,
        threads=_first_int(status.get("Threads")),
        started=round(started, 2) if started is not None else None,
        elapsed=round(now - started, 1) if started is not None else None,
        cpu_time=round(stat.cpu_ticks / float(CLOCK_TICKS), 2),
        rss=stat.rss if stat.state != "Z" else 0,
        nspid=nspid[:32],
        cgroup=clip_list(cgroup, MAX_CGROUP_LINES),  # type: ignore[arg-type]
        container=clip_text(read_container(pid, proc)),
        fds=fds,
        fds_more=more,
        fd_count=fd_count,
        parents=parents,
        parents_end=end,
        unreadable=unreadable,
    )
    if environ is not None:
        out.update(environ)
        _fit(out)
    return out


def _places(pid, proc, unreadable):
    # type: (int, str, Dict[str, str]) -> Tuple[Optional[str], Optional[str], List[Optional[str]]]
    """The process's working directory, executable and cgroup lines; what could not be read goes
    to `unreadable`, with why."""
    cwd, why = _link("%s/%d/cwd" % (proc, pid))
    if why:
        unreadable["cwd"] = why
    exe, why = _link("%s/%d/exe" % (proc, pid))
    if why:
        unreadable["exe"] = why
    cgroup_text, why = _read_text("%s/%d/cgroup" % (proc, pid))
    if why:
        unreadable["cgroup"] = why
    cgroup = [clip_text(line, MAX_CGROUP_LINE) for line in (cgroup_text or "").splitlines() if line]
    return cwd, exe, cgroup


def _environ(pid, proc, status, secrets, euid, unreadable):
    # type: (int, str, Dict[str, str], bool, Optional[int], Dict[str, str]) -> Optional[Dict[str, Any]]
    """The environment asked for, when the probe may show it to this caller (environ_refusal);
    else None, and why in `unreadable`."""
    uids = tuple(int(u) for u in (status.get("Uid") or "").split() if u.isdigit())
    why = environ_refusal(uids or None, os.geteuid() if euid is None else euid)
    environ = None  # type: Optional[Dict[str, Any]]
    if why is None:
        env, env_more, env_cut, why = read_environ(pid, proc, secrets)
        if env is not None:
            environ = {"environ": env, "environ_more": env_more, "environ_cut": env_cut}
    if why:
        unreadable["environ"] = why
    return environ


def _gone(stat, start):
    # type: (Optional[Stat], int) -> Optional[Tuple[str, str]]
    if stat is None:
        return "exited", "no such process: it has exited"
    if stat.start_time != start:
        return "pid-reused", "the PID now belongs to another process (started at %d, not %d)" % (
            stat.start_time,
            start,
        )
    return None


def _first_int(text):
    # type: (Optional[str]) -> Optional[int]
    first = (text or "").split()[:1]
    return int(first[0]) if first and first[0].isdigit() else None

"""Reading /proc: one process's stat, status, command line; the host's facts.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts. Every reader here returns None for a
process that has gone (a PID can vanish between listing /proc and reading it) instead of raising;
`read_stat_strict` alone raises for failures other than "no such process", for the kill engine.
"""

import errno
import os
import pwd
from typing import Dict, List, NamedTuple, Optional  # noqa: F401  (type comments)

PROC = "/proc"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
STAT_SIZE = 2048  # /proc/PID/stat: 52 numbers and a command name of at most 64 bytes
_READ = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


class Stat(NamedTuple):
    """The fields of /proc/PID/stat that gputui uses."""

    pid: int
    comm: str
    state: str
    ppid: int
    pgid: int
    sid: int
    flags: int
    cpu_ticks: int  # utime + stime
    start_time: int  # clock ticks since boot: with the pid, a process's identity
    rss: int  # bytes


PF_KTHREAD = 0x00200000  # include/linux/sched.h: the process is a kernel thread


def parse_stat(text):
    # type: (str) -> Stat
    """Parse the text of /proc/PID/stat. The command name sits in parentheses and may itself hold
    spaces and parentheses, so split on the LAST ')'."""
    open_paren = text.index("(")
    close_paren = text.rindex(")")
    pid = int(text[:open_paren])
    comm = text[open_paren + 1 : close_paren]
    f = text[close_paren + 2 :].split()
    # f[0] is field 3 (state); field N is f[N - 3].
    return Stat(
        pid=pid,
        comm=comm,
        state=f[0],
        ppid=int(f[1]),
        pgid=int(f[2]),
        sid=int(f[3]),
        flags=int(f[6]),
        cpu_ticks=int(f[11]) + int(f[12]),
        start_time=int(f[19]),
        rss=int(f[21]) * PAGE_SIZE,
    )


def read_head(path, size):
    # type: (str, int) -> Optional[bytes]
    """The first `size` bytes of a /proc file in three system calls (a file object takes twice as
    many, and its buffering: a third more time per read), or None when it cannot be read. /proc's
    one-record files (stat, schedstat, loadavg) come whole in one read of a large enough buffer."""
    try:
        fd = os.open(path, _READ)
    except OSError:
        return None
    try:
        return os.read(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_stat(pid, proc=PROC):
    # type: (int, str) -> Optional[Stat]
    raw = read_head("%s/%d/stat" % (proc, pid), STAT_SIZE)
    if not raw:
        return None
    try:
        return parse_stat(raw.decode("utf-8", "replace"))
    except (ValueError, IndexError):
        return None  # torn by an exit mid-read


def start_time(pid, proc=PROC):
    # type: (int, str) -> Optional[int]
    stat = read_stat(pid, proc)
    return stat.start_time if stat else None


class Status(NamedTuple):
    uid: Optional[int]
    nspid: Optional[List[int]]


def parse_status(text):
    # type: (str) -> Status
    uid = None
    nspid = None
    for line in text.splitlines():
        if line.startswith("Uid:"):
            uid = int(line.split()[1])  # the real uid: who started it
        elif line.startswith("NSpid:"):
            nspid = [int(p) for p in line.split()[1:]]
    return Status(uid, nspid)


def read_status(pid, proc=PROC):
    # type: (int, str) -> Optional[Status]
    try:
        with open("%s/%d/status" % (proc, pid), "rb") as f:
            return parse_status(f.read().decode("utf-8", "replace"))
    except (OSError, ValueError):
        return None


def parse_cmdline(raw):
    # type: (bytes) -> List[str]
    return [part.decode("utf-8", "replace") for part in raw.rstrip(b"\0").split(b"\0")] if raw else []


def read_cmdline(pid, proc=PROC):
    # type: (int, str) -> List[str]
    try:
        with open("%s/%d/cmdline" % (proc, pid), "rb") as f:
            return parse_cmdline(f.read())
    except OSError:
        return []


def read_cgroup(pid, proc=PROC):
    # type: (int, str) -> Optional[str]
    """The text of /proc/PID/cgroup (at most 64 KiB), or None when it cannot be read."""
    try:
        with open("%s/%d/cgroup" % (proc, pid), "rb") as f:
            return f.read(65536).decode("utf-8", "replace")
    except OSError:
        return None


def cgroup_paths(text):
    # type: (Optional[str]) -> List[str]
    """The paths of /proc/PID/cgroup's lines ("0::/a/b" -> "/a/b"), the unified (v2) line first."""
    paths = []  # type: List[str]
    for line in (text or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            if parts[0] == "0" and parts[1] == "":
                paths.insert(0, parts[2])
            else:
                paths.append(parts[2])
    return paths


def _short_id(text):
    # type: (str) -> str
    """A container id as its tools show it: the first 12 characters of the hex id."""
    return text[:12]


def _pod_uid(part):
    # type: (str) -> Optional[str]
    """The pod uid of one cgroup path component: `kubepods-burstable-pod<uid>.slice`,
    `kubepods-pod<uid>.slice` (systemd driver: the uid's "-" written "_"), `pod<uid>` (cgroupfs
    driver); a uid is a UUID, or 32 hex digits for a static pod. None for any other component."""
    name = part[: -len(".slice")] if part.endswith(".slice") else part
    if name.startswith("pod"):
        uid = name[3:]
    elif "-pod" in name and "kubepods" in name:
        uid = name.rsplit("-pod", 1)[1]
    else:
        return None
    uid = uid.replace("_", "-").lower()
    ok = 0 < len(uid) <= 64 and all(c in "0123456789abcdef-" for c in uid)
    return uid if ok else None


def container_of(path):
    # type: (str) -> Optional[str]
    """The container a cgroup path puts its process in, named as people name it; None for none.

    From the host's side (docs/PROTOCOL.md PROC `container`): `lxc/129` (LXC, Proxmox: /lxc/129/...,
    /lxc.payload.129/..., /lxc.payload/129/...), `docker/<12 hex>` (/system.slice/docker-<id>.scope,
    /docker/<id>), `podman/<12 hex>` (libpod-<id>.scope), `pod/<uid>` (Kubernetes: kubepods...pod<uid>...),
    `machine/<name>` (systemd-nspawn: machine-<name>.scope). The outermost wins (Docker in an LXC
    guest is the guest's). An LXC monitor and a conmon are outside their container: None."""
    parts = [p for p in path.split("/") if p]
    for i, part in enumerate(parts):
        after = parts[i + 1] if i + 1 < len(parts) else ""
        if part.startswith(("lxc.monitor", "libpod-conmon-")):
            return None
        if part.startswith("lxc.payload."):
            return "lxc/" + part[len("lxc.payload.") :]
        if part in ("lxc", "lxc.payload") and after:
            return "lxc/" + after
        if part.startswith("docker-") and part.endswith(".scope"):
            return "docker/" + _short_id(part[len("docker-") : -len(".scope")])
        if part == "docker" and after:
            return "docker/" + _short_id(after)
        if part.startswith("libpod-"):
            ident = part[len("libpod-") :]
            return "podman/" + _short_id(ident[: -len(".scope")] if ident.endswith(".scope") else ident)
        if "kubepods" in part:  # kubepods.slice, /kubepods/, kubelet-kubepods.slice (a kubelet's cgroup root)
            if any(p.startswith("crio-conmon-") for p in parts[i:]):
                return None  # CRI-O's monitor sits in the pod's slice, outside its containers
            uid = next((u for u in (_pod_uid(p) for p in parts[i:]) if u), None)
            return "pod/" + uid if uid else None  # kubepods.slice itself, a QoS class: no pod
        if part.startswith("machine-") and part.endswith(".scope"):
            return "machine/" + part[len("machine-") : -len(".scope")]
    return None


def container_in(text):
    # type: (Optional[str]) -> Optional[str]
    """The container of a process from the text of its /proc/PID/cgroup (container_of, line by line)."""
    for path in cgroup_paths(text):
        found = container_of(path)
        if found is not None:
            return found[:256]
    return None


def slurm_job_in(text):
    # type: (Optional[str]) -> Optional[str]
    """The Slurm job id of a process (`job_<id>` in its cgroup path: cgroup v2
    /system.slice/slurmstepd.scope/job_4711/step_0/user/task_0, v1 /slurm/uid_1000/job_4711/...)."""
    for path in cgroup_paths(text):
        for part in path.split("/"):
            if part.startswith("job_") and part[4:].isdigit() and part[4:].isascii() and len(part) < 24:
                return part[4:]
    return None


# Scopes and services that are not a unit of work: a login session (its shell is the boundary), the
# user's service manager, init itself, a container's or Slurm's scope (bounded apart).
_NOT_UNITS = ("session-", "user@", "init.scope", "docker-", "libpod-", "cri-containerd-", "crio-",
              "containerd.", "slurmstepd.scope", "machine-")  # fmt: skip


def unit_in(text):
    # type: (Optional[str]) -> Optional[str]
    """The systemd unit a process runs in: the last `*.service` or `*.scope` component of its cgroup
    path (the unified line, else the name=systemd one), unless that is a session, the user manager,
    init, a container's or Slurm's scope (then None)."""
    lines = [line.split(":", 2) for line in (text or "").splitlines()]
    paths = [p[2] for p in lines if len(p) == 3 and p[0] == "0" and p[1] == ""]
    paths += [p[2] for p in lines if len(p) == 3 and p[1] == "name=systemd"]
    for path in paths:
        for part in reversed([p for p in path.split("/") if p]):
            if part.endswith(".service") or part.endswith(".scope"):
                return None if part.startswith(_NOT_UNITS) else part[:256]
    return None


def read_container(pid, proc=PROC):
    # type: (int, str) -> Optional[str]
    """The container a process runs in, from its cgroup path (container_of), or None."""
    return container_in(read_cgroup(pid, proc))


_users = {}  # type: Dict[int, str]


def user_name(uid):
    # type: (Optional[int]) -> Optional[str]
    if uid is None:
        return None
    name = _users.get(uid)
    if name is None:
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            name = str(uid)
        _users[uid] = name
    return name


def boot_time(proc=PROC):
    # type: (str) -> float
    """Wall time of boot in seconds, to turn start times (ticks since boot) into elapsed times."""
    with open(proc + "/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return float(line.split()[1])
    return 0.0


def uptime(proc=PROC):
    # type: (str) -> float
    with open(proc + "/uptime") as f:
        return float(f.read().split()[0])


def list_pids(proc=PROC):
    # type: (str) -> List[int]
    return [int(name) for name in os.listdir(proc) if name.isdigit()]


def ancestors(pid, proc=PROC):
    # type: (int, str) -> List[int]
    """PIDs from the parent of `pid` up to PID 1 (the probe uses it to protect its own chain)."""
    chain = []
    seen = set()
    stat = read_stat(pid, proc)
    while stat is not None and stat.ppid > 0 and stat.ppid not in seen:
        chain.append(stat.ppid)
        seen.add(stat.ppid)
        stat = read_stat(stat.ppid, proc)
    return chain


def in_init_pid_namespace(proc=PROC):
    # type: (str) -> bool
    """Whether this /proc shows the host's PID namespace, the one NVML's PIDs belong to.

    kthreadd (PID 2, parent 0) and every kernel thread exist only in the initial PID namespace, so
    seeing it means a PID missing from /proc is dead, not merely in another namespace."""
    stat = read_stat(2, proc)
    return stat is not None and stat.ppid == 0 and bool(stat.flags & PF_KTHREAD)


def in_container(proc=PROC):
    # type: (str) -> bool
    """Best guess whether this probe runs inside a container (so NVML's host PIDs are foreign here)."""
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return True
    try:
        with open(proc + "/1/environ", "rb") as f:
            if b"container=" in f.read():
                return True
    except OSError:
        pass
    return read_container(1, proc) is not None


def read_stat_strict(pid, proc=PROC):
    # type: (int, str) -> Optional[Stat]
    """Like read_stat, but None means only "no such process": any other failure (out of file
    descriptors, EACCES, an unreadable /proc) raises OSError, so the kill engine never takes a
    process it could not look at for one that has exited."""
    try:
        with open("%s/%d/stat" % (proc, pid), "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ESRCH):
            return None
        raise
    try:
        return parse_stat(text)
    except (ValueError, IndexError):
        return None  # torn by an exit mid-read


def close_quietly(fd):
    # type: (int) -> None
    """Close a descriptor the probe opened (a pidfd, a /proc file), whatever close() says: the
    descriptor is gone either way (Linux frees it even on EINTR), and nothing could be done."""
    try:
        os.close(fd)
    except OSError:
        pass


def holds_device(pid, prefix, proc=PROC):
    # type: (int, str, str) -> Optional[bool]
    """Whether `pid` holds a file under `prefix` now; None when its fds cannot be read. Stops at the
    first one (a CUDA process opens the device files early, at low fd numbers)."""
    base = "%s/%d/fd" % (proc, pid)
    try:
        names = sorted(os.listdir(base), key=lambda n: int(n) if n.isdigit() else 0)
    except OSError:
        return None
    for name in names:
        try:
            if os.readlink("%s/%s" % (base, name)).startswith(prefix):
                return True
        except OSError:
            continue
    return False

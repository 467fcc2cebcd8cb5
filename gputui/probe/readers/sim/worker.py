"""The program behind every process of the simulated GPU backend (the sim package).

WORKER_SOURCE is written to `<sim>/bin/<name>.py` and run as `python3 -S <sim>/bin/<name>.py ARGS`,
so `ps` shows realistic command lines. It is a string, not a module, because on a remote host it runs
outside the gputui package. It must stay stdlib-only and Python 3.8 compatible. client.py also
executes it in-process to reuse `open_devices`, `create_context` and `start_time`. One program, so
one module: its parts share the helpers at its top.

One program, two parts:
- the session process (env GPUTUI_SIM_INIT): a child subreaper that starts every job on request and
  reaps them, and the orphans they leave (a ghost's data-loader child, a zombie whose parent died), so
  nothing of the sim lingers as a zombie even where PID 1 does not reap;
- a job (env GPUTUI_SIM_JOB): opens every device file, makes its CUDA contexts, then plays its role.

Both report to the reader on the status socket (SOCK_SEQPACKET, inherited by every job, even one run
as another user): one JSON message per write, to which the kernel adds the writer's PID
(SCM_CREDENTIALS). The reader takes "spawned" from the session only and a job's "ready" or "error"
from that job only; and it signals a reported PID only while it is below the session
(session.py, processes.py).

The simulated driver: a context is a file `<sim>/ctx/<uid>/<gpu>-<pid>-<serial>.ctx` (in the private
directory of the process's user, made by the reader) on which the owner holds flock(LOCK_SH). It
records the process's PID and start time, to which the reader binds it. flock locks belong to the
open file description, so every process holding a copy of that fd (a forked child included) keeps
the memory; when the last one exits, the reader's watcher gets LOCK_EX and releases the memory, as
the real driver does.
"""

WORKER_SOURCE = r'''
import fcntl
import json
import mmap
import os
import select
import signal
import sys
import time

PR_SET_NAME = 15
PR_SET_CHILD_SUBREAPER = 36
DEVICE_SIZE = 4096
# Interpreters to try when the one we were given cannot be run by the job's user (e.g. under /root).
FALLBACK_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3")
CONTEXT_ROLES = (
    "busy", "idle", "ignore-term", "ghost", "zombie", "workers", "stopped", "mps-server", "mps-client",
)
RESTART_S = 0.5  # a supervisor starts a new worker this long after the last one ended (its child's restart_s)

_keep = []  # fds and mappings held for the life of the process: that is what "holding" means


def start_time(pid="self"):
    """Field 22 of /proc/PID/stat (clock ticks since boot), or None when the process is gone."""
    try:
        with open("/proc/%s/stat" % pid, "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2 :].split()[19])


def open_devices(directory, mapped=False):
    """Open every device file of the sim, as CUDA and NVML do; return the fds.

    A CUDA process also maps nvidiaN, nvidiactl and nvidia-uvm (`mapped`); an NVML client does not."""
    dev = os.path.join(directory, "dev")
    fds = []
    for root, dirs, files in os.walk(dev):
        dirs.sort()
        for name in sorted(files):
            fd = os.open(os.path.join(root, name), os.O_RDWR)
            fds.append(fd)
            if mapped and root == dev and name != "nvidia-uvm-tools":
                _keep.append(mmap.mmap(fd, DEVICE_SIZE, mmap.MAP_SHARED, mmap.PROT_READ))
    return fds


def create_context(directory, gpu, nbytes, util=0, extra=None):
    """Allocate `nbytes` on `gpu` for this process; return the fd that holds the memory.

    `extra`: more of what the driver knows of the context: "gi" and "ci" (the MIG instance it runs
    in), "mps" (true: an MPS client's, listed by NVML's MPS process list).

    It goes to this user's own directory, ctx/<euid>/ (the reader makes it; no other user writes
    there; all may read, as all may ask NVML), and records the PID and start time of this process: the reader believes it only while
    that PID is this process (or, once seen alive, while it is dead: a ghost).
    The file is locked before it gets its visible name, so a watcher never sees an unlocked fresh
    context. Closing the fd in every process that has it (exit does) frees the memory."""
    ctx = os.path.join(directory, "ctx", str(os.geteuid()))
    pid = os.getpid()
    base = "%d-%d-%d%s" % (gpu, pid, int(time.monotonic() * 1e6) % 1000000, os.urandom(3).hex())
    tmp = os.path.join(ctx, "." + base + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        record = dict(extra or {}, gpu=gpu, pid=pid, start=start_time(), bytes=nbytes, util=util)
        os.write(fd, json.dumps(record).encode())
        fcntl.flock(fd, fcntl.LOCK_SH)
        os.rename(tmp, os.path.join(ctx, base + ".ctx"))
    except BaseException:
        os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return fd


def report(status, message):
    """One JSON line to the reader: one message on the status socket, sent whole, with our PID."""
    os.write(status, (json.dumps(message) + "\n").encode())


def error_message(serial, exc):
    return {"serial": serial, "event": "error", "message": "%s: %s" % (type(exc).__name__, exc)}


def prctl(option, arg):
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, arg, 0, 0, 0) == 0
    except Exception:
        return False


def set_comm(name):
    """Rename the process (/proc/PID/comm, what `ps -o comm` and monitor detection read)."""
    raw = name.encode()[:15]
    if prctl(PR_SET_NAME, raw):
        return
    try:
        with open("/proc/self/comm", "wb") as f:
            f.write(raw)
    except OSError:
        pass


def burn(ms):
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        pass


def live_until_eof(lifeline, burn_ms=0.0, lifetime=None):
    """Sleep until the reader is gone (EOF on the lifeline: nobody ever writes to it), then exit.

    This is what makes every sim process go away when its reader closes or dies by any means,
    SIGKILL included, even a ghost's orphaned child. A busy job burns `burn_ms` of CPU per 100 ms.
    `lifetime`: exit after that many seconds as well (a benchmark that ends by itself).
    poll, not select: select cannot watch an fd numbered 1024 or more (fd numbers come from the reader)."""
    poller = select.poll()
    poller.register(lifeline, select.POLLIN)
    end = time.monotonic() + lifetime if lifetime else None
    while True:
        timeout = 100 if burn_ms else None
        if end is not None:
            left = max(0, int((end - time.monotonic()) * 1000) + 1)
            timeout = left if timeout is None else min(timeout, left)
        if poller.poll(timeout):
            os._exit(0)
        if end is not None and time.monotonic() >= end:
            os._exit(0)
        if burn_ms:
            burn(burn_ms)


# -- jobs ---------------------------------------------------------------------------------------


def fork_ghost_child(lifeline):
    """A data-loader worker: inherits every fd, context locks included, makes no context of its
    own, and stays in the parent's process group and session (no setsid)."""
    pid = os.fork()
    if pid == 0:
        try:
            live_until_eof(lifeline)
        finally:
            os._exit(0)
    return pid


def fork_zombie_child(cfg):
    """A child that allocates and exits; we never reap it, so it stays in state Z."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            open_devices(cfg["dir"], mapped=True)
            for gpu in cfg["gpus"]:
                create_context(cfg["dir"], gpu, cfg["memory"], cfg["util"])
        except BaseException:
            code = 1
        os._exit(code)
    # Wait until it has exited without reaping it, so it is a zombie when we report ready.
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    return pid


# -- a launcher, a supervisor and their children -------------------------------------------------


def start_child(cfg, gpu, index, lifeline):
    """Start one CUDA-like child (a launcher's rank, a supervisor's worker): a new program
    (`python3 -S <sim>/bin/<child name> ARGS`), as torchrun and supervisors start theirs, that opens the
    device files, makes its context on `gpu`, says so on a pipe, and lives like a busy job. Returns
    its PID once it is ready (or has died trying)."""
    child = cfg["child"]
    ready_r, ready_w = os.pipe()
    sub = dict(cfg, role="rank", gpus=[gpu], ready_fd=ready_w)
    argv = [sys.executable, "-S", os.path.join(cfg["dir"], "bin", child["name"])]
    argv += [a.replace("{rank}", str(index)) for a in child.get("argv") or []]
    env = dict(os.environ, GPUTUI_SIM_JOB=json.dumps(sub))
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready_r)
            os.set_inheritable(ready_w, True)
            os.execve(sys.executable, argv, env)
        finally:
            os._exit(127)
    os.close(ready_w)
    try:
        os.read(ready_r, 1)  # EOF without a byte: it died before it was ready
    finally:
        os.close(ready_r)
    return pid


def rank_main(cfg, lifeline):
    """A rank or worker: hold the devices and a context, say ready to the parent, live until EOF."""
    _keep.extend(open_devices(cfg["dir"], mapped=True))
    for gpu in cfg["gpus"]:
        _keep.append(create_context(cfg["dir"], gpu, cfg["memory"], cfg["util"]))
    os.write(cfg["ready_fd"], b"r")
    os.close(cfg["ready_fd"])
    burn_ms = max(0.5, 2.0 * cfg["util"] / 100.0) if cfg["util"] > 0 else 0.0
    live_until_eof(lifeline, burn_ms)


def reap(pid):
    """Whether our child `pid` has exited (reaped now); never blocks."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


def watch_children(lifeline, status, message, on_signal, step):
    """A launcher's or a supervisor's life: SIGTERM, SIGINT and SIGHUP go to `on_signal`, then it
    reports ready (`message`); every 50 ms `step()` looks after the children, until it returns true
    or the reader is gone (EOF on the lifeline); then exit. The handlers come before the report: a
    signal sent as soon as the job is ready must reach its children, not end it alone."""
    for name in ("SIGTERM", "SIGINT", "SIGHUP"):
        signal.signal(getattr(signal, name), on_signal)
    report(status, message)
    poller = select.poll()
    poller.register(lifeline, select.POLLIN)
    while not poller.poll(50):
        if step():
            break
    os._exit(0)


def launcher_main(cfg, lifeline, status, message):
    """Like torchrun: holds no device file; starts a rank per GPU, forwards SIGTERM, SIGINT and SIGHUP
    to them, and once any rank has ended, stops the others and exits when all have (no restarts)."""
    ranks = [start_child(cfg, gpu, i, lifeline) for i, gpu in enumerate(cfg["gpus"])]
    live = set(ranks)
    message["workers"] = [[pid, start_time(pid)] for pid in ranks]

    def forward(signum, frame):
        for pid in sorted(live):
            try:
                os.kill(pid, signum)  # our unreaped child: its PID cannot have been reused
            except OSError:
                pass

    tearing_down = [False]

    def step():
        ended = [pid for pid in sorted(live) if reap(pid)]
        live.difference_update(ended)
        if ended and live and not tearing_down[0]:
            tearing_down[0] = True  # a rank ended: the group is over (torchrun's max_restarts=0)
            forward(signal.SIGTERM, None)
        return not live

    watch_children(lifeline, status, message, forward, step)


def supervisor_main(cfg, lifeline, status, message):
    """Like supervisord or a `Restart=always` unit: holds no device file; runs one worker and starts
    a new one its child's `restart_s` (else RESTART_S) after it ends. SIGTERM, SIGINT or SIGHUP: passed to the worker, then exit
    once it has ended (no restart)."""
    current = [start_child(cfg, cfg["gpus"][0], 0, lifeline)]
    message["workers"] = [[current[0], start_time(current[0])]]
    stopping = [False]

    def stop(signum, frame):
        stopping[0] = True
        if current[0] is not None:
            try:
                os.kill(current[0], signum)
            except OSError:
                pass

    ended_at = [0.0]
    restart_s = float(cfg["child"].get("restart_s") or RESTART_S)

    def step():
        if current[0] is not None and reap(current[0]):
            current[0] = None
            ended_at[0] = time.monotonic()
        if current[0] is None:
            if stopping[0]:
                return True
            if time.monotonic() - ended_at[0] >= restart_s:
                current[0] = start_child(cfg, cfg["gpus"][0], 0, lifeline)
        return False

    watch_children(lifeline, status, message, stop, step)


def job_main(cfg, lifeline, status):
    role = cfg["role"]
    # A job started from a terminal turns SIGINT into KeyboardInterrupt. Python leaves SIGINT ignored
    # when it starts with it ignored (under `nohup cmd &`, say), and the sim must not depend on how
    # its reader was started: say what SIGINT does here.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for name in ("SIGHUP", "SIGUSR1"):  # ignored under nohup; a job from a terminal dies of them
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    if role == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if cfg.get("comm"):
        set_comm(cfg["comm"])
    if role == "rank":
        return rank_main(cfg, lifeline)
    message = {"serial": cfg["serial"], "event": "ready", "pid": os.getpid(), "start_time": start_time()}
    if role == "launcher":
        return launcher_main(cfg, lifeline, status, message)
    if role == "supervisor":
        return supervisor_main(cfg, lifeline, status, message)
    if role == "neighbour":
        # Another guest's job, as a probe in this container sees it: its memory, and nothing of it
        # here (its device files are the other guest's; the reader lists none of its contexts).
        for gpu in cfg["gpus"]:
            _keep.append(create_context(cfg["dir"], gpu, cfg["memory"], cfg["util"], {"outside": True}))
        report(status, message)
        return live_until_eof(lifeline, 0.0)
    uses_gpu = role in CONTEXT_ROLES
    _keep.extend(open_devices(cfg["dir"], mapped=uses_gpu))
    extra = {}
    if cfg.get("mig"):
        extra.update(gi=cfg["mig"][0], ci=cfg["mig"][1])
    if role == "mps-client":
        extra["mps"] = True
    if uses_gpu:
        for gpu in cfg["gpus"]:
            _keep.append(create_context(cfg["dir"], gpu, cfg["memory"], cfg["util"], extra))
    if role == "ghost":
        child = fork_ghost_child(lifeline)
        message.update(child_pid=child, child_start_time=start_time(child))
        report(status, message)
        os._exit(0)  # the parent dies by itself; its child keeps the memory: NVML lists a dead PID
    if role == "zombie":
        child = fork_zombie_child(cfg)
        message.update(child_pid=child, child_start_time=start_time(child))
    if role == "workers":
        # A launcher with its data-loader workers: forked after the context is made, they hold its
        # fds and stay in its process group; the parent lives on beside them.
        kids = [fork_ghost_child(lifeline) for _ in range(int(cfg.get("workers") or 3))]
        message["workers"] = [[kid, start_time(kid)] for kid in kids]
    report(status, message)
    if role == "stopped":
        # A job left stopped (Ctrl+Z, SIGSTOP) with its memory held: it acts on nothing until
        # SIGCONT (a SIGKILL still ends it: the sim's stop and its session rely on that).
        os.kill(os.getpid(), signal.SIGSTOP)
    burn_ms = max(0.5, 2.0 * cfg["util"] / 100.0) if uses_gpu and cfg["util"] > 0 else 0.0
    live_until_eof(lifeline, burn_ms, cfg.get("lifetime"))


# -- the session process ------------------------------------------------------------------------


def list_fds():
    return [int(n) for n in os.listdir("/proc/self/fd")]


def exec_job(request, lifeline, status):
    """In the forked child: become a job (own session, maybe another user), then exec it."""
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # SIG_IGN survives exec: a zombie needs SIG_DFL
    null = os.open(os.devnull, os.O_RDWR)
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(log, 2)
    for fd in list_fds():
        if fd > 2 and fd not in (lifeline, status):
            try:
                os.close(fd)
            except OSError:
                pass
    os.set_inheritable(lifeline, True)
    os.set_inheritable(status, True)
    uid, gid = request.get("uid"), request.get("gid")
    if uid is not None and uid != os.getuid():
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    env = dict(request["env"], GPUTUI_SIM_FDS="%d,%d" % (lifeline, status))
    argv = request["argv"]
    error = None
    for exe in [argv[0]] + [p for p in FALLBACK_PYTHONS if p != argv[0]]:
        try:
            os.execve(exe, [exe] + argv[1:], env)
        except OSError as exc:
            error = exc
    raise error


def start_job(request, lifeline, status):
    serial = request["serial"]
    # The child waits (EOF on `gate`) until "spawned" is sent: the reader takes a job's reports only
    # from the PID the session reported, so that report must come first.
    gate, opened = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(opened)
            while os.read(gate, 1):
                pass
            os.close(gate)
            exec_job(request, lifeline, status)
        except BaseException as exc:
            try:
                report(status, error_message(serial, exc))
            finally:
                os._exit(127)
    os.close(gate)
    try:
        report(status, {"serial": serial, "event": "spawned", "pid": pid, "start_time": start_time(pid)})
    finally:
        os.close(opened)


def children():
    me = os.getpid()
    try:
        with open("/proc/%d/task/%d/children" % (me, me)) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        pass
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name, "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat[stat.rindex(b")") + 2 :].split()[1]) == me:
                found.append(int(name))
    return found


def shutdown(cfg):
    """Kill and reap every descendant (orphans come to us: we are a subreaper), then remove the sim
    directory if the reader could not (it died)."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # from now on reap explicitly, to know when all are gone
    while True:
        for pid in children():
            try:
                os.kill(pid, signal.SIGKILL)  # our unreaped child: its PID cannot have been reused
            except OSError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    directory = cfg["dir"]
    if os.path.basename(directory).startswith("gputui-sim-") and os.path.exists(
        os.path.join(directory, "sim.json")
    ):
        import shutil

        shutil.rmtree(directory, ignore_errors=True)


def init_main(cfg):
    if not prctl(PR_SET_CHILD_SUBREAPER, 1):
        sys.stderr.write("gputui sim: PR_SET_CHILD_SUBREAPER failed; orphans go to PID 1\n")
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps our children the moment they exit
    lifeline, commands, status = cfg["lifeline"], cfg["commands"], cfg["status"]
    poller = select.poll()
    poller.register(lifeline, select.POLLIN)
    poller.register(commands, select.POLLIN)
    pending = b""
    while True:
        ready = [fd for fd, _ in poller.poll()]
        if lifeline in ready:
            break
        data = os.read(commands, 65536)
        if not data:
            break
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            start_job(json.loads(line.decode()), lifeline, status)
    shutdown(cfg)


def main():
    if "GPUTUI_SIM_INIT" in os.environ:
        init_main(json.loads(os.environ["GPUTUI_SIM_INIT"]))
        return
    cfg = json.loads(os.environ["GPUTUI_SIM_JOB"])
    lifeline, status = [int(x) for x in os.environ["GPUTUI_SIM_FDS"].split(",")]
    try:
        job_main(cfg, lifeline, status)
    except BaseException as exc:
        if cfg.get("role") != "rank":  # a rank is its parent's: the reader takes no report from it
            report(status, error_message(cfg["serial"], exc))
        raise


if __name__ == "__main__":
    main()
'''

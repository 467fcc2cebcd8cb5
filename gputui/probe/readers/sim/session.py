"""The sim's job session: the session process that starts the jobs (a child subreaper that reaps them
and their orphans), the pipes it and every job watch, and the status socket on which they report.

The reader holds the write end of a "lifeline" pipe every sim process watches: when the reader
closes or its process dies, even by SIGKILL, every job exits (and the session removes the
directory). Jobs report their PIDs on a status socket that every job inherits, even one run as
another user, so a report is taken only from the process it is about (the kernel says who wrote it:
SCM_CREDENTIALS), and a reported PID is signalled only through a pidfd, while it is below the
session process and has the reported start time (processes.signal_checked).

Apart from the reader: this is the part that runs and trusts processes; it knows nothing of what
the driver lists, only which processes the session vouches for (ContextTable.vouched).

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import json
import os
import pwd
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple  # noqa: F401  (used in type comments)

from .client import start_time
from .contexts import ContextTable  # noqa: F401  (used in type comments)
from .directory import OwnerFile, reach_problem, script, user_dir
from .files import is_process, number
from .processes import descends_from, signal_checked
from .roles import SimError, SimJob, checked_job

SESSION_SCRIPT = "gputui_sim_session.py"
CLOSE_TIMEOUT = 10.0
MAX_REPORT_BYTES = 65536  # one status report (a ready one with its workers is under 1 KiB)
MAX_REFUSED = 32  # refused status reports kept for people and tests to look at
_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


class JobSession(object):
    """The session process of a sim this reader made, and the jobs it started (`jobs`). Shares the
    reader's `cond` (the status thread wakes a spawn waiting for its job's report through it)."""

    def __init__(self, cond, contexts, seed, variant, mig_instances):
        # type: (threading.Condition, ContextTable, int, int, Callable[[int], List[Tuple[int, Optional[int]]]]) -> None
        self.cond = cond
        self.contexts = contexts
        self._mig = mig_instances  # GPU index -> its MIG instances (gi, ci), for a job's `mig`
        self.jobs = []  # type: List[SimJob]
        # Status reports not taken (not from the process they are about, malformed), with the reason.
        self.refused_reports = []  # type: List[str]
        self.process = None  # type: Optional[subprocess.Popen[bytes]]
        self.session_id = None  # type: Optional[Tuple[int, Optional[int]]]  # its pid, start time
        self.directory = ""
        self.gpus = 0
        self._owner = None  # type: Optional[OwnerFile]
        self._serial = 0
        self._spawns = {}  # type: Dict[int, Dict[str, Dict[str, Any]]]  # serial -> event -> message
        self._spawn_uids = {}  # type: Dict[int, int]  # serial -> the job's uid
        self._spawned = []  # type: List[Tuple[int, Optional[int]]]  # every pid the session started
        self._all_gone = False  # EOF on the status socket: the session and every job have exited
        self._send_lock = threading.Lock()
        self.lifeline_w = None  # type: Optional[int]
        self._commands_w = None  # type: Optional[int]
        self._status = None  # type: Optional[socket.socket]
        self._status_thread = None  # type: Optional[threading.Thread]
        self._rng = random.Random("gputui-sim:%d:%d" % (seed, variant))

    # -- the session process ---------------------------------------------------------------------

    def start(self, directory, gpus):
        # type: (str, int) -> None
        """Start the session process of the sim at `directory` (of `gpus` GPUs), and the thread that
        reads reports."""
        self.directory, self.gpus = directory, gpus
        self._owner = OwnerFile(directory)
        lifeline_r, self.lifeline_w = os.pipe()
        commands_r, self._commands_w = os.pipe()
        # Not a pipe: every job inherits the status channel, even one run as another user, so the
        # reader must know who wrote each report. Over a SOCK_SEQPACKET socket with SO_PASSCRED, each
        # write is one message that comes with its writer's PID.
        self._status, status_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._status.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        status_w = status_sock.detach()
        config = {"dir": directory, "lifeline": lifeline_r, "commands": commands_r, "status": status_w}
        env = self._env(None)
        env["GPUTUI_SIM_INIT"] = json.dumps(config)
        program = script(directory, SESSION_SCRIPT)
        with open(os.path.join(directory, "log", "session.log"), "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-S", program],
                pass_fds=(lifeline_r, commands_r, status_w),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )
        # Not reaped before stop() waits for it: its PID is not reused while we signal below it.
        self.session_id = (self.process.pid, start_time(self.process.pid))
        with self.cond:
            self._publish_owner()
        # Only the session and the jobs may hold these; the status socket reaches EOF when all are gone.
        for fd in (lifeline_r, commands_r, status_w):
            os.close(fd)
        self._status_thread = threading.Thread(
            target=self._read_status, name="gputui-sim-status", daemon=True
        )
        self._status_thread.start()

    def stop(self):
        # type: () -> None
        """Kill every process the session reported, let the rest go (EOF on the lifeline) and wait
        until the session and every job have exited."""
        session = self.process
        assert session is not None
        with self.cond:
            known = list(self._spawned)
        for job in self.jobs:
            known.extend(job.processes())
        for pid, started in known:
            signal_checked(pid, started, signal.SIGKILL, self.session_id)
        # EOF on the lifeline: every job exits; the session kills and reaps whatever is left.
        with self._send_lock:  # a concurrent spawn must not write to a closed (or reused) fd
            for fd in (self.lifeline_w, self._commands_w):
                if fd is not None:
                    os.close(fd)
            self.lifeline_w = self._commands_w = None
        try:
            session.wait(CLOSE_TIMEOUT)
        except subprocess.TimeoutExpired:
            session.kill()
            session.wait(CLOSE_TIMEOUT)
        with self.cond:
            self.cond.wait_for(lambda: self._all_gone, CLOSE_TIMEOUT)
            all_gone = self._all_gone
        if all_gone and self._status is not None:
            self._status.close()  # the status thread has finished with it
            self._status = None

    def _publish_owner(self):
        # type: () -> None
        """Tell readers that attach what this session vouches for (called with `cond` held)."""
        if self._owner is not None:
            self.contexts.vouched = self._owner.publish(self.session_id, self.contexts.vouched)

    def forget_gone(self):
        # type: () -> None
        """Forget the jobs every process of which has exited, and what the session said of them (see
        SimReader.forget_gone)."""
        with self.cond:
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

    # -- the status socket -----------------------------------------------------------------------

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
        with self.cond:
            self._all_gone = True
            self.cond.notify_all()

    def _refuse_report(self, reason):
        # type: (str) -> None
        with self.cond:  # reentrant: _on_status holds it
            self.refused_reports.append(reason)
            del self.refused_reports[:-MAX_REFUSED]

    def _report_problem(self, message, sender):
        # type: (Any, Optional[int]) -> Optional[str]
        """Why a status report is not taken (None: it is). Called with `cond` held.

        "spawned" comes from the session; "ready" and "error" for job N come from the process the
        session reported for N, a ready report names that process (PID, start time), and only the
        first of each is taken. What a job says of its children is checked when signalling."""
        if not isinstance(message, dict):
            return "not a report"
        serial = number(message, "serial", 1, self._serial)
        event = message.get("event")
        if serial is None or event not in ("spawned", "ready", "error"):
            return "not a report of a job of this sim"
        events = self._spawns.get(serial, {})
        if event in events:
            return "a second %s report for job %d" % (event, serial)
        spawned = events.get("spawned") or {}
        if event == "spawned":
            source, what = (self.session_id or (None, None))[0], "the session"
        else:
            source, what = spawned.get("pid"), "its process"
        if sender is None or sender != source:
            return "a %s report for job %d not from %s (from PID %s)" % (event, serial, what, sender)
        if event == "error":
            return None
        pid, started = number(message, "pid", 1, 1 << 22), number(message, "start_time", 0, 1 << 62)
        if pid is None or started is None:
            return "a %s report for job %d without its PID and start time" % (event, serial)
        if event == "ready" and (pid, started) != (spawned.get("pid"), spawned.get("start_time")):
            return "a ready report for job %d naming another process than the job" % serial
        child = [message.get("child_pid"), message.get("child_start_time")]
        if child != [None, None] and not is_process(child):
            return "a ready report for job %d with a malformed child" % serial
        workers = message.get("workers") or []
        if not isinstance(workers, list) or not all(is_process(w) for w in workers):
            return "a ready report for job %d with malformed workers" % serial
        return None

    def _on_status(self, message, sender):
        # type: (Any, Optional[int]) -> None
        with self.cond:
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
                    self.contexts.vouched.add((pid, started, uid))
            if uid is not None:
                self._publish_owner()
            self.cond.notify_all()

    def _is_ours(self, pid, started):
        # type: (int, Optional[int]) -> bool
        """Whether `pid` is a live process of this sim (below its session) that started at `started`."""
        if self.session_id is None or start_time(pid) != started:
            return False
        return descends_from(pid, self.session_id[0], self.session_id[1])

    # -- starting a job --------------------------------------------------------------------------

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
        # The job reaches its program, the device files and its contexts by their paths: refused
        # here, in words, rather than dying at start-up on a directory it cannot enter.
        if self.directory and entry.pw_uid != os.geteuid():
            problem = reach_problem(self.directory, entry.pw_uid, entry.pw_gid)
            if problem:
                raise SimError(
                    "a job of user %s cannot reach the sim directory %s: %s (make the sim where every "
                    "user may search: TMPDIR or the sim's directory)"
                    % (entry.pw_name, self.directory, problem)
                )
        return entry

    def start_job(self, role, gpu, memory, util, name, argv, user, comm, workers, mig, child, lifetime):
        # type: (str, Any, int, Optional[int], Optional[str], Optional[List[str]], Any, Optional[str], int, Optional[Tuple[int, int]], Optional[Dict[str, Any]], Optional[float]) -> SimJob
        """Ask the session to start a job (SimReader.spawn's arguments, checked here); returns it at
        once, its PIDs unknown until `wait_ready`."""
        spec = checked_job(role, gpu, util, name, comm, child, lifetime, mig, self.gpus, self._rng, self._mig)
        gpus = spec.gpus
        if spec.child is not None:
            script(self.directory, spec.child["name"])
        entry = self._user(user)
        uid = entry.pw_uid if entry is not None else None
        if gpus:
            user_dir(self.directory, os.geteuid() if uid is None else uid)  # where its contexts go
        with self.cond:
            self._serial += 1
            serial = self._serial
            self._spawns[serial] = {}
            self._spawn_uids[serial] = os.geteuid() if uid is None else uid
        log = os.path.join(self.directory, "log", "%d-%s.log" % (serial, spec.name))
        command = [sys.executable, "-S", script(self.directory, spec.name)] + [str(a) for a in (argv or [])]
        job = SimJob(role, spec.name, command, gpus, int(memory), spec.util, uid, serial, log)
        job.session = self.session_id
        config = {
            "serial": serial,
            "role": role,
            "dir": self.directory,
            "gpus": gpus,
            "memory": int(memory),
            "util": spec.util,
            "comm": spec.comm,
            "workers": int(workers),
            "mig": list(spec.mig) if spec.mig is not None else None,
            "child": spec.child,
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

    def wait_ready(self, job, deadline):
        # type: (SimJob, float) -> None
        """Wait for the job's ready report (SimError if it fails or dies first); set its PIDs."""
        ready = self._ready_report(job, deadline)
        job.pid, job.start_time = ready["pid"], ready.get("start_time")
        job.child_pid, job.child_start_time = ready.get("child_pid"), ready.get("child_start_time")
        job.workers = [(pid, start) for pid, start in ready.get("workers") or []]

    def _ready_report(self, job, deadline):
        # type: (SimJob, float) -> Dict[str, Any]
        died = None  # type: Optional[float]
        with self.cond:
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
                    raise SimError("%s %s died at start-up: %s" % (job.role, job.name, _log_tail(job)))
                left = deadline - time.monotonic()
                if left <= 0 or self._all_gone:
                    raise SimError("%s %s did not start: %s" % (job.role, job.name, _log_tail(job)))
                # Woken by the status thread; the timeout only catches a job dying before it reports.
                self.cond.wait(min(left, 0.25))


def _log_tail(job):
    # type: (SimJob) -> str
    try:
        with open(job.log, "rb") as f:
            return f.read()[-2000:].decode("utf-8", "replace").strip() or "(no output)"
    except OSError:
        return "(no log)"

"""The probe's state between samples: reader, holder scanner, per-process caches; builds records.

Importable in-process (`Probe(reader).sample()`) and driven by the line loop in main.py.
Stdlib only (+ pynvml through the nvml reader), Python >= 3.8 syntax: this runs on monitored hosts.
"""

import os
import platform
import socket
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple  # noqa: F401  (type comments)

from . import __version__ as PROBE_VERSION
from .accounting import account
from .classify import (
    GHOST,
    HIDDEN,
    MONITOR,
    USER,
    ProcFacts,
    classify,
    mps_role,
    protection,
    zombie_candidates,
)
from .common import IDLE_SLACK
from .holders import HolderScanner, ScanResult  # noqa: F401  (type comments)
from .hostmetrics import HostMetrics
from .jobs import JobFinder
from .peers import peer_probe
from .pidfd import Pins, best_method
from .pods import Containers
from .procfs import (
    CLOCK_TICKS,
    PF_KTHREAD,
    PROC,
    Stat,  # noqa: F401  (type comments)
    ancestors,
    boot_time,
    in_container,
    in_init_pid_namespace,
    read_cmdline,
    read_stat,
    read_status,
    user_name,
)
from .readers.base import Listed, Reader, ReaderError, Tags  # noqa: F401  (type comments)
from .wire import MAX_LINE, MAX_PROCESSES, VERSION, clip_arg, clip_list, clip_text, dumps, encode, error

# What one sample may carry (docs/PROTOCOL.md "Bounds"): a process with a megabyte of arguments, or
# a host with thousands of holders, must not make every sample over-long (the app drops those).
MAX_ARG = 512  # characters of one command-line argument; more: "<first 512>…(N bytes)"
MAX_ARGS = 64  # arguments of one command line; more: a last entry "... (N more)"
MAX_HOLDS = 64  # device files listed per process; more: a last entry "... (N more)"
MAX_LINKS = 256  # linked PIDs per process (the lowest ones)
# The processes' parents that are not in the sample (a launcher, a shell), so the app can draw a
# family as one tree: at most MAX_PARENTS, MAX_PARENT_DEPTH up each chain, their commands kept short.
MAX_PARENTS = 64
MAX_PARENT_DEPTH = 32
PARENT_ARGS = 8  # arguments of a parent's command line, of at most PARENT_ARG characters
PARENT_ARG = 64
# Seconds between preflight readings by default (clocks, ECC, PCIe...: slower than a sample).
PREFLIGHT_S = 10.0
# A due reading (not the first, nor one asked for) is read a few queries a sample, until this much of
# the sample's time is spent on it (a query at least): one reading cost 5.9-9.6 ms on an H200, and a
# sample that carried it whole stood out from the others by ten times.
PREFLIGHT_SLICE_S = 0.0005
# Seconds between per-process utilization readings by default: NVML's query cost 2.5 ms on 2 x H200,
# more than the rest of a sample; one reading in five at 1 s keeps the mean sample within budget.
PROC_UTIL_S = 5.0
MAX_RESERVE = 1 << 30  # the most v1 memory info counts as the driver's own (615 MiB on an H200)
# The live processes a plan may target, whose pidfds the probe keeps (pidfd.Pins).
_PINNED_KINDS = (USER, HIDDEN, MONITOR)
# The most bytes a sample's jobs take on its line; more jobs are left out (jobs_omitted).
MAX_JOB_BYTES = MAX_LINE // 4
# Which records a bounded sample keeps first: what holds GPU memory, then the rest.
_KEEP_FIRST = {USER: 0, GHOST: 1, HIDDEN: 2}


def clip_command(argv):
    # type: (List[str]) -> List[str]
    """A command line with at most MAX_ARGS arguments of at most MAX_ARG characters, marked where cut
    (a path keeps its name: clip_arg)."""
    return [clip_arg(arg, MAX_ARG) for arg in clip_list(argv, MAX_ARGS)]


def _keep_rank(record):
    # type: (Dict[str, Any]) -> int
    return _KEEP_FIRST.get(record.get("kind"), 3)  # type: ignore[arg-type]


def keep_first(processes, fits):
    # type: (List[Dict[str, Any]], Callable[[int, Dict[str, Any]], bool]) -> List[Dict[str, Any]]
    """The records to send when not all can be: GPU users, then ghosts, then hidden holders, then
    the rest, each group in the sample's order, for as long as `fits(count so far, record)` says
    yes. The kept ones stay in the sample's order."""
    order = sorted(range(len(processes)), key=lambda i: (_keep_rank(processes[i]), i))
    kept = set()  # type: Set[int]
    for i in order:
        if not fits(len(kept), processes[i]):
            break
        kept.add(i)
    return [p for i, p in enumerate(processes) if i in kept]


def fit_line(record):
    # type: (Dict[str, Any]) -> bytes
    """`record` as one protocol line of at most MAX_LINE bytes (its newline not counted).

    A sample that would be longer sends fewer processes (the most important ones, see keep_first)
    and counts the others in `processes_omitted`; an event keeps its fields but only the plain
    values of its `data`; anything else that cannot fit is replaced by an `error` record."""
    line = encode(record)
    if len(line) - 1 <= MAX_LINE:
        return line
    kind = record.get("type")
    if kind == "sample" and isinstance(record.get("processes"), list):
        line = _fit_sample(record)
    elif kind == "event" and isinstance(record.get("data"), dict):
        data = record["data"]
        plain = {k: v for k, v in data.items() if not isinstance(v, (dict, list))}
        plain["clipped"] = "the event's data was %d bytes: lists and objects left out" % len(line)
        line = encode(dict(record, data=plain))
    if len(line) - 1 <= MAX_LINE:
        return line
    plan = record.get("plan") if isinstance(record.get("plan"), str) else None
    return encode(error("too-long", "a %s record of %d bytes was not sent" % (kind, len(line)), plan))


def _fit_sample(record):
    # type: (Dict[str, Any]) -> bytes
    jobs = record.get("jobs")
    if isinstance(jobs, list) and len(dumps(jobs)) > MAX_JOB_BYTES:
        # Jobs take at most a part of the line (the smallest go first, counted): what holds the
        # memory, the process records, must still fit.
        kept = []  # type: List[Any]
        size = 2
        for job in jobs:
            size += len(dumps(job)) + 1
            if size > MAX_JOB_BYTES:
                break
            kept.append(job)
        omitted = (record.get("jobs_omitted") or 0) + len(jobs) - len(kept)
        record = dict(record, jobs=kept, jobs_omitted=omitted)
    processes = record["processes"]
    omitted = record.get("processes_omitted") or 0
    # The rest of the sample, with the largest count it could carry; each record costs its JSON and
    # a comma.
    rest = len(encode(dict(record, processes=[], processes_omitted=omitted + len(processes)))) - 1
    room = [MAX_LINE - rest]

    def fits(count, proc):
        # type: (int, Dict[str, Any]) -> bool
        size = len(dumps(proc)) + 1
        if size > room[0]:
            return False
        room[0] -= size
        return True

    kept = keep_first(processes, fits)
    return encode(dict(record, processes=kept, processes_omitted=omitted + len(processes) - len(kept)))


class _Known(object):
    """Per (pid, start time) facts that do not change, read once (the command line until it is
    not empty)."""

    __slots__ = ("cmdline", "container", "cpu_ticks", "cpu_time", "nspid", "peer", "uid")

    def __init__(self, pid, proc, containers):
        # type: (int, str, Containers) -> None
        self.read_command(pid, proc)
        status = read_status(pid, proc)
        self.uid = status.uid if status else None
        nspid = status.nspid if status else None
        # A second NSpid entry means the process lives in a nested PID namespace (a container).
        self.nspid = nspid[-1] if nspid and len(nspid) > 1 else None
        # From the host's side every process shows its container (LXC guest, Docker, pod); inside one
        # the cgroup namespace shows "/" (none). A pod is named each sample (Containers.label).
        self.container = containers.container(pid)
        self.cpu_ticks = -1
        self.cpu_time = 0.0

    def read_command(self, pid, proc):
        # type: (int, str) -> None
        argv = read_cmdline(pid, proc)
        self.cmdline = clip_command(argv)
        # Another gputui's probe (peers.py); an empty command line is no probe's, and is read again
        # each sample (Probe._known_of), so its executable is not read for it.
        self.peer = bool(argv) and peer_probe(pid, proc, argv)


class Faults(object):
    """What went wrong in a reading a sample can go without (the preflight, per-process
    utilization): that reading is left out and the probe goes on, for the holders and the plans
    matter more than any one of them; each fault is said once on the wire (error `reader-fault`)."""

    def __init__(self):
        # type: () -> None
        self.pending = []  # type: List[str]
        self._said = set()  # type: Set[str]

    def guard(self, what, read, default):
        # type: (str, Callable[[], Any], Any) -> Any
        try:
            return read()
        except Exception as exc:  # any defect of the reader's: never the probe's end
            message = "%s left out: %s: %s" % (what, type(exc).__name__, clip_text(str(exc), 200))
            if message not in self._said:
                self._said.add(message)
                self.pending.append(message)
            return default

    def take(self):
        # type: () -> List[str]
        taken, self.pending = self.pending, []
        return taken


class Probe(object):
    def __init__(self, reader, read_only=False, hostname=None, proc=PROC, refresh_every=30):
        # type: (Reader, bool, Optional[str], str, int) -> None
        self.reader = reader
        self.read_only = read_only
        self.hostname = hostname or socket.gethostname()
        self.proc = proc
        self.pid = os.getpid()
        self.scanner = HolderScanner(reader.device_prefix, proc, refresh_every)
        # A pidfd per GPU process from the scan that first lists it, for the plans (pidfd.py); none
        # where no plan can run (read-only) or /proc is not this host's (tests' fake trees).
        self.pins = Pins(best_method() if not read_only and proc == PROC else "kill", proc)
        self.host_metrics = HostMetrics(proc)
        self.reader_error = None  # type: Optional[ReaderError]
        self.interval = 1.0
        self.seq = 0
        self._ancestors = set(ancestors(self.pid, proc))  # type: Set[int]
        self._known = {}  # type: Dict[Tuple[int, int], _Known]
        self._baseline = {}  # type: Dict[int, int]
        self._gpu_seen = {}  # type: Dict[int, int]  # pid -> start time of past GPU processes
        self._boot = boot_time(proc)
        self._in_container = in_container(proc)
        # NVML reports host PIDs: only outside the host's PID namespace can a listed PID be alive
        # but invisible here (GPU_FACTS.md "Containers").
        self._foreign_pids = not in_init_pid_namespace(proc)
        # Every GPU process's job (jobs.py): never rooted at or above the probe's own chain.
        self.containers = Containers(proc)
        self.jobs = JobFinder(self._ancestors | {self.pid}, proc, self.containers)
        self.facts = {}  # type: Dict[str, Any]
        self.preflight_every = None  # type: Optional[int]  # samples between preflight readings
        # The reading under way: the steps left, and what the ones taken read (by GPU index).
        self._preflight_left = []  # type: List[Callable[[], Dict[int, Dict[str, Any]]]]
        self._preflight_read = {}  # type: Dict[int, Dict[str, Any]]
        self.proc_util_every = None  # type: Optional[int]  # samples between per-process utilization
        self._proc_util = {}  # type: Dict[int, Dict[int, Dict[str, Optional[int]]]]
        self._proc_util_at = None  # type: Optional[float]  # time.time() of the last reading
        self._proc_util_supported = True
        self._tags = {}  # type: Tags  # the latest reading's MIG placements and MPS clients
        self.faults = Faults()
        self.argv = []  # type: List[str]  # the probe's options, shown as its command line
        # Set by the line loop: while a plan waits (for its processes to exit, for NVML), the
        # loop's next sample is sent when it is due; returns the seconds until the one after.
        self.while_waiting = None  # type: Optional[Callable[[], float]]

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self):
        # type: () -> Dict[str, Any]
        """Open the reader; return the hello record (with its error when the reader cannot work)."""
        facts = {"driver_version": None, "nvml_version": None, "cuda_driver_version": None}  # type: Dict[str, object]
        try:
            facts.update(self.reader.open())
        except ReaderError as exc:
            self.reader_error = exc
        # The scanner may have been built before a sim reader chose its directory.
        self.scanner.prefix = self.reader.device_prefix
        # A reader may know where its PIDs live better than /proc does (the sim playing a container).
        if self.reader.host_pid_namespace is not None:
            self._foreign_pids = not self.reader.host_pid_namespace
        if self.reader.in_container is not None:
            self._in_container = self.reader.in_container
        self.jobs.stop.update(self.reader.init_pids())
        if self.reader.pod_logs is not None:  # a reader that plays a Kubernetes node (the sim)
            self.containers.play(self.reader.pod_logs, self.reader.cgroup)
        self.facts = facts
        error = None
        if self.reader_error is not None:
            error = {"code": self.reader_error.code, "message": self.reader_error.message}
        return {
            "type": "hello",
            "v": VERSION,
            "probe_version": PROBE_VERSION,
            "pid": self.pid,
            "read_only": self.read_only,
            "reader": self.reader.name,
            # "delta": it sends delta samples when asked (delta.py, docs/PROTOCOL.md).
            "capabilities": ["delta"] if self.read_only else ["plan", "delta"],
            "host": dict(
                facts,
                hostname=self.hostname,
                kernel=platform.release(),
                python=platform.python_version(),
                uid=os.getuid(),
                in_container=self._in_container,
                host_pid_namespace=not self._foreign_pids,
                clock_ticks=CLOCK_TICKS,
                device_prefix=self.reader.device_prefix,
            ),
            "error": error,
        }

    @property
    def foreign_pids(self):
        # type: () -> bool
        """Whether the probe is outside the host's PID namespace (hello's host_pid_namespace false):
        memory nothing here holds is then `outside`, never `orphaned` (accounting.account)."""
        return self._foreign_pids

    def close(self):
        # type: () -> None
        self.reader.close()
        self.host_metrics.close()
        self.pins.close()

    # -- reading -----------------------------------------------------------------------------

    def read_gpus(self):
        # type: () -> Tuple[List[Dict[str, Any]], Listed]
        """GPU records (with the idle baseline) and NVML's process lists; empty without a reader."""
        if self.reader_error is not None:
            self._tags = {}
            return [], {}
        gpus, listed = self.reader.read()
        self._tags = self.reader.process_tags()
        busy = set()  # type: Set[int]
        for mem in listed.values():
            busy.update(mem)
        for gpu in gpus:
            gpu.setdefault("mig_instances", None)
            index = gpu["index"]
            used = gpu.get("memory_used")
            if gpu.get("memory_version") == 2:
                # v2 reports the driver's reserve apart: idle reads 0 (GPU_FACTS.md). Learning a
                # baseline here would take memory nothing holds (orphaned) for the idle figure.
                gpu["memory_baseline"] = 0
                continue
            if index not in busy and isinstance(used, int):
                # v1 counts the reserve as used: learn the idle figure when nothing is listed, up to
                # what a reserve can be (more is memory held, not idle).
                known = self._baseline.get(index)
                seen = min(used, MAX_RESERVE)
                self._baseline[index] = seen if known is None else min(known, seen)
            gpu["memory_baseline"] = self._baseline.get(index)
        return gpus, listed

    @staticmethod
    def gpu_is_idle(gpu):
        # type: (Dict[str, Any]) -> bool
        used, base = gpu.get("memory_used"), gpu.get("memory_baseline")
        return isinstance(used, int) and isinstance(base, int) and used <= base + IDLE_SLACK

    def wants_preflight(self):
        # type: () -> bool
        """Whether a preflight reading is due with this sample: the first one, then every
        `preflight_every` samples (default: about every PREFLIGHT_S seconds; 0: on request only)."""
        every = samples_between(self.preflight_every, PREFLIGHT_S, self.interval)
        return self.seq == 0 or (every > 0 and self.seq % every == 0)

    def read_preflight(self, whole):
        # type: (bool) -> Optional[Dict[int, Dict[str, Any]]]
        """The preflight reading this sample carries, or None. `whole`: all of it now (the first
        sample, one asked for: a plan's record needs it at once). Else a due reading begins, and a
        reading under way goes on: its next steps, until PREFLIGHT_SLICE_S is spent; the sample
        that takes its last step carries it."""
        if self.reader_error is not None:
            self._preflight_left = []
            return {} if whole else None
        if whole or not self._preflight_left:  # a whole reading supersedes one under way
            if not whole and not self.wants_preflight():
                return None
            self._preflight_left = self.faults.guard("the preflight reading", self.reader.preflight_steps, [])
            self._preflight_read = {}
        deadline = None if whole else time.perf_counter() + PREFLIGHT_SLICE_S
        while self._preflight_left:
            step = self._preflight_left.pop(0)
            for index, fields in self.faults.guard("the preflight reading", step, {}).items():
                self._preflight_read.setdefault(index, {}).update(fields)
            if deadline is not None and time.perf_counter() >= deadline:
                break
        return None if self._preflight_left else self._preflight_read

    def read_proc_util(self, listed):
        # type: (Listed) -> Optional[float]
        """Per-process GPU utilization, when due (see PROC_UTIL_S), on the GPUs where NVML lists a
        process now (`listed`: elsewhere there is no process to give a share to, and the driver's
        query costs 1.8 ms a GPU on an H100); its cost in ms, or None."""
        every = samples_between(self.proc_util_every, PROC_UTIL_S, self.interval)
        if every == 0 or not self._proc_util_supported or self.reader_error is not None:
            self._proc_util, self._proc_util_at = {}, None  # switched off: no stale figures
            return None
        if self.seq % every != 0:
            return None
        start = time.perf_counter()
        busy = set()  # type: Set[int]
        for memory in listed.values():
            busy.update(memory)
        # The first reading of a GPU covers one period. One that fails is not asked again.
        read = lambda: self.reader.process_utilization(every * self.interval, busy)  # noqa: E731
        util = self.faults.guard("per-process utilization", read, None)
        if util is None:
            self._proc_util_supported = False
            self._proc_util = {}
            return None
        self._proc_util, self._proc_util_at = util, time.time()
        return round((time.perf_counter() - start) * 1e3, 3)

    def proc_util_state(self):
        # type: () -> Dict[str, Any]
        """How current the per-process utilization in this sample is, for the app to say."""
        every = samples_between(self.proc_util_every, PROC_UTIL_S, self.interval)
        if self.reader_error is not None or not self._proc_util_supported:
            state = "unsupported"
        else:
            state = "off" if every == 0 else "on"
        at = self._proc_util_at
        return {
            "state": state,
            "every": round(every * self.interval, 3) if state == "on" else None,
            "age": round(max(0.0, time.time() - at), 3) if at is not None and state == "on" else None,
        }

    def sample(self, full=False, preflight=False):
        # type: (bool, bool) -> Dict[str, Any]
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        gpus, listed = self.read_gpus()
        t1 = time.perf_counter()
        scan = self.scanner.scan(full=full or self.seq == 0, watch=listed)
        t2 = time.perf_counter()
        # Each process's stat is read once a sample: describing, finding jobs and parents share it.
        stats = {}  # type: Dict[int, Optional[Stat]]
        processes = self.describe(listed, scan, stats)
        by_pid = dict((r["pid"], r) for r in processes)
        for gpu in gpus:
            # Before the process bound: every record counts in where the memory went.
            gpu["accounting"] = account(gpu, listed, by_pid, self.scanner.prefix, self._foreign_pids)
        # Before the process bound too: a job's members are all its GPU processes.
        t_jobs = time.perf_counter()
        jobs, job_of, jobs_omitted = self.jobs.compute(processes, stats)
        jobs_ms = round((time.perf_counter() - t_jobs) * 1e3, 3)
        for record in processes:
            record["job"] = job_of.get(record["pid"])
        t_account = time.perf_counter()
        preflight_ms = None  # type: Optional[float]
        reading_on = bool(self._preflight_left)
        readings = self.read_preflight(preflight or self.seq == 0)
        if readings is not None:
            for gpu in gpus:
                gpu["preflight"] = readings.get(gpu["index"])
        if readings is not None or reading_on or self._preflight_left:
            preflight_ms = round((time.perf_counter() - t_account) * 1e3, 3)
        proc_util_ms = self.read_proc_util(listed)
        for record in processes:
            shares = self._proc_util.get(record["pid"])
            record["gpu_util"] = (
                dict((str(i), share) for i, share in sorted(shares.items())) if shares is not None else None
            )
        omitted = max(0, len(processes) - MAX_PROCESSES)
        if omitted:
            processes = keep_first(processes, lambda count, _proc: count < MAX_PROCESSES)
        parents = self.parents(processes, stats)
        t3 = time.perf_counter()
        host = self.host_metrics.read()
        t_host = time.perf_counter()
        self.seq += 1
        check, worst = self.scanner.staleness()
        return {
            "type": "sample",
            "v": VERSION,
            "seq": self.seq,
            "time": time.time(),
            "gpus": gpus,
            "processes": processes,
            "processes_omitted": omitted,
            "jobs": jobs,
            "jobs_omitted": jobs_omitted,
            "parents": parents,
            "host": host,
            "proc_util": self.proc_util_state(),
            "scan": {
                "full": scan.full,
                # Seconds within which a new holder is seen; the worst case (an fd number reused).
                "age": round(check * self.interval, 3),
                "worst_age": round(worst * self.interval, 3),
                "unreadable": scan.unreadable,
            },
            "cost_ms": {
                "reader": round((t1 - t0) * 1e3, 3),
                "holders": round((t2 - t1) * 1e3, 3),
                "describe": round((t3 - t2) * 1e3, 3),
                "jobs": jobs_ms,
                "preflight": preflight_ms,
                "proc_util": proc_util_ms,
                "host": round((t_host - t3) * 1e3, 3),
                "total": round((t_host - t0) * 1e3, 3),
                "cpu": round((time.process_time() - cpu0) * 1e3, 3),
            },
        }

    # -- describing processes ----------------------------------------------------------------

    def describe(self, listed, scan, stats=None):
        # type: (Listed, ScanResult, Optional[Dict[int, Optional[Stat]]]) -> List[Dict[str, Any]]
        """Classify and describe every process that NVML lists or that holds a device file.
        `stats`: the stats read so far this sample, by PID (those read here are added)."""
        if stats is None:
            stats = {}

        def stat_of(pid):
            # type: (int) -> Optional[Stat]
            if pid not in stats:
                stats[pid] = read_stat(pid, self.proc)
            return stats[pid]

        def lookup(pid):
            # type: (int) -> Optional[ProcFacts]
            s = stat_of(pid)
            return ProcFacts(s.comm, s.state, s.ppid, s.pgid, s.sid) if s else None

        def peer(pid):
            # type: (int) -> bool
            s = stat_of(pid)
            return s is not None and self._known_of(pid, s.start_time).peer

        holders = set(scan.holders)
        gpu_pids = holders | set(listed)
        # Pinned before anything of them is read below: what a record shows is of that process.
        stop = self._ancestors | {self.pid}
        self.pins.begin(pid for pid in sorted(gpu_pids) if pid not in stop)
        zombie_pids = [pid for pid, state in scan.states.items() if state == "Z"]
        zombies = zombie_candidates(zombie_pids, lookup, gpu_pids, set(self._gpu_seen))
        verdicts = classify(
            listed,
            holders,
            lookup,
            self.pid,
            stop=self._ancestors | {self.pid},
            foreign_pids=self._foreign_pids,
            zombies=zombies,
            peer=peer,
        )
        now = time.time()
        records = []
        for pid, verdict in verdicts.items():
            s = stat_of(pid)
            held = scan.holders.get(pid, (0, ()))[1]
            records.append(self._record(pid, s, verdict, listed.get(pid, {}), held, now))
            if s is not None and verdict.kind in (USER, HIDDEN, GHOST):
                self._gpu_seen[pid] = s.start_time
        self._forget_gone(scan)
        self.pins.settle(
            dict(
                (r["pid"], r["start_time"])
                for r in records
                if r["kind"] in _PINNED_KINDS and r["start_time"] is not None and r["state"] != "Z"
            )
        )
        records.sort(key=lambda r: (r["kind"] != USER, -_memory(r), r["pid"]))
        return records

    def _record(self, pid, s, verdict, mem, held, now):
        # type: (int, Optional[Stat], Any, Dict[int, Optional[int]], Tuple[str, ...], float) -> Dict[str, Any]
        record = {
            "pid": pid,
            "start_time": None,
            "name": None,
            "command": [],
            "user": None,
            "uid": None,
            "state": None,
            "ppid": None,
            "pgid": None,
            "sid": None,
            "cpu_percent": None,
            "rss": None,
            "elapsed": None,
            "holds": clip_list(list(held), MAX_HOLDS),
            "gpu_memory": {str(i): b for i, b in sorted(mem.items())},
            "gpus": verdict.gpus,
            "kind": verdict.kind,
            "reason": verdict.reason,
            "links": sorted(verdict.links)[:MAX_LINKS],
            "protected": None,
            "nspid": None,
            "container": None,
            "job": None,  # the sample sets it (jobs.py)
            "mig": [],
            "mps": None,
        }  # type: Dict[str, Any]
        tag = self._tags.get(pid) or {}
        record["mig"] = [
            {"gpu": index, "gi": gi, "ci": ci} for index, gi, ci in sorted(tag.get("mig") or (), key=_place)
        ]
        kthread = False
        if s is not None:
            known = self._known_of(pid, s.start_time)
            record.update(
                start_time=s.start_time,
                name=clip_text(s.comm),
                command=known.cmdline,
                uid=known.uid,
                user=clip_text(user_name(known.uid)),
                state=s.state,
                ppid=s.ppid,
                pgid=s.pgid,
                sid=s.sid,
                cpu_percent=self._cpu_percent(known, s, now),
                rss=s.rss if s.state != "Z" else 0,
                elapsed=round(now - (self._boot + s.start_time / float(CLOCK_TICKS)), 1),
                nspid=known.nspid,
                container=clip_text(self.containers.label(known.container)),
            )
            kthread = bool(s.flags & PF_KTHREAD)
        record["mps"] = mps_role(
            s.comm if s is not None else None, record["command"], bool(mem), bool(tag.get("mps"))
        )
        if pid == self.pid:
            # Shipped over SSH, the probe's own command line is the bootstrap's source code.
            record["command"] = clip_command(["gputui-probe", *self.argv])
        record["protected"] = protection(
            pid, verdict.kind, self.pid, self._ancestors, kthread, verdict.reason
        )
        return record

    def _known_of(self, pid, start_time):
        # type: (int, int) -> _Known
        """The facts of (pid, start time) that do not change, read once."""
        known = self._known.get((pid, start_time))
        if known is None:
            known = self._known[(pid, start_time)] = _Known(pid, self.proc, self.containers)
        elif not known.cmdline:
            # Read again while empty: right after exec returns Linux shows an empty command line
            # for a moment, and a peer's probe read there would pass for a job. For a zombie or a
            # kernel thread it stays empty: one short read a sample.
            known.read_command(pid, self.proc)
        return known

    @staticmethod
    def _cpu_percent(known, s, now):
        # type: (_Known, Stat, float) -> Optional[float]
        previous, then = known.cpu_ticks, known.cpu_time
        known.cpu_ticks, known.cpu_time = s.cpu_ticks, now
        if previous < 0 or now <= then:
            return None
        return round(100.0 * (s.cpu_ticks - previous) / CLOCK_TICKS / (now - then), 1)

    def _forget_gone(self, scan):
        # type: (ScanResult) -> None
        alive = scan.states
        for key in [k for k in self._known if k[0] not in alive]:
            del self._known[key]
        for pid in [p for p in self._gpu_seen if p not in alive]:
            del self._gpu_seen[pid]

    def parents(self, records, stats=None):
        # type: (List[Dict[str, Any]], Optional[Dict[int, Optional[Stat]]]) -> List[Dict[str, Any]]
        """The ancestors of `records` that are not among them, up each chain to PID 1 or the
        probe's own chain (both excluded: they would tie every process together), at most
        MAX_PARENTS: what joins a launcher's ranks, or a shell's jobs, into one family."""
        listed = set(r["pid"] for r in records)
        stop = self._ancestors | {0, 1, 2}
        out = []  # type: List[Dict[str, Any]]
        seen = set()  # type: Set[int]
        for record in records:
            ppid = record.get("ppid")
            depth = 0
            while isinstance(ppid, int) and ppid not in listed and ppid not in stop and ppid not in seen:
                if depth == MAX_PARENT_DEPTH or len(out) == MAX_PARENTS:
                    break
                stat = stats[ppid] if stats is not None and ppid in stats else read_stat(ppid, self.proc)
                if stat is None:
                    break
                seen.add(ppid)
                known = self._known_of(ppid, stat.start_time)
                command = [clip_arg(arg, PARENT_ARG) for arg in clip_list(known.cmdline, PARENT_ARGS)]
                out.append(
                    {
                        "pid": ppid,
                        "start_time": stat.start_time,
                        "ppid": stat.ppid,
                        "name": clip_text(stat.comm),
                        "command": command,
                        "user": clip_text(user_name(known.uid)),
                        "uid": known.uid,
                        "state": stat.state,
                    }
                )
                ppid = stat.ppid
                depth += 1
        return out

    def detail(self, record):
        # type: (Dict[str, Any]) -> Dict[str, Any]
        """The answer to a `detail` request: one process in full, read now (probe/detail.py)."""
        from .detail import describe

        out = describe(
            record, self.scanner.prefix, self.pid, self._ancestors, self.argv, self.proc, self._boot
        )
        if out.get("container") is not None or self.containers.fake is not None:
            # As the sample names it: a pod by its namespace and name, a reader's played cgroup.
            out["container"] = clip_text(self.containers.label(self.containers.container(record["pid"])))
        return out

    # -- facts for the kill engine -----------------------------------------------------------

    def protected_pids(self):
        # type: () -> Set[int]
        return self._ancestors | {self.pid, 1}


def samples_between(configured, seconds, interval):
    # type: (Optional[int], float, float) -> int
    """Samples between two readings of a kind: as the app configured it, else about `seconds`."""
    if configured is not None:
        return configured
    return max(1, round(seconds / max(interval, 0.001)))


def _place(place):
    # type: (Tuple[int, int, Optional[int]]) -> Tuple[int, int, int]
    return (place[0], place[1], -1 if place[2] is None else place[2])


def _memory(record):
    # type: (Dict[str, Any]) -> int
    return sum(b or 0 for b in record["gpu_memory"].values())

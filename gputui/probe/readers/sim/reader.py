"""SimReader: the sim's face to the probe, a Reader of simulated H200s (see the package's docstring).

It opens a sim (makes its directory and runs its scenario through a job session, or attaches to one
another process runs) and answers the Reader calls from its parts: the contexts the driver believes
(contexts.py), the GPUs' looks and driver state (gpus.py), the jobs of its session (session.py).

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import os
import shutil
import threading
import time
from typing import Any, Dict, List, Optional, Set, Tuple  # noqa: F401  (used in type comments)

from ..base import Listed, Reader, ReaderError, Tags  # noqa: F401  (Listed, Tags: in type comments)
from ..scenarios import SCENARIO_JOBS, SCENARIO_STATE, SCENARIOS, GiB, scenario_gpus
from . import directory as sim_dir
from . import pods as sim_pods
from .client import start_time
from .contexts import ContextTable
from .gpus import FACTS, DriverState, GpuLooks, preflight_record
from .processes import pid_namespace, wait_exit
from .roles import SimError, SimJob  # noqa: F401  (SimJob: in type comments)
from .session import JobSession

SPAWN_TIMEOUT = 20.0  # seconds for a job to start and settle (Python start-up on a loaded 2-core CI box)


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
            gpus = scenario_gpus(scenario, int(variant or 0))
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
        self.resets = []  # type: List[int]  # GPUs this reader reset (tests look)
        self._cond = threading.Condition()  # guards the contexts and the session's reports
        self._stop = threading.Event()
        self._contexts = ContextTable(self.seed, self._cond, self._stop)
        self._session = JobSession(self._cond, self._contexts, self.seed, self.variant, self._mig_instances)
        self._looks = None  # type: Optional[GpuLooks]
        self._state = None  # type: Optional[DriverState]
        self._tags = {}  # type: Tags
        self._reads = 0
        self._device_fds = []  # type: List[int]
        self._opened = False
        self._closed = False
        # Attach mode: sim.json, held with flock(LOCK_SH) while open (`watched`); the owner's uid,
        # and what it publishes in owner.json: its session (the processes it vouches for go to the
        # context table).
        self._meta_fd = None  # type: Optional[int]
        self._owner_uid = None  # type: Optional[int]
        self._owner = None  # type: Optional[sim_dir.OwnerFile]
        self._owner_session = None  # type: Optional[Tuple[int, int]]
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

    def _play_node(self):
        # type: () -> None
        """The "kubepods" scenario plays a Kubernetes node (pods.py): the probe reads its pods'
        directories here, and the cgroups of the processes it put in a pod from `cgroup`."""
        if self.scenario == "kubepods" and self.directory is not None:
            self.pod_logs = os.path.join(self.directory, sim_pods.PODS_DIR)

    def cgroup(self, pid):
        # type: (int) -> Optional[str]
        if self.pod_logs is None or self.directory is None:
            return None
        return sim_pods.cgroup_of(self.directory, pid)

    @property
    def ignored(self):
        # type: () -> Dict[str, str]
        """Files under ctx/ that are not believed, and why (only those still there): tests and people look."""
        return self._contexts.ignored

    @property
    def jobs(self):
        # type: () -> List[SimJob]
        """The jobs this reader's session started (forget_gone drops those that are gone)."""
        return self._session.jobs

    @property
    def refused_reports(self):
        # type: () -> List[str]
        """Status reports not taken (not from the process they are about, malformed), with the reason."""
        return self._session.refused_reports

    def init_pids(self):
        # type: () -> List[int]
        """The session process adopts and reaps every job and orphan of the sim (a subreaper): each
        job is its own, not the session's (jobs.py). Attached, the owner's session (owner.json), while
        it is that process."""
        if self._session.process is not None:
            return [self._session.process.pid]
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
            self._play_node()
            # Like every NVML client, the reader holds every device file while it is open.
            if self.hold_devices:
                self._device_fds = [os.open(path, os.O_RDONLY) for path in self.device_paths]
            if not self.attach:
                self._session.start(str(self.directory), self.gpus)
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
        if self._session.process is not None:
            self._session.stop()
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
        return self._session.process.pid if self._session.process is not None else None

    def jobs_with_role(self, role):
        # type: (str) -> List[SimJob]
        return [job for job in self.jobs if job.role == role]

    def forget_gone(self):
        # type: () -> None
        """Forget the jobs every process of which has exited, and what the session said of them: a
        sim that starts jobs on a schedule for days (the demo daemon) keeps only what lives. Call it
        from the thread that spawns (a job being started has no PID yet and is kept)."""
        self._session.forget_gone()

    # -- the sim directory -------------------------------------------------------------------

    def _make_directory(self):
        # type: () -> None
        meta = {
            "version": 1,
            "gpus": self.gpus,
            "seed": self.seed,
            "variant": self.variant,
            "scenario": self.scenario,
            "hostname": self.hostname,
            "pid_ns": pid_namespace(),  # where the PIDs of its contexts live
        }
        self.directory = sim_dir.make_directory(self.base_dir, self.gpus, meta)

    def _attach_directory(self):
        # type: () -> None
        """Read an existing sim, one that nobody else could have made or changed
        (directory.checked_directory), and take its GPUs, seed, scenario and host name from it."""
        base, owner, meta, (gpus, seed, variant) = sim_dir.checked_directory(str(self.base_dir))
        self.directory = base
        self.gpus, self.seed, self.variant = gpus, seed, variant
        self._contexts.seed = seed
        scenario = meta.get("scenario")
        self.scenario = scenario if scenario in SCENARIOS else self.scenario
        self._play_container()
        hostname = meta.get("hostname")
        self.hostname = self.hostname or (hostname if isinstance(hostname, str) else None)
        # A reader in another PID namespace (a container's probe) cannot see the processes contexts
        # name, as a probe beside the real driver cannot: it lists their PIDs as NVML does.
        theirs, ours = meta.get("pid_ns"), pid_namespace()
        self._contexts.foreign_pids = isinstance(theirs, str) and ours is not None and theirs != ours
        self._owner_uid = owner
        self._owner = sim_dir.OwnerFile(base)
        self._meta_fd = sim_dir.watch(base)
        self._load_owner()

    def _load_owner(self):
        # type: () -> None
        """Attached: what the sim's owner publishes in owner.json, read again when it changes: its
        session, and the processes its session reported, whose contexts are believed after they
        exited (a ghost whose parent exited before this reader looked). Called with self._cond
        held, or before any thread."""
        if self._owner is None or self._owner_uid is None:
            return
        loaded = self._owner.load(self._owner_uid)
        if loaded is not None:
            self._owner_session, self._contexts.vouched = loaded

    def _setup_gpus(self):
        # type: () -> None
        """Fixed per-GPU looks (UUIDs, temperature offsets, jitter), all from the seed and variant."""
        base = str(self.directory)
        self.device_paths = sim_dir.device_paths(base, self.gpus)
        self.device_prefix = os.path.join(base, "dev", "nvidia")
        self._contexts.place(os.path.join(base, "ctx"), self.gpus)
        self._looks = GpuLooks(self.gpus, self.seed, self.variant)
        self._state = DriverState(base)

    # -- reading -----------------------------------------------------------------------------

    def read(self):
        # type: () -> Tuple[List[Dict[str, Any]], Listed]
        """GPU records and NVML's listing: a listdir of ctx/ plus dict work (polled every 20 ms)."""
        if self._closed or self.directory is None or self._looks is None or self._state is None:
            raise ReaderError("no-driver", "the sim reader is closed")
        now = time.monotonic()
        with self._cond:
            self._reads += 1
            reads = self._reads
            if self.attach:
                self._load_owner()  # the owner may vouch for a ghost that exited before we looked
            self._contexts.track_new()
            found = self._contexts.listing(now, self.host_pid_namespace is False)
        listed, tags = found.listed, found.tags
        state = self._state.read()
        used = [found.used[i] + int(state.get(str(i), {}).get("orphaned") or 0) for i in range(self.gpus)]
        gpus = [
            self._looks.record(i, used[i], min(100, found.util[i]), reads, state.get(str(i), {}))
            for i in range(self.gpus)
        ]
        for gpu in gpus:
            layout = self._looks.mig_layout(state, int(gpu["index"]))  # type: ignore[call-overload]
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
                dict(inst, memory_used=found.by_instance.get((gpu["index"], inst["gi"]), 0))  # type: ignore[arg-type]
                for inst in layout
            ]
        with self._cond:
            self._tags = tags
        return gpus, listed

    def process_tags(self):
        # type: () -> Tags
        with self._cond:
            return self._tags

    def process_utilization(self, window=None, gpus=None):
        # type: (Optional[float], Optional[Set[int]]) -> Optional[Dict[int, Dict[int, Dict[str, Optional[int]]]]]
        """Each live context's utilization on its GPU (its `util`; memory utilization 3/5 of it, as
        for the whole GPU; no encoder or decoder work in the sim). It is a rate, not a history: every
        reading is of now, whatever the `window`. `gpus`: only these GPUs (None: every one)."""
        util = self._contexts.utilization(self.host_pid_namespace is False)
        if gpus is None:
            return util
        kept = {}  # type: Dict[int, Dict[int, Dict[str, Optional[int]]]]
        for pid, shares in util.items():
            mine = dict((i, share) for i, share in shares.items() if i in gpus)
            if mine:
                kept[pid] = mine
        return kept

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
                pending = self._contexts.release_times(pid)
                if not pending:
                    continue
                if None in pending:
                    wait = deadline - now  # a watcher notifies when a holder goes
                else:
                    wait = max(0.0, min(r for r in pending if r is not None) - now)
                self._cond.wait(min(wait, deadline - now))

    # -- the driver's state beyond memory: preflight, persistence, reset --------------------------

    def _state_now(self):
        # type: () -> Dict[str, Any]
        """The driver state of every GPU ({} before the reader has a sim: every GPU as it comes)."""
        return self._state.read() if self._state is not None else {}

    def _mig_instances(self, index):
        # type: (int) -> List[Tuple[int, Optional[int]]]
        """GPU `index`'s MIG instances now, (gi, ci) each ([] where MIG is off)."""
        if self._looks is None:
            return []
        layout = self._looks.mig_layout(self._state_now(), index) or []
        return [(inst["gi"], inst["ci"]) for inst in layout]

    def set_state(self, index, **knobs):
        # type: (int, Any) -> None
        """Change GPU `index`'s driver state (tests and scenarios; the reset and persistence calls):
        each knob to its value, or removed where it is None (gpus.DriverState)."""
        if self._state is None:
            raise ReaderError("no-driver", "the sim reader is not open")
        self._state.set(index, knobs)

    def preflight(self):
        # type: () -> Dict[int, Dict[str, Any]]
        state = self._state_now()
        return {index: preflight_record(state.get(str(index), {})) for index in range(self.gpus)}

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
        if self._state_now().get(str(index), {}).get("persistence", True):
            return False, "GPU %d: persistence mode is on: turn it off before a reset" % index
        alive = self._contexts.holders(index)
        if alive:
            return False, "GPU %d is in use by %s" % (index, ", ".join(str(pid) for pid in alive))
        self.set_state(index, orphaned=None, ecc_corrected=None, ecc_uncorrected=None, remap_pending=None)
        self.resets.append(index)
        return True, "GPU %d reset (sim)" % index

    # -- jobs --------------------------------------------------------------------------------

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
        """Start a job and return it once settled (see docs in the package and SimJob).

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
        (holds no device file; runs one worker on the first GPU of `gpu` and starts a new one 0.5 s,
        or its child's restart_s, after it ends; a signal is passed on to the worker, then it exits),
        neighbour (another guest's job: a context and nothing else; listed by nobody where the reader
        plays a container's probe, the "neighbour" scenario), stopped (allocates like an idle job,
        then stops itself with SIGSTOP: a job left stopped by Ctrl+Z, state T, its memory held).
        child: {"name": script, "argv": [...]} of a launcher's ranks or a supervisor's workers
        ("{rank}" in an argument: the rank's number; "restart_s": a supervisor's wait).
        lifetime: seconds after which a busy, idle or ignore-term job exits by itself (a benchmark
        that ends; None: it lives until stopped or the sim closes)."""
        job = self._start_job(role, gpu, memory, util, name, argv, user, comm, workers, mig, child, lifetime)
        return self._finish_job(job, time.monotonic() + (timeout or SPAWN_TIMEOUT))

    def _start_job(
        self, role, gpu, memory, util, name, argv, user, comm, workers=3, mig=None, child=None, lifetime=None
    ):
        # type: (str, Any, int, Optional[int], Optional[str], Optional[List[str]], Any, Optional[str], int, Optional[Tuple[int, int]], Optional[Dict[str, Any]], Optional[float]) -> SimJob
        if self._session.process is None or self._closed:
            raise SimError("only an open SimReader that created its sim (not attach=True) can spawn")
        return self._session.start_job(
            role, gpu, memory, util, name, argv, user, comm, workers, mig, child, lifetime
        )

    def _finish_job(self, job, deadline):
        # type: (SimJob, float) -> SimJob
        """Wait for the job's ready report, then until its role has settled."""
        self._session.wait_ready(job, deadline)
        assert job.pid is not None  # set by its ready report
        if job.role == "ghost" and not wait_exit(job.pid, job.start_time, deadline - time.monotonic()):
            raise SimError("%r: the ghost's parent did not exit" % job)
        if job.role == "zombie":
            assert job.child_pid is not None  # a zombie job's ready report always names its child
            if not self.wait_released(job.child_pid, deadline - time.monotonic()):
                raise SimError("%r: the zombie's memory was not released" % job)
        self.read()  # start watching its contexts now
        return job

    def _run_scenario(self):
        # type: () -> None
        """Start every job of the scenario at once, then wait for each to settle, so the first sample
        already shows everything (the ghost's parent reaped, the zombie in state Z, its memory back)."""
        state = SCENARIO_STATE.get(self.scenario)
        for index, knobs in (state(self.gpus) if state is not None else {}).items():
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
        for (_, spec), job in zip(specs, started):  # noqa: B905  (one job started per spec; 3.8: no strict=)
            if spec.get("pod") and job.pid is not None and job.start_time is not None:
                sim_pods.place(str(self.directory), spec["pod"], job.pid, job.start_time)

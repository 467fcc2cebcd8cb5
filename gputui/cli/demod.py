"""The live demo's daemon: one process per demo (per name, gputui/cli/democtl.py) that runs the two demo hosts' sims and keeps their
jobs coming and going (below); started, found and stopped by gputui/cli/democtl.py, whose directory
rules (private, locked, one daemon per user) it follows. `daemon_main` is its program (democtl.BOOT).

Jobs that come and go, so that `wait` has something to wait for and a clean is not forever:
- each of the demo scenario's jobs is a slot; a slot whose job is gone (a clean, a kill) gets a new
  one once the job has been gone, and each GPU it uses has been free, for `--refill-after` (60 s):
  long enough for `clean ... && wait --settle 2 && ./run_benchmark.sh` to run in between;
- demo-b's GPU 3 (DEMO_BENCH_GPU, one its scenario leaves free) runs a benchmark (`bench.py`) for
  `--bench-run` (20 s), which then ends on its own, and a new one starts once the GPU has been free
  for `--bench-gap` (20 s): `gputui wait --demo demo-b:3` waits for the end of the current one;
- demo-b's GPUs 4-7 run nothing: `gputui pick 2 --demo` always has a pair to pick.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..probe.readers.base import ReaderError
from ..probe.readers.scenarios import DEMO_BENCH_GPU, SCENARIO_JOBS, GiB
from ..probe.readers.sim.client import start_time
from ..probe.readers.sim.files import watched
from ..probe.readers.sim.reader import SimReader
from ..probe.readers.sim.roles import SimError, SimJob
from .argtypes import Parser
from .demo import DEMO_HOSTS, DemoError
from .democtl import (
    LOG_FILE,
    STATE_FILE,
    USED_FILE,
    Options,
    installation,
    open_private,
    options_of,
    private_problem,
    schedule_arguments,
    take_lock,
    write_state,
)
from .exits import Exit

BENCH_HOST = "demo-b"
TICK = 0.5  # seconds between the daemon's looks at its sims


# -- the daemon ---------------------------------------------------------------------------------------


@dataclass
class Slot:
    """One job the demo keeps: what to start, and the job now (None: gone since `gone_since`)."""

    spec: dict[str, Any]  # SimReader.spawn's arguments
    after: float  # seconds gone, and each of its GPUs free, before a new one starts
    job: SimJob | None = None
    gone_since: float | None = None

    @property
    def gpus(self) -> list[int]:
        gpu = self.spec.get("gpu")
        return [] if gpu is None else [gpu] if isinstance(gpu, int) else list(gpu)


@dataclass
class Host:
    name: str
    reader: SimReader
    slots: list[Slot] = field(default_factory=list)
    free_since: dict[int, float] = field(default_factory=dict)  # GPU -> monotonic time it was seen free


def _alive(job: SimJob) -> bool:
    return any(started is not None and start_time(pid) == started for pid, started in job.processes())


def _log(text: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text}", file=sys.stderr, flush=True)


class Daemon:
    def __init__(self, directory: Path, options: Options) -> None:
        self.directory = directory
        self.options = options
        self.specs = DEMO_HOSTS
        self.hosts: list[Host] = []
        self.stopping = threading.Event()
        self.started = time.time()
        self.last_client = time.time()

    def open(self) -> None:
        """Both sims, each with its scenario's jobs (started at once), and demo-b's benchmark."""
        readers = [
            SimReader(
                scenario=spec.sim_scenario,
                variant=spec.sim_variant,
                seed=spec.sim_seed,
                base_dir=str(self.directory),
                hold_devices=False,  # the daemon is no GPU client: no plan may see it as a holder
            )
            for spec in self.specs
        ]
        errors: list[BaseException] = []

        def open_one(reader: SimReader) -> None:
            try:
                reader.open()
            except (ReaderError, SimError, OSError) as exc:
                errors.append(exc)

        threads = [threading.Thread(target=open_one, args=(r,)) for r in readers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for spec, reader in zip(self.specs, readers, strict=True):
            host = Host(spec.name, reader)
            self.hosts.append(host)
            if errors:
                continue
            jobs = SCENARIO_JOBS[reader.scenario](reader.variant, reader.gpus)
            for (role, kwargs), job in zip(jobs, list(reader.jobs), strict=True):
                host.slots.append(Slot(dict(kwargs, role=role), self.options.refill_after, job))
        if errors:
            raise errors[0]
        bench = next(h for h in self.hosts if h.name == BENCH_HOST)
        slot = Slot(
            {
                "role": "busy",
                "gpu": DEMO_BENCH_GPU,
                "memory": 52 * GiB,
                "util": 96,
                "name": "bench.py",
                "argv": ["--suite", "gemm", "--dtype", "fp8", "--iters", "5000"],
                "lifetime": self.options.bench_run,
            },
            self.options.bench_gap,
        )
        slot.job = bench.reader.spawn(**slot.spec)
        bench.slots.append(slot)

    def state(self) -> dict[str, Any]:
        return {
            "version": 1,
            "state": "ready",
            "pid": os.getpid(),
            "start_time": start_time(os.getpid()),
            "started": self.started,
            "directory": str(self.directory),
            "name": self.directory.name,
            "installation": installation(),
            "hosts": {
                h.name: {"directory": h.reader.directory, "gpus": h.reader.gpus, "scenario": h.reader.scenario}
                for h in self.hosts
            },
            "idle_timeout_s": self.options.idle_timeout,
            "refill_after_s": self.options.refill_after,
            "bench": {"host": BENCH_HOST, "gpu": DEMO_BENCH_GPU,
                      "run_s": self.options.bench_run, "gap_s": self.options.bench_gap},
        }  # fmt: skip

    def run(self) -> str:
        """Look at the sims every TICK until told to stop or idle; why it ended."""
        while not self.stopping.wait(TICK):
            now = time.monotonic()
            for host in self.hosts:
                if not os.path.isdir(str(host.reader.directory)):
                    return f"{host.name}'s sim directory is gone"
                self.tick(host, now)
                if self.stopping.is_set():
                    break
            idle = self.idle_for()
            if idle >= self.options.idle_timeout:
                return f"no client for {idle:.0f} s"
        return "told to stop"

    def idle_for(self) -> float:
        now = time.time()
        if any(watched(str(h.reader.directory)) for h in self.hosts):
            self.last_client = now
        try:
            used = os.stat(self.directory / USED_FILE).st_mtime
        except OSError:
            used = 0.0
        return now - max(self.started, self.last_client, used)

    def tick(self, host: Host, now: float) -> None:
        """Note which GPUs are free; start the jobs whose time has come (module docstring)."""
        try:
            gpus, listed = host.reader.read()
        except (ReaderError, OSError) as exc:
            _log(f"{host.name}: {exc}")
            return
        busy = {index for on in listed.values() for index in on}
        for gpu in gpus:
            index = int(gpu["index"])
            if gpu["memory_used"] or index in busy:
                host.free_since.pop(index, None)
            else:
                host.free_since.setdefault(index, now)
        due = []
        for slot in host.slots:
            if slot.job is not None and _alive(slot.job):
                continue
            if slot.job is not None:
                slot.job, slot.gone_since = None, now
            gone = now - (slot.gone_since if slot.gone_since is not None else now)
            free = all(now - host.free_since.get(i, now) >= slot.after for i in slot.gpus)
            if gone >= slot.after and free:
                due.append(slot)
        for slot in due:  # decided before any starts: jobs that share a GPU come back together
            try:
                slot.job = host.reader.spawn(**slot.spec)
                slot.gone_since = None
                _log(f"{host.name}: started {slot.spec['role']} {slot.spec.get('name')} (PID {slot.job.pid})")
            except (SimError, ValueError) as exc:
                slot.gone_since = now  # try again later
                _log(f"{host.name}: could not start {slot.spec.get('name')}: {exc}")
            for index in slot.gpus:
                host.free_since.pop(index, None)
        if due:
            host.reader.forget_gone()

    def close(self) -> None:
        threads = [threading.Thread(target=h.reader.close) for h in self.hosts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def _daemon_parser() -> argparse.ArgumentParser:
    p = Parser(prog="gputui.cli.demod")
    p.add_argument("--dir", required=True)
    p.add_argument("--ready-fd", type=int, required=True)
    schedule_arguments(p)
    return p


def daemon_main(argv: list[str]) -> int:
    """The daemon's process (started by `_spawn_daemon`): fork the daemon proper, which serves."""
    args = _daemon_parser().parse_args(argv)
    if os.fork():
        os._exit(0)  # the starter reaps this one; the daemon goes to init (or the nearest subreaper)
    directory = Path(args.dir)

    def reply(line: str) -> None:
        if args.ready_fd < 0:
            return
        try:
            os.write(args.ready_fd, (line + "\n").encode())
            os.close(args.ready_fd)
        except OSError:
            pass  # the starter is gone: nobody to tell
        args.ready_fd = -1

    try:
        problem = private_problem(directory, "the demo's directory")
        if problem:
            raise DemoError(problem, Exit.REFUSED)
        # Held for the daemon's life (never closed; not inherited: O_CLOEXEC, and the sims' sessions
        # get only the fds they are passed). The log is the winner's: opened once the lock is ours.
        if take_lock(directory) is None:
            reply("running")
            return Exit.OK
        log = open_private(directory / LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    except (DemoError, OSError) as exc:
        reply(f"error {exc}")
        return Exit.REFUSED
    null = os.open(os.devnull, os.O_RDWR)
    for target, source in ((0, null), (1, null), (2, log)):
        os.dup2(source, target)
    os.close(null)
    os.close(log)
    return _serve(directory, options_of(args), reply)


def _serve(directory: Path, options: Options, reply: Callable[[str], None]) -> int:
    daemon = Daemon(directory, options)

    def on_signal(signum: int, frame: object) -> None:
        _log(f"signal {signal.Signals(signum).name}: ending")
        daemon.stopping.set()

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)
    write_state(directory, {"version": 1, "state": "starting", "pid": os.getpid(),
                             "start_time": start_time(os.getpid()), "directory": str(directory)})  # fmt: skip
    _log(f"demo daemon PID {os.getpid()} starting in {directory}")
    try:
        try:
            daemon.open()
        except (ReaderError, SimError, OSError, ValueError) as exc:
            _log(f"could not start: {exc}")
            reply(f"error {exc}")
            return Exit.FAILED
        write_state(directory, daemon.state())
        reply("ready")
        _log("ready: " + ", ".join(f"{h.name} {h.reader.directory}" for h in daemon.hosts))
        why = daemon.run()
        _log(f"ending: {why}")
    finally:
        daemon.close()
        try:
            os.unlink(directory / STATE_FILE)
        except OSError:
            pass
        _log("ended")
    return Exit.OK

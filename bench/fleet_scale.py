#!/usr/bin/env python3
"""Fleet scale: the app with 16, 64, 128 hosts at 1 Hz over loopback SSH (issue 6, item 4).

    python bench/fleet_scale.py [--hosts 16,64,128] [--seconds 30] [--warmup 5] [--sshd 4]
                                [--name dev] [--out-dir bench/results]

Every host is its own SSH connection (asyncssh, as the app makes them) to one of `--sshd` loopback
OpenSSH servers (tests/support/sshd.py: generated keys, a private known_hosts and ssh config; one `Host`
alias per host), running its own remote probe with simulated GPUs: the "empty" scenario, 4 GPUs, so
that 128 remote probes fit this machine (a probe with the demo scenario also runs 7 job processes).
The real Textual app runs headless (`run_test(headless=True, size=(160, 50))`, compositing included)
on the fleet of those links, on the fleet view (all GPUs of all hosts in one table). Once every host
is live, each host gets one job: a process that holds a context on its GPU 0 (8 GiB, 60 % util, so
the sim's utilization, temperature and power move every sample and every sample changes the screen,
as on a busy fleet). The jobs are forked from one helper process and end when it does.

Measured over the window, after every host is live and a warm-up:
- app CPU: `time.process_time()` of this process (the app, its fleet and its SSH client) per second
  of wall time, in % of one core. The remote probes and sshd run on "other hosts": not counted.
- app RSS at the end of the window.
- sample-to-screen delay, from the probe's sample `time` (same clock here) to (a) the end of the
  app's redraw that drew it into the widgets (`_redraw`, at most every REDRAW_GAP = 0.1 s), every
  host, and (b) the end of the next compositor refresh of the screen (the strips rendered; headless
  skips only the terminal write), for the hosts with a row in the fleet table's window at that
  redraw (the tables repaint only the rows that changed and are in view; a host out of view has
  nothing to paint until it is scrolled to, and then its newest sample is there already). A
  sample that changed no cell of its rows (same util, temperature, memory as the one before) is on
  screen at the end of its redraw: the screen already shows what it says.
  Only the newest sample of a host is drawn, so each drawn sample counts once.
- as context: the remote probes' CPU (from /proc, per host), the sshd processes' CPU, and how busy
  the whole machine was (the probes share its cores with the app here).

Each host count runs in its own process (so RSS and CPU are its own). Remote probes are started at
most `--connect-at-once` at a time (here they share the app's two cores; on a real fleet each has
its own host). Everything started is ended by PID; the sims' directories are checked to be gone.
Prints a table and writes `<out-dir>/fleet_scale_<name>.txt` and `.raw.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


# --------------------------------------------------------------------------- /proc helpers


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process (all its threads), in seconds; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def runqueue_wait() -> int:
    """Nanoseconds this process's threads spent runnable but waiting for a CPU (/proc/self/schedstat
    of the main thread: the app's loop)."""
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1])


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def box_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    index = min(len(values) - 1, max(0, round(q / 100 * (len(values) - 1))))
    return values[index]


REMOTE = {
    "idle": "at SCHED_IDLE (and autogroup nice 19)",
    "nice": "at nice 19 (and autogroup nice 19)",
    "same": "at the app's priority",
}


def lower_priority(pid: int, how: str) -> None:
    """The remote side stands in for other machines: let it use only what the app leaves."""
    if how == "idle":
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    elif how == "nice":
        os.setpriority(os.PRIO_PROCESS, pid, 19)


def lower_autogroups(pids: list[int], how: str) -> int:
    """With autogrouping (/proc/sys/kernel/sched_autogroup_enabled), every session is a scheduling
    group that gets a fair share against the app's own, whatever its tasks' policy: every SSH session
    and every sim is one. Give those groups the lowest weight (nice 19); returns how many were set."""
    if how == "same":
        return 0
    done = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/autogroup", "w") as f:
                f.write("19")
            done += 1
        except OSError:
            pass
    return done


# --------------------------------------------------------------------------- one job per host

JOBS = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
from gputui.api import create_context, open_devices
r, w = os.pipe()
kids = []
for directory in sys.argv[2:]:
    pid = os.fork()
    if pid == 0:
        os.close(w)
        create_context(directory, 0, 8 << 30, 60)
        open_devices(directory)
        os.read(r, 1)  # EOF when the helper ends
        os._exit(0)
    kids.append(pid)
os.close(r)
sys.stdout.write("%d\n" % len(kids))
sys.stdout.flush()
sys.stdin.read()  # until the bench closes it
os.close(w)
for pid in kids:
    os.waitpid(pid, 0)
"""


def start_jobs(sim_dirs: list[str], remote: str) -> subprocess.Popen[str]:
    helper = subprocess.Popen(
        [sys.executable, "-c", JOBS, str(ROOT), *sim_dirs],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert helper.stdout is not None
    lower_priority(helper.pid, remote)  # before it forks the jobs: they inherit it
    started = helper.stdout.readline().strip()
    if started != str(len(sim_dirs)):
        helper.kill()
        raise RuntimeError(f"the job helper started {started!r} jobs, not {len(sim_dirs)}")
    return helper


def stop_jobs(helper: subprocess.Popen[str]) -> None:
    assert helper.stdin is not None
    helper.stdin.close()  # the helper closes the pipe: every job exits, the helper reaps them
    try:
        helper.wait(30)
    except subprocess.TimeoutExpired:
        helper.kill()
        helper.wait()


# --------------------------------------------------------------------------- one host count


async def measure(
    hosts: int,
    seconds: float,
    warmup: float,
    sshd: int,
    at_once: int,
    base: Path,
    profile: Path | None = None,
    remote: str = "idle",
    tuned_gc: bool = True,
    redraw_gap: float | None = None,
    remote_cpus: set[int] | None = None,
    key_every: float = 0.0,
) -> dict[str, Any]:
    from flood import Frames, press  # bench/flood.py: a key as the driver sends it, timed to its frame

    from gputui.api import LIVE, Fleet, FleetEvent, HostSpec, SampleArrived, SshLink
    from gputui.cli.dashboard import tune_gc
    from gputui.ui import make_app
    from gputui.ui.widgets.fleet_table import split_row_key
    from gputui.ui.widgets.host_list import GROUP
    from tests.support.sshcluster import SSHD_NAMES, comm, processes_marked
    from tests.support.sshd import SshEnv

    if redraw_gap is not None:
        import gputui.ui.intake as app_module

        app_module.REDRAW_GAP = redraw_gap  # EXPERIMENT: read at each redraw
    remote_tmp = base / "remote-tmp"
    remote_tmp.mkdir(parents=True)
    env = SshEnv(base / "ssh")
    extra = (f"SetEnv TMPDIR={remote_tmp}", "MaxStartups 1000", "MaxSessions 16")
    servers = [env.add(f"sshd-{i}", extra_config=extra) for i in range(max(1, min(sshd, hosts)))]
    for server in servers:  # what the sessions start inherits it: the probes, the sims
        assert server.process is not None
        lower_priority(server.process.pid, remote)
        if remote_cpus:  # the "other hosts" on cores of their own, off the app's
            os.sched_setaffinity(server.process.pid, remote_cpus)
    names = [f"h{i:03d}" for i in range(hosts)]
    with open(env.ssh_config, "a") as out:
        for i, name in enumerate(names):
            out.write(servers[i % len(servers)].config_block(name))

    gate = asyncio.Semaphore(at_once)
    links: dict[str, SshLink] = {}

    class GatedLink(SshLink):
        async def open(self) -> None:
            async with gate:
                await super().open()

    def make(name: str) -> SshLink:
        spec = HostSpec(name=name, address=name, reader="sim", sim_scenario="empty")
        link = GatedLink(spec, known_hosts=env.known_hosts, ssh_config=env.ssh_config, agent_path=None,
                         interval=1.0, hello_timeout=120.0)  # fmt: skip
        links[name] = link
        return link

    fleet = Fleet()
    for name in names:
        fleet.add(name, lambda name=name: make(name), interval=1.0)

    # Sample-to-screen: the newest not-yet-drawn sample of each host, by its probe `time`.
    pending: dict[str, tuple[float, float]] = {}
    unpainted: list[tuple[float, float]] = []  # drawn samples of hosts in view, until the next paint
    drawn: list[float] = []  # probe's sample time -> end of the redraw that drew it
    painted: list[float] = []  # probe's sample time -> end of the compositor refresh after that
    arrived: list[float] = []  # probe's sample time -> the fleet has it (probe, sshd, SSH, decoding)
    drawn_app: list[float] = []  # arrival -> drawn: the app's own part
    painted_app: list[float] = []  # arrival -> on screen
    redraw_ms: list[float] = []
    paint_ms: list[float] = []
    redraw_info: list[tuple[float, int, bool]] = []
    gc_ms: list[tuple[int, float, float]] = []  # (generation, wall ms, CPU ms) of each collection
    gc_start = [0.0, 0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            gc_start[:] = [time.perf_counter(), time.thread_time()]
        elif recording:
            wall = (time.perf_counter() - gc_start[0]) * 1000
            gc_ms.append((info["generation"], wall, (time.thread_time() - gc_start[1]) * 1000))

    gc.callbacks.append(on_gc)
    dirty: dict[str, int] = {}
    recording = False

    def on_fleet(change: FleetEvent) -> None:
        if isinstance(change, SampleArrived):
            now = time.time()
            pending[change.view.name] = (change.sample.time, now)
            if recording:
                arrived.append(now - change.sample.time)

    fleet.listen(on_fleet)
    app = make_app(fleet, interval=1.0)
    original_redraw = app._redraw

    def in_view() -> set[str]:
        """The hosts with a row in the fleet table's window (the table repaints only changed rows in
        view: a sample of a host out of view is drawn into the table but not painted until scrolled to)."""
        main = app._main
        if main is None or not main.is_mounted:
            return set()
        table = main.fleet_table
        top = int(table.scroll_y)
        bottom = top + max(0, table.size.height - (table.header_height if table.show_header else 0))
        keys = (table._row_locations.get_key(i) for i in range(top, min(bottom, table.row_count)))
        # A folded group's line (its key starts with GROUP) draws no host's sample.
        values = [k.value for k in keys if k is not None and k.value is not None]
        return {split_row_key(v)[0] for v in values if not v.startswith(GROUP)}

    repainted: set[str] = set()  # hosts whose fleet rows changed a cell in this redraw (KeyedTable._put)

    def redraw() -> None:
        taken = dict(pending)  # host -> (probe time, arrival time) of its newest sample
        pending.clear()
        repainted.clear()
        changed = len(app._changed)
        ages = time.monotonic() - app._last_ages >= 1.0
        t0 = time.perf_counter()
        original_redraw()
        end = time.time()
        if recording:
            redraw_ms.append((time.perf_counter() - t0) * 1000)
            redraw_info.append((redraw_ms[-1], changed, ages))
            drawn.extend(end - t for t, _ in taken.values())
            drawn_app.extend(end - a for _, a in taken.values())
            # A host in view whose sample changed a cell waits for the next paint; one whose sample
            # changed nothing shown is on screen already (the screen shows those very values).
            shown = in_view()
            unpainted.extend(v for host, v in taken.items() if host in shown and host in repainted)
            for host, (t, a) in taken.items():
                if host in shown and host not in repainted:
                    painted.append(end - t)
                    painted_app.append(end - a)

    app._redraw = redraw  # type: ignore[method-assign]  # before mount: the timer takes this one
    if tuned_gc:
        tune_gc(fleet)  # as `gputui` does before it runs the app (cli.run_ui)
    result: dict[str, Any] = {"hosts": hosts, "sshd": len(servers)}
    helper: subprocess.Popen[str] | None = None
    try:
        async with app.run_test(headless=True, size=(160, 50)) as pilot:
            main = app._main
            assert main is not None
            original_refresh = main._compositor_refresh

            def compositor_refresh() -> None:
                t0 = time.perf_counter()
                if recording:
                    for widget in main._dirty_widgets:
                        dirty[type(widget).__name__] = dirty.get(type(widget).__name__, 0) + 1
                original_refresh()
                if recording:
                    paint_ms.append((time.perf_counter() - t0) * 1000)
                if unpainted:
                    end = time.time()
                    painted.extend(end - t for t, _ in unpainted)
                    painted_app.extend(end - a for _, a in unpainted)
                    unpainted.clear()

            main._compositor_refresh = compositor_refresh  # type: ignore[method-assign]
            table = main.fleet_table
            original_put = table._put

            def put(key: str, column: str, cell: Any) -> None:
                if not key.startswith(GROUP):  # a folded group's line
                    repainted.add(split_row_key(key)[0])
                original_put(key, column, cell)

            table._put = put  # type: ignore[method-assign]
            t0 = time.monotonic()
            while not all(v.status == LIVE for v in fleet.hosts):
                if time.monotonic() - t0 > 60 + hosts * 3:
                    down = [(v.name, v.status, v.detail) for v in fleet.hosts if v.status != LIVE]
                    raise RuntimeError(f"{len(down)} hosts not live: {down[:5]}")
                await pilot.pause(0.2)
            result["connect_s"] = time.monotonic() - t0
            sim_dirs = sorted(str(p) for p in remote_tmp.glob("gputui-sim-*"))
            helper = start_jobs(sim_dirs, remote)
            if remote_cpus:
                os.sched_setaffinity(helper.pid, remote_cpus)
            t1 = time.monotonic()
            while not all(v.sample and v.sample.gpus[0].util_gpu for v in fleet.hosts):
                if time.monotonic() - t1 > 60:
                    raise RuntimeError("the jobs do not show on every host")
                await pilot.pause(0.2)
            # Healthy hosts are folded into their group's one line: unfold it, as an operator who
            # watches every GPU does (`+` on the line), so that every GPU has a row and a key moves.
            table.focus()
            table.move_cursor(row=0)
            table.action_unfold()
            t1 = time.monotonic()
            while table.row_count < hosts and time.monotonic() - t1 < 60:
                await asyncio.sleep(0.2)
            table.move_cursor(row=0)
            remote_pids = processes_marked(str(remote_tmp)) + [
                p for s in servers for p in s.session_pids() if comm(p) in SSHD_NAMES
            ]
            result["autogroups_lowered"] = lower_autogroups(remote_pids, remote)
            await asyncio.sleep(warmup)
            probes = {n: link.hello["pid"] for n, link in links.items() if link.hello}
            sshd_sessions = [p for s in servers for p in s.session_pids() if comm(p) in SSHD_NAMES]
            before_probe = {n: cpu_seconds(p) for n, p in probes.items()}
            before_sshd = {p: cpu_seconds(p) for p in sshd_sessions}
            busy0, total0 = box_busy()
            seqs0 = {v.name: v.sample.seq for v in fleet.hosts}
            profiler = None
            if profile is not None:
                from pyinstrument import Profiler  # pip install pyinstrument (not a dependency)

                profiler = Profiler(interval=0.001, async_mode="disabled")
                profiler.start()
            recording = True
            print(f"window begins ({os.getpid()})", file=sys.stderr, flush=True)  # for a profiler to attach
            table.focus()
            frames = Frames(app, table) if key_every > 0 else None
            keys: list[float] = []
            unseen = 0  # keys no frame showed within flood.GIVE_UP_S
            cpu0, wall0, wait0 = time.process_time(), time.monotonic(), runqueue_wait()
            if frames is None:
                await asyncio.sleep(seconds)
            while frames is not None and time.monotonic() < wall0 + seconds:
                began = time.monotonic()  # a `j` every key_every s: what an operator feels
                shown = (await press(app, table, "j", frames))[1]
                if shown is None:
                    unseen += 1
                else:
                    keys.append(shown)
                await asyncio.sleep(max(0.0, key_every - (time.monotonic() - began)))
            cpu1, wall1, wait1 = time.process_time(), time.monotonic(), runqueue_wait()
            recording = False
            if os.environ.get("FLEET_SCALE_HEAP"):
                import collections

                objects = gc.get_objects()
                kinds = collections.Counter(type(o).__qualname__ for o in objects)
                result["heap"] = {"tracked": len(objects), "top": kinds.most_common(25)}
                del objects
            if profiler is not None:
                profiler.stop()
                profile.write_text(profiler.output_text(unicode=False, color=False, show_all=True))
            busy1, total1 = box_busy()
            wall = wall1 - wall0
            after_probe = {n: cpu_seconds(p) for n, p in probes.items()}
            after_sshd = {p: cpu_seconds(p) for p in sshd_sessions}
            probe_pct = [
                100 * (after_probe[n] - before_probe[n]) / wall
                for n in probes
                if before_probe[n] is not None and after_probe[n] is not None
            ]
            sshd_total = sum(
                after_sshd[p] - before_sshd[p]
                for p in sshd_sessions
                if before_sshd[p] is not None and after_sshd[p] is not None
            )
            samples = sum(v.sample.seq - seqs0[v.name] for v in fleet.hosts)
            result.update(
                seconds=wall,
                app_cpu_pct=100 * (cpu1 - cpu0) / wall,
                app_rss_mib=rss_bytes() / 2**20,
                samples=samples,
                samples_per_s=samples / wall,
                all_live_after=all(v.status == LIVE for v in fleet.hosts),
                key_ms=keys,
                key_unseen=unseen,
                delay_drawn_ms=[1000 * d for d in drawn],
                delay_painted_ms=[1000 * d for d in painted],
                delay_arrived_ms=[1000 * d for d in arrived],
                app_drawn_ms=[1000 * d for d in drawn_app],
                app_painted_ms=[1000 * d for d in painted_app],
                app_runqueue_wait_pct=100 * (wait1 - wait0) / 1e9 / wall,
                redraw_ms=redraw_ms,
                paint_ms=paint_ms,
                redraw_info=redraw_info,
                gc_ms=gc_ms,
                dirty_widgets=dirty,
                probe_cpu_pct=probe_pct,
                sshd_cpu_pct_per_conn=100 * sshd_total / wall / max(1, hosts),
                sshd_processes=len(sshd_sessions),
                box_busy_pct=100 * (busy1 - busy0) / max(1, total1 - total0) * (os.cpu_count() or 1),
                fleet_rows=main.fleet_table.row_count,
            )
            stop_jobs(helper)
            helper = None
    finally:
        if helper is not None:
            stop_jobs(helper)
        # The app has stopped the fleet: every probe was asked to quit. Wait for them, then the servers.
        deadline = time.monotonic() + 60
        while processes_marked(str(remote_tmp)) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        left = processes_marked(str(remote_tmp))
        env.close()
        for pid in processes_marked(str(remote_tmp)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        result["left_behind"] = left
        result["sim_dirs_left"] = len(list(remote_tmp.glob("gputui-sim-*")))
    return result


# --------------------------------------------------------------------------- through the decode path

CHANGE_EVERY = 5  # a template's readings change every 5th sample: a fifth of the hosts each second
PREFLIGHT_EVERY = 10  # samples between preflight readings (the probe's default at 1 Hz)
T0 = 1_800_000_000.0  # the recorded samples' clock


def template_samples(hello: dict[str, Any], base: dict[str, Any], j: int, count: int) -> list[dict[str, Any]]:
    """`count` samples of template host `j`, from a demo sample: its readings change on every
    CHANGE_EVERY-th sample (offset by `j`, so that a fifth of the templates change each second):
    utilization, temperature and power of one or two GPUs, the host's CPU and RAM, and in two changes
    of five a process that comes (a new PID on a GPU, its memory added to the GPU's) or goes (one
    that came before), as many of each.
    In between, what a real probe's samples change anyway: seq, time, cost, the host's uptime and
    load, the processes' elapsed time (from one hour to three days: a fleet's jobs run long; the ones that
    come start at 0); a preflight reading every PREFLIGHT_EVERY samples."""
    import copy
    import random

    rng = random.Random(j)
    state = copy.deepcopy(base)
    for p in state["processes"]:  # a fleet's jobs run for hours (the demo's had just started)
        p["elapsed"] = round(rng.uniform(3600.0, 3 * 86400.0), 1)
    preflight = {g["index"]: g.get("preflight") for g in base["gpus"]}
    first = next((p for p in state["processes"] if p["kind"] == "user"), state["processes"][0])
    added: list[dict[str, Any]] = []
    next_pid = 200_000 + 1_000 * j
    out = []
    for t in range(count):
        state = copy.deepcopy(state)
        state["seq"] = t + 1
        state["time"] = T0 + t
        for p in state["processes"]:
            p["elapsed"] = round((p.get("elapsed") or 0.0) + 1.0, 1)
        if isinstance(state.get("host"), dict):  # a host's load moves every second, busy or not
            state["host"]["uptime"] = round(state["host"]["uptime"] + 1.0, 2)
            state["host"]["load1"] = round(max(0.0, state["host"]["load1"] + rng.uniform(-0.05, 0.05)), 2)
        state["cost_ms"] = {k: (round(rng.uniform(0.1, 3.0), 3) if v is not None else None)
                            for k, v in state["cost_ms"].items()}  # fmt: skip
        for g in state["gpus"]:
            g["preflight"] = preflight.get(g["index"]) if t % PREFLIGHT_EVERY == 0 else None
        if t and (t + j) % CHANGE_EVERY == 0:
            for g in rng.sample(state["gpus"], rng.choice((1, 2))):
                g["util_gpu"] = rng.randrange(0, 101)
                g["util_mem"] = rng.randrange(0, 101)
                g["temperature"] = rng.randrange(30, 85)
                g["power_draw"] = round(rng.uniform(60.0, 700.0), 1)
            if isinstance(state.get("host"), dict):
                state["host"]["cpu_percent"] = round(rng.uniform(0.0, 100.0), 1)
                state["host"]["memory_used"] = rng.randrange(1 << 30, state["host"]["memory_total"])
            roll = rng.random()  # as many come as go: a process starts on a host every 25 s or so
            if roll < 0.2 or (roll < 0.4 and not added):
                gpu = rng.choice(state["gpus"])
                size = rng.randrange(1, 16) << 30
                pid = next_pid = next_pid + 1
                proc = copy.deepcopy(first)
                proc.update(pid=pid, start_time=3_000_000 + pid, ppid=1, pgid=pid, sid=pid, elapsed=0.0,
                            cpu_percent=round(rng.uniform(0, 100), 1), gpus=[gpu["index"]],
                            gpu_memory={str(gpu["index"]): size}, job=None,
                            command=["python", "train.py", f"--run={pid}"],
                            gpu_util={str(gpu["index"]): {"sm": rng.randrange(0, 101), "mem": 0, "enc": 0, "dec": 0}})  # fmt: skip
                state["processes"].append(proc)
                added.append(proc)
                gpu["memory_used"] = min(gpu["memory_total"], gpu["memory_used"] + size)
                gpu["accounting"]["processes"] += size
            elif roll < 0.4:
                gone = added.pop(0)
                state["processes"] = [p for p in state["processes"] if p["pid"] != gone["pid"]]
                for index, size in gone["gpu_memory"].items():
                    gpu = next(g for g in state["gpus"] if g["index"] == int(index))
                    gpu["memory_used"] = max(0, gpu["memory_used"] - size)
                    gpu["accounting"]["processes"] -= size
        out.append(state)
    return out


def make_recordings(directory: Path, templates: int, count: int, wire_format: str) -> list[Path]:
    """One recording file per template host (its hello, then `count` samples, as the probe writes
    them: every sample whole, or deltas as a probe sends them once the app asks): the demo
    recordings' hosts, varied (template_samples)."""
    from gputui.api import fit_line, load_recording

    directory.mkdir(parents=True, exist_ok=True)
    demos = [load_recording(ROOT / "tests" / "fixtures" / f"{name}.jsonl") for name in ("demo-a", "demo-b")]
    paths = []
    for j in range(templates):
        records = demos[j % len(demos)]
        hello = dict(next(r for r in records if r["type"] == "hello"))
        base = next(r for r in records if r["type"] == "sample")
        samples = template_samples(hello, base, j, count)
        path = directory / f"template-{j:03d}.jsonl"
        with open(path, "wb") as out:
            if wire_format == "delta":
                from gputui.api import DELTAS_EVERY, SampleEncoder

                hello["capabilities"] = sorted({*hello.get("capabilities", []), "delta"})
                out.write(fit_line(hello))
                encoder = SampleEncoder()  # asked as the app asks (gputui/fleet/deltas.py), each template's
                # whole samples at a place of its own, spread over the period as a fleet's probes pick
                # theirs (gputui/probe/main.py): one host in DELTAS_EVERY sends one each second
                encoder.ask(DELTAS_EVERY, j * DELTAS_EVERY // templates % DELTAS_EVERY)
                for sample in samples:
                    out.write(encoder.line(sample))
            else:
                out.write(fit_line(hello))
                for sample in samples:
                    out.write(fit_line(sample))
        paths.append(path)
    return paths


async def measure_decode(
    hosts: int,
    seconds: float,
    warmup: float,
    recordings: list[Path],
    key_every: float = 0.2,
    profile: Path | None = None,
    tuned_gc: bool = True,
    pace: bool = True,
) -> dict[str, Any]:
    """`hosts` PlaybackLinks, host i playing recording i % len(recordings) at 1 Hz from a phase of
    its own in the second; the real app headless at 200x50 on the fleet view; a `j` every
    `key_every` seconds through the window. `pace`: as `gputui` does (its samples slower while it
    cannot keep up: gputui/fleet/pacing.py), unless `--no-pace`."""
    import random

    from flood import Frames, press  # bench/flood.py: a key as the driver sends it, timed to its frame

    from gputui.api import (
        DOWN,
        LIVE,
        Fleet,
        FleetEvent,
        PlaybackLink,
        Recording,
        SampleArrived,
        StatusChanged,
    )
    from gputui.cli.dashboard import tune_gc
    from gputui.ui import make_app
    from tests.support.apps import scratch_log

    played = [Recording(p) for p in recordings]
    rng = random.Random(0)
    fleet = Fleet()
    for i in range(hosts):
        name = f"h{i:04d}"
        recording, phase = played[i % len(played)], rng.random()
        fleet.add(name, lambda r=recording, p=phase, n=name: PlaybackLink(r, phase=p, label=n), interval=1.0)
    counted = [0]
    counting = False
    taken = [0]  # every sample taken, window or not (to see the queue after the fill drain)

    downs: collections.Counter[str] = collections.Counter()

    def on_fleet(change: FleetEvent) -> None:
        if isinstance(change, StatusChanged) and change.view.status == DOWN:
            downs[change.view.reason or "down"] += 1
        if isinstance(change, SampleArrived):
            taken[0] += 1
            if counting:
                counted[0] += 1

    fleet.listen(on_fleet)
    app = make_app(fleet, interval=1.0, log_path=scratch_log(), pace=pace)
    if tuned_gc:
        tune_gc(fleet)  # as `gputui` does before it runs the app (cli.run_ui)
    result: dict[str, Any] = {"hosts": hosts, "through": "decode", "recordings": len(played), "pace": pace}
    t0 = time.monotonic()  # (the hosts connect while the app starts: connect_s counts from here)
    async with app.run_test(headless=True, size=(200, 50)):
        main = app._main
        assert main is not None
        # The pacer watches from the window's warm-up on, not while the bench fills five minutes of
        # history at once below (a stall of tens of seconds at 4,096 hosts, which a real app spreads
        # over those five minutes) and the hosts' lines queued meanwhile drain.
        watching = app.pacer is not None and app.pacer.active
        if app.pacer is not None:
            app.pacer.active = False
        while not all(v.status == LIVE for v in fleet.hosts):
            if time.monotonic() - t0 > 120:
                down = [(v.name, v.status, v.detail) for v in fleet.hosts if v.status != LIVE]
                raise RuntimeError(f"{len(down)} hosts not live: {down[:5]}")
            await asyncio.sleep(0.2)  # not pilot.pause: it waits for the screen to be idle, which a
            # thousand hosts connecting never let it be
        result["connect_s"] = time.monotonic() - t0
        result["links_made_again"] = sum(max(0, v.connects - 1) for v in fleet.hosts)
        result["why_down"] = dict(downs)  # why links went down while connecting (reason: times)
        # Every GPU's history full, as after five minutes (HISTORY samples): RSS is measured with it.
        from gputui.api import HISTORY

        for view in fleet.hosts:
            if view.sample is not None:
                for _ in range(HISTORY):
                    view.record(view.sample)
        table = main.fleet_table
        table.focus()
        frames = Frames(app, table)
        filled = time.monotonic()
        result["history_fill_s"] = filled - t0 - result["connect_s"]
        # The lines the hosts sent during the fill are taken first: the pacer starts watching once
        # the app takes no more than its hosts send (two seconds in a row at most a tenth over).
        calm, before = 0, taken[0]
        while calm < 2 and time.monotonic() - filled < 300:
            await asyncio.sleep(1.0)
            calm = calm + 1 if taken[0] - before <= 1.1 * hosts else 0
            before = taken[0]
        result["drained_s"] = time.monotonic() - filled
        if app.pacer is not None:
            app.pacer.active = watching
        await asyncio.sleep(warmup)
        counting = True
        received0 = {v.name: v.received for v in fleet.hosts}
        profiler = None
        if profile is not None:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        latencies: list[float] = []
        rss: list[float] = []
        pauses: list[tuple[int, float]] = []  # (generation, ms) of each garbage collection
        started = [0.0]

        def on_gc(phase: str, info: dict[str, Any]) -> None:
            if phase == "start":
                started[0] = time.perf_counter()
            else:
                pauses.append((info["generation"], (time.perf_counter() - started[0]) * 1e3))

        gc.callbacks.append(on_gc)
        print(f"window begins ({os.getpid()})", file=sys.stderr, flush=True)  # for a profiler to attach
        cpu0, wall0 = time.process_time(), time.monotonic()
        end = wall0 + seconds
        unseen = 0
        next_rss = 0.0
        while time.monotonic() < end:
            began = time.monotonic()
            if began >= next_rss:
                rss.append(rss_bytes() / 2**20)
                next_rss = began + 1.0
            shown = (await press(app, table, "j", frames))[1]
            if shown is None:
                unseen += 1  # no frame showed it within flood.GIVE_UP_S
            else:
                latencies.append(shown)
            await asyncio.sleep(max(0.0, key_every - (time.monotonic() - began)))
        cpu1, wall1 = time.process_time(), time.monotonic()
        gc.callbacks.remove(on_gc)
        counting = False
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(str(profile))
        rss.append(rss_bytes() / 2**20)
        wall = wall1 - wall0
        updated = sum(1 for v in fleet.hosts if v.received != received0[v.name])
        result.update(
            seconds=wall,
            app_cpu_pct=100 * (cpu1 - cpu0) / wall,
            app_rss_mib=max(rss),
            app_rss_end_mib=rss[-1],
            key_ms=latencies,
            key_unseen=unseen,
            samples=counted[0],
            samples_per_s=counted[0] / wall,
            hosts_updated=updated,
            all_live_after=all(v.status == LIVE for v in fleet.hosts),
            fleet_rows=table.row_count,
            cursor_row=table.cursor_row,
            gc_ms=pauses,
            objects=len(gc.get_objects()),
            frozen=gc.get_freeze_count(),
            paced=app.paced,  # the interval the app slowed its hosts to (None: 1 s as asked)
            pace_notes=[e.text for e in main.action_log.entries if e.tag == "pace"],
        )
        # What a full collection costs now (the pause a key may land in): one, timed.
        began_gc = time.perf_counter()
        gc.collect()
        result["full_gc_ms"] = (time.perf_counter() - began_gc) * 1e3
        app.exit()  # not pilot.press: it waits for the whole app to go idle, which a busy one may not
    await fleet.stop()
    for r in played:
        r.close()
    return result


DECODE_COLUMNS = (
    ("hosts", "hosts", "{:d}"),
    ("app_cpu_pct", "app CPU % of a core", "{:.1f}"),
    ("key_p50", "key -> screen ms p50", "{:.0f}"),
    ("key_p99", "p99", "{:.0f}"),
    ("key_max", "max", "{:.0f}"),
    ("app_rss_mib", "app RSS MiB (max)", "{:.0f}"),
    ("gc", "GC ms/s", "{:.1f}"),
    ("gc_max", "longest GC ms", "{:.0f}"),
    ("keys", "keys", "{:d}"),
    ("rows", "fleet rows", "{:d}"),
)


def markdown(columns: tuple[tuple[str, str, str], ...], rows: list[dict[str, Any]]) -> list[str]:
    """`rows` as a Markdown table of `columns` (key, title, format)."""
    lines = [
        "| " + " | ".join(c[1] for c in columns) + " |",
        "| " + " | ".join("---:" for _ in columns) + " |",
    ]
    for row in rows:
        lines.append("| " + " | ".join(fmt.format(row[key]) for key, _, fmt in columns) + " |")
    return lines


def decode_row(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "hosts": r["hosts"],
        "app_cpu_pct": r["app_cpu_pct"],
        "key_p50": med(r["key_ms"]),
        "key_p99": pct(r["key_ms"], 99),
        "key_max": max(r["key_ms"], default=float("nan")),
        "app_rss_mib": r["app_rss_mib"],
        "gc": sum(ms for _, ms in r["gc_ms"]) / r["seconds"],
        "gc_max": max((ms for _, ms in r["gc_ms"]), default=0.0),
        "keys": len(r["key_ms"]),
        "rows": r["fleet_rows"],
    }


def decode_table(results: list[dict[str, Any]], header: str) -> str:
    lines = [header, "", *markdown(DECODE_COLUMNS, [decode_row(r) for r in results]), ""]
    for r in results:
        lines.append(
            f"{r['hosts']} hosts: all live in {r['connect_s']:.1f} s, {r['hosts_updated']} hosts got a "
            f"sample in the {r['seconds']:.1f} s window, all live after: {r['all_live_after']}"
        )
    return "\n".join(lines)


def boost(nice: int) -> None:
    """Run this process (the app) at `nice` (negative: ahead of the rest), in a scheduling group of
    its own at the same level (it was started in a session of its own: an autogroup). On a machine
    shared with other work, the app otherwise gets its fair share of the CPU and no more, and its
    key latency and CPU measure the others' load. Needs root (CAP_SYS_NICE)."""
    with open("/proc/self/autogroup", "w") as f:
        f.write(str(nice))
    os.setpriority(os.PRIO_PROCESS, 0, nice)


def cpu_list(text: str | None) -> set[int] | None:
    """`0,1` or `2-15` (or both, comma-separated) as a set of CPU numbers; None for none given."""
    if not text:
        return None
    cpus: set[int] = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def one(args: argparse.Namespace) -> int:
    # Stopped (each_count's stop_count): SystemExit, so that what it started is ended in its finally.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.boost:
        boost(-args.boost)
    if args.app_cpus:  # the app, its fleet and its SSH client on these cores (as `taskset -c` would)
        os.sched_setaffinity(0, cpu_list(args.app_cpus) or set())
    if args.through == "decode":
        recordings = sorted(args.recordings.glob("template-*.jsonl"))
        result = asyncio.run(
            measure_decode(
                args.one,
                args.seconds,
                args.warmup,
                recordings,
                args.key_every,
                args.profile,
                not args.python_gc,
                not args.no_pace,
            )
        )
        print(json.dumps(result))
        return 0
    with tempfile.TemporaryDirectory(prefix="gputui-fleet-scale-") as tmp:
        result = asyncio.run(
            measure(
                args.one,
                args.seconds,
                args.warmup,
                args.sshd,
                args.connect_at_once,
                Path(tmp),
                args.profile,
                args.remote,
                not args.python_gc,
                args.redraw,
                cpu_list(args.remote_cpus),
                args.key_every,
            )
        )
    print(json.dumps(result))
    return 0


# --------------------------------------------------------------------------- the table

COLUMNS = (
    ("hosts", "hosts", "{:d}"),
    ("app_cpu_pct", "app CPU % of a core", "{:.1f}"),
    ("wait", "app waited for a CPU %", "{:.1f}"),
    ("app_rss_mib", "app RSS MiB", "{:.0f}"),
    ("key_p50", "key -> screen ms p50", "{:.0f}"),
    ("key_p99", "p99", "{:.0f}"),
    ("painted_p50", "sample -> screen ms p50", "{:.0f}"),
    ("painted_p99", "p99", "{:.0f}"),
    ("drawn_p50", "sample -> drawn ms p50", "{:.0f}"),
    ("drawn_p99", "p99", "{:.0f}"),
    ("arrived_p50", "sample -> app ms p50", "{:.0f}"),
    ("arrived_p99", "p99", "{:.0f}"),
    ("app_painted_p50", "app -> screen ms p50", "{:.0f}"),
    ("app_painted_p99", "p99", "{:.0f}"),
    ("redraw_p50", "redraw ms p50", "{:.1f}"),
    ("redraw_p99", "p99", "{:.1f}"),
    ("paints", "paints/s", "{:.1f}"),
    ("paint_p50", "paint ms p50", "{:.1f}"),
    ("paint_p99", "p99", "{:.1f}"),
    ("probe_p50", "probe CPU %/host p50", "{:.2f}"),
    ("sshd", "sshd CPU %/conn", "{:.2f}"),
    ("box", "machine busy %", "{:.0f}"),
)


def summary(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "hosts": r["hosts"],
        "app_cpu_pct": r["app_cpu_pct"],
        "app_rss_mib": r["app_rss_mib"],
        "key_p50": med(r.get("key_ms", [])),
        "key_p99": pct(r.get("key_ms", []), 99),
        "drawn_p50": med(r["delay_drawn_ms"]),
        "drawn_p99": pct(r["delay_drawn_ms"], 99),
        "painted_p50": med(r["delay_painted_ms"]),
        "painted_p99": pct(r["delay_painted_ms"], 99),
        "arrived_p50": med(r["delay_arrived_ms"]),
        "arrived_p99": pct(r["delay_arrived_ms"], 99),
        "app_painted_p50": med(r["app_painted_ms"]),
        "app_painted_p99": pct(r["app_painted_ms"], 99),
        "wait": r["app_runqueue_wait_pct"],
        "redraw_p50": med(r["redraw_ms"]),
        "redraw_p99": pct(r["redraw_ms"], 99),
        "paints": len(r["paint_ms"]) / r["seconds"],
        "paint_p50": med(r["paint_ms"]),
        "paint_p99": pct(r["paint_ms"], 99),
        "probe_p50": med(r["probe_cpu_pct"]),
        "sshd": r["sshd_cpu_pct_per_conn"],
        "box": r["box_busy_pct"],
    }


def table(results: list[dict[str, Any]], header: str) -> str:
    lines = [header, "", *markdown(COLUMNS, [summary(r) for r in results]), ""]
    for r in results:
        lines.append(
            f"{r['hosts']} hosts: {r['samples']} samples in {r['seconds']:.1f} s "
            f"({r['samples_per_s']:.1f}/s), connected in {r['connect_s']:.1f} s, "
            f"{len(r['delay_drawn_ms'])} drawn, {len(r['delay_painted_ms'])} of them in view, all live after: {r['all_live_after']}, "
            f"fleet rows {r['fleet_rows']}, left behind {len(r['left_behind'])}, "
            f"sim dirs left {r['sim_dirs_left']}"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", default="16,64,128", help="comma-separated host counts")
    ap.add_argument("--seconds", type=float, default=30.0, help="measurement window")
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds after every host is live")
    ap.add_argument("--sshd", type=int, default=4, help="loopback sshd servers (hosts spread over them)")
    ap.add_argument("--connect-at-once", type=int, default=8, help="remote probes started at a time")
    ap.add_argument(
        "--remote",
        choices=("idle", "nice", "same"),
        default="idle",
        help="scheduling of the sshd servers and all they start (the 'other hosts'): SCHED_IDLE (only "
        "idle CPU), nice 19, or the same as the app",
    )
    ap.add_argument("--name", default="dev", help="results file suffix")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    ap.add_argument(
        "--python-gc", action="store_true", help="keep CPython's GC settings (gputui tunes them: cli.tune_gc)"
    )
    ap.add_argument(
        "--redraw", type=float, help="EXPERIMENT: the app's least time between redraws (REDRAW_GAP)"
    )
    ap.add_argument(
        "--through",
        choices=("ssh", "decode"),
        default="ssh",
        help="ssh: real probes over loopback SSH; decode: recorded probe output played as bytes "
        "through the line reader and parser (PlaybackLink), no probe, no SSH",
    )
    ap.add_argument(
        "--wire",
        choices=("whole", "delta"),
        default="delta",
        help="decode: what the recordings hold: every sample whole (what a probe sends until asked "
        "for deltas, and an older probe always), or deltas (what the app asks for: gputui.fleet.deltas)",
    )
    ap.add_argument("--templates", type=int, default=64, help="decode: recordings the hosts share")
    ap.add_argument("--key-every", type=float, default=0.2, help="seconds between key presses (0: none)")
    ap.add_argument("--app-cpus", help="the app's cores, e.g. 0,1 (default: any)")
    ap.add_argument(
        "--remote-cpus", help="the sshd servers', probes' and jobs' cores, e.g. 2-15 (default: any)"
    )
    ap.add_argument(
        "--no-pace",
        action="store_true",
        help="decode: the app keeps 1 Hz however far behind it falls (gputui --no-pace); by default "
        "it paces its hosts' samples as gputui does (gputui/fleet/pacing.py)",
    )
    ap.add_argument(
        "--boost",
        type=int,
        default=0,
        metavar="N",
        help="decode: run the app at nice -N in a scheduling group of its own at -N (root; for a "
        "machine shared with other work)",
    )
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--recordings", type=Path, help=argparse.SUPPRESS)
    ap.add_argument(
        "--profile",
        type=Path,
        help="with --one: write a profile of the window here (ssh: pyinstrument text; decode: cProfile)",
    )
    args = ap.parse_args()
    if args.one:
        return one(args)
    if args.through == "decode":
        return main_decode(args)
    load_before = os.getloadavg()[0]
    import asyncssh
    import textual

    def keep(results: list[dict[str, Any]]) -> None:
        """The table of the counts measured so far, saved as each one ends."""
        header = (
            f"fleet scale: {platform.node()} ({os.cpu_count()} cores), {time.strftime('%Y-%m-%d')}, "
            f"Linux {platform.release()}, CPython {platform.python_version()}, textual {textual.__version__}, "
            f"asyncssh {asyncssh.__version__}; 1 Hz, sim 'empty' x 4 GPUs per host, "
            f"{args.seconds:g} s window after {args.warmup:g} s warm-up, remote side "
            f"{REMOTE[args.remote]}, GC {'as CPython sets it' if args.python_gc else 'tuned (cli.tune_gc)'}, "
            f"a key every {args.key_every:g} s, app on cores {args.app_cpus or 'any'}, "
            f"remote side on cores {args.remote_cpus or 'any'}, {args.sshd} sshd"
            f"{f', EXPERIMENT redraws at least {args.redraw:g} s apart' if args.redraw else ''}, loadavg before "
            f"{load_before:.2f}, after {os.getloadavg()[0]:.2f}"
        )
        save(args.out_dir / f"fleet_scale_{args.name}", table(results, header), header, results)

    results = each_count(
        args.hosts,
        lambda count: [sys.executable, __file__, "--one", str(count), "--seconds", str(args.seconds),
                       "--warmup", str(args.warmup), "--sshd", str(args.sshd),
                       "--connect-at-once", str(args.connect_at_once), "--remote", args.remote,
                       "--key-every", str(args.key_every),
                       *(["--app-cpus", args.app_cpus] if args.app_cpus else []),
                       *(["--remote-cpus", args.remote_cpus] if args.remote_cpus else []),
                       *(["--python-gc"] if args.python_gc else []),
                       *(["--redraw", str(args.redraw)] if args.redraw else [])],
        timeout=1800,
        on_result=keep,
    )  # fmt: skip
    return 0 if results else 1


def each_count(
    hosts: str,
    argv_for: Callable[[int], list[str]],
    timeout: float,
    on_result: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]] | None:
    """Each host count of `hosts` (comma-separated) measured in a process of its own (`argv_for`),
    in a session of its own; their results up to the first that failed (what it said printed), or
    None when the first failed. `on_result`: called with the results so far after each count (a
    run stopped later keeps them). Stopped itself (SIGTERM, a `timeout` around the bench), it stops
    the count under way first: SIGTERM to that process's group (its sshd servers are in it; their
    sessions' probes end on EOF), SIGKILL after 60 s."""
    results: list[dict[str, Any]] = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for count in (int(x) for x in hosts.split(",")):
        child = subprocess.Popen(
            argv_for(count), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            out, err = child.communicate(timeout=timeout)
        except BaseException:
            stop_count(child)
            raise
        if child.returncode != 0:
            print(f"{count} hosts failed:", out[-3000:], err[-3000:], file=sys.stderr)
            return results or None  # the counts measured before it are kept
        results.append(json.loads(out.strip().splitlines()[-1]))
        print(f"{count} hosts done", file=sys.stderr, flush=True)
        if on_result is not None:
            on_result(results)
    return results


def stop_count(child: subprocess.Popen[str]) -> None:
    """End a count's process (ours) and its group: it cleans up on SIGTERM; SIGKILL after 60 s."""
    for sig, wait in ((signal.SIGTERM, 60.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(child.pid, sig)  # its own session and group: the PID we started
        except ProcessLookupError:
            return
        try:
            child.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def save(stem: Path, text: str, header: str, results: list[dict[str, Any]]) -> None:
    """Print the table and keep it (`stem`.txt) with the raw runs (`stem`.raw.json)."""
    print(text)
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".txt").write_text(text + "\n")
    stem.with_suffix(".raw.json").write_text(json.dumps({"header": header, "runs": results}, indent=1) + "\n")


def main_decode(args: argparse.Namespace) -> int:
    """Each host count in its own process, on recordings made here once (before any is measured)."""
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="gputui-fleet-decode-") as tmp:
        count = int(args.warmup + args.seconds + 150)  # connecting 4,096 hosts takes a while
        make_recordings(Path(tmp), args.templates, count, args.wire)
        results = each_count(
            args.hosts,
            lambda hosts: [sys.executable, __file__, "--one", str(hosts), "--through", "decode",
                           "--recordings", tmp, "--seconds", str(args.seconds), "--warmup", str(args.warmup),
                           "--key-every", str(args.key_every), "--boost", str(args.boost),
                           *(["--python-gc"] if args.python_gc else []),
                           *(["--no-pace"] if args.no_pace else []),
                           *(["--profile", f"{args.profile}.{hosts}"] if args.profile else [])],
            timeout=3600,
        )  # fmt: skip
    if results is None:
        return 1
    import textual

    header = (
        f"fleet scale through the decode path: {platform.node()} ({os.cpu_count()} cores), "
        f"{time.strftime('%Y-%m-%d')}, Linux {platform.release()}, CPython {platform.python_version()}, "
        f"textual {textual.__version__}; 1 Hz, {args.templates} recordings of demo hosts (4 GPUs), "
        f"a fifth of the hosts changing each sample, samples {args.wire}, 200x50 fleet view, "
        f"a key every {args.key_every:g} s, {args.seconds:g} s window after {args.warmup:g} s warm-up, "
        f"GC {'as CPython sets it' if args.python_gc else 'tuned (cli.tune_gc)'}, "
        f"{f'app at nice -{args.boost} in its own autogroup, ' if args.boost else ''}loadavg before {load_before:.2f}, after {os.getloadavg()[0]:.2f}"
    )
    save(args.out_dir / f"fleet_decode_{args.name}", decode_table(results, header), header, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

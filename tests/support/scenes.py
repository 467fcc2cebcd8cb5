"""Fixed screens for the snapshot tests and scripts/screenshots: the same app, data and keys.

Each scene is an app built from the replayed recordings with a frozen clock, a terminal size and a
`run_before` that drives the app into the state to capture. Nothing here depends on timing: the
scenes wait for the data, not for a duration.

The snapshot tests build them with the fixture's hostile process (a name that is Rich markup, a
command line with ESC and BEL bytes: they must render literally); scripts/screenshots, for the
README, with `hostile=False`: the demo as a user sees it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from textual.pilot import Pilot

from gputui.fleet.fleet import Fleet
from gputui.fleet.session import DOWN
from gputui.model import Proc, Sample
from gputui.recording.player import ReplayLink
from gputui.transport.base import TransportError
from gputui.ui import GpuTuiApp, make_app
from gputui.ui.screens.gpu_detail import GpuDetailScreen
from gputui.ui.screens.plan import PlanScreen
from gputui.ui.screens.proc_detail import ProcDetailScreen
from gputui.ui.widgets.proc_table import job_row_key, proc_row_key
from tests.support.apps import (
    FROZEN,
    HOSTS,
    OPERATOR,
    QUIET,
    Unreachable,
    build_app,
    last_seq,
    recording,
    scratch_log,
)
from tests.support.pilot import redrawn, settle, wait_for

THEMES = ("gputui-dark", "gputui-light", "gputui-contrast")


HOSTILE_PID = 66666  # tests/fixtures/record.py adds it to demo-a's last samples


class Build(Protocol):
    def __call__(self, theme: str, hostile: bool = True) -> GpuTuiApp: ...


@dataclass(frozen=True)
class Scene:
    name: str
    size: tuple[int, int]
    build: Build  # theme -> app (hostile=False: without the fixture's hostile process)
    run_before: Callable[[Pilot[Any]], Awaitable[None]]


def demo_records(name: str) -> list[dict[str, Any]]:
    """The recording of `name` as the demo shows it: without the fixture's hostile process."""
    records = []
    for record in recording(name):
        if record["type"] == "sample":
            processes = [p for p in record["processes"] if p["pid"] != HOSTILE_PID]
            record = dict(record, processes=processes)
        records.append(record)
    return records


def _records(hostile: bool) -> dict[str, list[dict[str, Any]]] | None:
    return None if hostile else {name: demo_records(name) for name in ("demo-a", "demo-b")}


def _demo(theme: str, hostile: bool = True) -> GpuTuiApp:
    return build_app(theme=theme, records=_records(hostile))


def with_parents(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`records` with each sample's `parents` as a probe of this version sends them: the recordings
    before the `parents` field (tests/fixtures/record.py) have none. Added from the recording itself:
    an unlisted parent of two or more listed processes (the sim's session, launcher of every
    simulated job) is the probe's child (the "self" monitor), named as the sim names it. A no-op on
    a recording that has them."""
    out = []
    for record in records:
        if record["type"] == "sample" and "parents" not in record:
            procs = record["processes"]
            listed = {p["pid"] for p in procs}
            probe = next((p for p in procs if p.get("reason") == "self"), None)
            children: dict[int, list[dict[str, Any]]] = {}
            for p in procs:
                if p.get("ppid") not in listed and (p.get("ppid") or 0) > 1:
                    children.setdefault(p["ppid"], []).append(p)
            parents = [
                {
                    "pid": pid,
                    "start_time": min(k["start_time"] for k in kids) - 1,
                    "ppid": probe["pid"] if probe else None,
                    "name": "python",
                    "command": ["python", "-S", "/tmp/gputui-sim/bin/gputui_sim_session.py"],
                    "user": kids[0].get("user"),
                    "uid": kids[0].get("uid"),
                    "state": "S",
                }
                for pid, kids in sorted(children.items())
                if len(kids) >= 2
            ]
            record = dict(record, parents=parents)
        out.append(record)
    return out


def _family(theme: str, hostile: bool = True) -> GpuTuiApp:
    records = {
        name: with_parents(demo_records(name) if not hostile else list(recording(name))) for name in HOSTS
    }
    return build_app(theme=theme, records=records)


def family_app(**kwargs: Any) -> GpuTuiApp:
    """The demo with each sample's parents (the sim's session process, launcher of every job)."""
    return build_app(records={name: with_parents(list(recording(name))) for name in HOSTS}, **kwargs)


def launched(sample: Sample) -> list[Proc]:
    """The processes the tree hangs under the launcher (the sample's parent): its children, but for
    a hidden holder tied to a ghost, which hangs under the ghost."""
    launcher = sample.parents[0].pid
    return [p for p in sample.processes if p.ppid == launcher and not (p.kind == "hidden" and p.links)]


async def _fleet(pilot: Pilot[Any]) -> None:
    await settle(pilot)


async def _host(pilot: Pilot[Any]) -> None:
    await settle(pilot)
    await pilot.press("right_square_bracket")  # the next host after "All hosts": demo-a
    await redrawn(pilot)


async def _ghost_gpu(pilot: Pilot[Any]) -> None:
    await _host(pilot)
    await pilot.press("down", "down", "down")  # GPU 2: a user, a ghost and its hidden holder
    await redrawn(pilot)


async def _help(pilot: Pilot[Any]) -> None:
    await _host(pilot)
    await pilot.press("question_mark")
    await pilot.pause()


async def _filter(pilot: Pilot[Any]) -> None:
    await _host(pilot)
    await pilot.press("tab", "slash", *"serve")
    await redrawn(pilot)


def _demo_plans(theme: str, hostile: bool = True) -> GpuTuiApp:
    app = build_app(theme=theme, records=_records(hostile))
    app.fresh_timeout = 0  # plan on the replayed sample: a recording answers no full-scan request
    return app


async def _dialog(pilot: Pilot[Any]) -> None:
    app: GpuTuiApp = pilot.app  # type: ignore[assignment]
    while not isinstance(app.screen, PlanScreen):
        await pilot.pause(0.02)
    body = app.screen.query_one("#plan-body")
    while body.styles.max_height is None:  # fitted to the terminal after its first layout
        await pilot.pause(0.02)
    await pilot.pause()


async def _plan_gpu(pilot: Pilot[Any]) -> None:
    await _ghost_gpu(pilot)
    await pilot.press("f")  # free GPU 2: its user, the ghost's hidden holder; the ghost left alone
    await _dialog(pilot)


async def _plan_host(pilot: Pilot[Any]) -> None:
    await _host(pilot)
    await pilot.press("F")  # every GPU of demo-a: monitors left alone, the sweep listed apart
    await _dialog(pilot)


# Each host's own load (docs/PROTOCOL.md `sample.host`), fixed: the recordings predate the field.
HOST_METRICS = {
    "demo-a": {
        "cpu_percent": 37.5,
        "cpus": 64,
        "load1": 12.25,
        "load5": 10.5,
        "load15": 9.75,
        "memory_total": 2015 * 2**30 + 123 * 2**20,
        "memory_used": 1234 * 2**30 + 567 * 2**20,
        "swap_total": 8 * 2**30,
        "swap_used": 2**30 + 5 * 2**20,
        "uptime": 3 * 86400 + 4 * 3600 + 5 * 60,
    },
    "demo-b": {
        "cpu_percent": 2.0,
        "cpus": 32,
        "load1": 0.5,
        "load5": 0.25,
        "load15": 0.1,
        "memory_total": 503 * 2**30,
        "memory_used": 61 * 2**30 + 321 * 2**20,
        "swap_total": 0,
        "swap_used": 0,
        "uptime": 40 * 86400,
    },
}


def metrics_records(name: str, hostile: bool = True) -> list[dict[str, Any]]:
    """The recording of `name` with its host's load in every sample."""
    records = list(recording(name)) if hostile else demo_records(name)
    return [dict(r, host=HOST_METRICS[name]) if r["type"] == "sample" else r for r in records]


def _metrics(theme: str, hostile: bool = True) -> GpuTuiApp:
    return build_app(theme=theme, records={name: metrics_records(name, hostile) for name in HOST_METRICS})


async def _host_mib(pilot: Pilot[Any]) -> None:
    await _host(pilot)
    await pilot.press("m")
    await redrawn(pilot)


async def _fleet_mib(pilot: Pilot[Any]) -> None:
    await settle(pilot)
    await pilot.press("m")
    await redrawn(pilot)


async def _host_paused(pilot: Pilot[Any]) -> None:
    await _host(pilot)
    await pilot.press("z")
    await redrawn(pilot)


def _no_driver(theme: str, hostile: bool = True) -> GpuTuiApp:
    hello = dict(recording("demo-a")[0])
    hello["host"] = dict(hello["host"], hostname="workstation", driver_version=None, cuda_driver_version=None)
    hello["error"] = {"code": "no-driver", "message": "NVML Shared Library Not Found"}
    sample = dict(recording("demo-a")[1], gpus=[], processes=[])
    fleet = Fleet()
    fleet.add("workstation", lambda: ReplayLink([hello, sample]), interval=QUIET)
    return make_app(fleet, interval=QUIET, clock=lambda: FROZEN, theme=theme)


async def _no_driver_ready(pilot: Pilot[Any]) -> None:
    app: GpuTuiApp = pilot.app  # type: ignore[assignment]
    while app.fleet.view("workstation").sample is None:
        await pilot.pause(0.02)
    await redrawn(pilot)


def _preflight(theme: str, hostile: bool = True) -> GpuTuiApp:
    """Host "p" of the "preflight" sim scenario (tests/fixtures/preflight.jsonl)."""
    return build_app(("p",), theme=theme, records={"p": list(recording("preflight"))})


def _mig(theme: str, hostile: bool = True) -> GpuTuiApp:
    """Host "m" of the "mig" sim scenario (tests/fixtures/mig.jsonl): GPU 0 in MIG mode, three
    instances, jobs in two of them."""
    return build_app(("m",), theme=theme, records={"m": list(recording("mig"))})


def _mps(theme: str, hostile: bool = True) -> GpuTuiApp:
    """Host "s" of the "mps" sim scenario (tests/fixtures/mps.jsonl): an MPS control daemon, its
    server and three clients on GPU 0."""
    app = build_app(("s",), theme=theme, records={"s": list(recording("mps"))})
    app.fresh_timeout = 0  # plan on the replayed sample: a recording answers no full-scan request
    return app


JOBS_HOST = "sim-jobs"  # what the "jobs" recording is replayed as (a config's sim_scenario = "jobs")
# Where the "jobs" recording's jobs run, as a host sees them (the sim runs them all in one session):
# the launcher a Slurm job, the supervisor a unit, the trainer in an LXC guest, the eval in Docker.
PLACES = {
    "torchrun": {"slurm_job": "4711"},
    "supervisor.py": {"unit": "embeddings-worker.service"},
    "train.py": {"container": "lxc/129"},
    "eval.py": {"container": "docker/3f2a9c1d0b7e"},
}


def _place_of(command: list[str]) -> dict[str, str]:
    script = next((a.rsplit("/", 1)[-1] for a in command if a.rsplit("/", 1)[-1] in PLACES), "")
    return PLACES.get(script, {})


def placed_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The "jobs" recording with its jobs placed (PLACES): each job's Slurm job, unit or container,
    and a container's processes' too (with their PID inside it)."""
    out = []
    for record in records:
        if record["type"] == "sample":
            jobs = [dict(j, **_place_of(j["command"])) for j in record.get("jobs", [])]
            where = {j["id"]: j.get("container") for j in jobs}
            processes = [
                dict(p, container=where[p["job"]], nspid=45) if where.get(p.get("job")) else p
                for p in record["processes"]
            ]
            record = dict(record, jobs=jobs, processes=processes)
        out.append(record)
    return out


def _jobs(theme: str, hostile: bool = True) -> GpuTuiApp:
    """Host JOBS_HOST: the "jobs" sim scenario (tests/fixtures/jobs.jsonl): a torchrun-like launcher
    (no GPU) with two ranks, a supervisor and its worker, two one-process jobs of one user."""
    app = build_app((JOBS_HOST,), theme=theme, records={JOBS_HOST: list(recording("jobs"))})
    app.fresh_timeout = 0  # plan on the replayed sample: a recording answers no full-scan request
    return app


def _jobs_placed(theme: str, hostile: bool = True) -> GpuTuiApp:
    """The "jobs" scenario with its jobs in a Slurm job, a unit, an LXC guest and a Docker container."""
    app = build_app((JOBS_HOST,), theme=theme, records={JOBS_HOST: placed_records(list(recording("jobs")))})
    app.fresh_timeout = 0
    return app


async def _jobs_view(pilot: Pilot[Any]) -> None:
    """J on the host's processes, focused."""
    app: GpuTuiApp = pilot.app  # type: ignore[assignment]
    await settle(pilot)
    assert app._main is not None
    app._main.proc_table.focus()
    await pilot.press("J")
    await redrawn(pilot)


async def _plan_job(pilot: Pilot[Any]) -> None:
    """X on the launcher's row: its root first, then its two ranks."""
    app: GpuTuiApp = pilot.app  # type: ignore[assignment]
    await _jobs_view(pilot)
    assert app._main is not None
    sample = app.fleet.view(JOBS_HOST).sample
    assert sample is not None
    launcher = next(j for j in sample.jobs if len(j.members) > 1)
    assert app._main.proc_table.move_to(job_row_key(launcher), scroll=True)
    await pilot.press("X")
    await _dialog(pilot)


def _gpu_view(gpu_row: int, host: bool = False) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """Open the GPU view on the GPU table's row `gpu_row` ("all" is row 0), of the first host when
    `host` (the demo starts on "All hosts")."""

    async def run(pilot: Pilot[Any]) -> None:
        app: GpuTuiApp = pilot.app  # type: ignore[assignment]
        await (_host(pilot) if host else settle(pilot))
        assert app._main is not None
        app._main.gpu_table.focus()
        await pilot.press(*["down"] * gpu_row, "i")
        while not isinstance(app.screen, GpuDetailScreen):
            await pilot.pause(0.02)
        await pilot.pause()
        app.screen.redraw()  # at its final size
        await pilot.pause()

    return run


async def _procs(pilot: Pilot[Any]) -> None:
    """demo-a's processes, focused."""
    app: GpuTuiApp = pilot.app  # type: ignore[assignment]
    await _host(pilot)
    assert app._main is not None
    app._main.proc_table.focus()
    await redrawn(pilot)


async def _tree(pilot: Pilot[Any]) -> None:
    await _procs(pilot)
    await pilot.press("t")  # families: the session under the probe, the ghost's child, the zombie
    await redrawn(pilot)


async def _tree_folded(pilot: Pilot[Any]) -> None:
    """The tree with the family of the process that has a zombie child folded."""
    app: GpuTuiApp = pilot.app  # type: ignore[assignment]
    await _tree(pilot)
    assert app._main is not None
    table = app._main.proc_table
    sample = app.fleet.view("demo-a").sample
    assert sample is not None
    zombie = next(p for p in sample.processes if p.kind == "zombie")
    parent = next(p for p in sample.processes if p.pid == zombie.ppid)
    assert table.move_to(proc_row_key(parent), scroll=True)
    await pilot.press("minus")
    await redrawn(pilot)


def _detail_of(pick: Callable[[GpuTuiApp], str]) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """The process detail (d) of the process row `pick` names, once the probe's answer is drawn."""

    async def run(pilot: Pilot[Any]) -> None:
        app: GpuTuiApp = pilot.app  # type: ignore[assignment]
        await _procs(pilot)
        assert app._main is not None
        assert app._main.proc_table.move_to(pick(app), scroll=True)
        await pilot.press("d")
        while not isinstance(app.screen, ProcDetailScreen) or app.screen.status == "reading":
            await pilot.pause(0.02)
        await pilot.pause()

    return run


async def _proc_history(pilot: Pilot[Any]) -> None:
    """The process detail of the largest GPU user, scrolled to its history charts."""
    await _detail_of(_widest_user_row)(pilot)
    app: GpuTuiApp = pilot.app  # type: ignore[assignment]
    app.screen.query_one("#pdetail-box").scroll_end(animate=False)
    await pilot.pause()


def _hostile_row(app: GpuTuiApp) -> str:
    sample = app.fleet.view("demo-a").sample
    assert sample is not None
    return proc_row_key(next(p for p in sample.processes if p.pid == HOSTILE_PID))


def _tied_holder_row(app: GpuTuiApp) -> str:
    """A ghost's hidden child (tied to it by process group): why it is a holder is the point."""
    sample = app.fleet.view("demo-a").sample
    assert sample is not None
    return proc_row_key(next(p for p in sample.processes if p.kind == "hidden" and p.links))


def _widest_user_row(app: GpuTuiApp) -> str:
    """The GPU user on the most GPUs (memory per GPU)."""
    sample = app.fleet.view("demo-a").sample
    assert sample is not None
    users = [p for p in sample.processes if p.kind == "user" and p.pid != HOSTILE_PID]
    return proc_row_key(max(users, key=lambda p: (len(p.gpus), p.gpu_bytes)))


async def _mib_gpu_view(pilot: Pilot[Any]) -> None:
    await _gpu_view(3, host=True)(pilot)
    await pilot.press("m")
    await pilot.pause()


# -- a host that goes down (issue 19, item 3) ---------------------------------------------------

REFUSED = "ssh: connect to host demo-b port 22: Connection refused"
DOWN_FOR = 125.0  # seconds the down host has been silent when the scene is taken: "2m"


class SteppedClock:
    """A wall clock that stands still until a test moves it (sample ages, "last seen 2m ago")."""

    def __init__(self, now: float = FROZEN) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class EndingLink(ReplayLink):
    """A recording whose link breaks after its last record, as a host that goes down does."""

    failure: TransportError | None = None

    async def recv(self) -> dict[str, Any] | None:
        if self._hello_sent and self._position >= len(self.records):
            self.failure = TransportError("unreachable", REFUSED)
            return None
        return await super().recv()


def down_fleet(records: dict[str, list[dict[str, Any]]] | None = None) -> Fleet:
    """demo-a live; demo-b plays its recording, then goes down for good (its last sample kept)."""
    fleet = Fleet()
    a = list(records["demo-a"]) if records else list(recording("demo-a"))
    b = list(records["demo-b"]) if records else list(recording("demo-b"))
    fleet.add("demo-a", lambda: ReplayLink(a), interval=QUIET)
    links: list[Any] = [EndingLink(b)]
    fleet.add("demo-b", lambda: links.pop() if links else Unreachable(REFUSED), interval=QUIET)
    return fleet


def _down(theme: str, hostile: bool = True) -> GpuTuiApp:
    return make_app(
        down_fleet(_records(hostile)),
        interval=QUIET,
        clock=SteppedClock(),
        theme=theme,
        log_path=scratch_log(),
        operator=OPERATOR,
    )


async def went_down(pilot: Pilot[Any]) -> None:
    """Until demo-b is down (after its whole recording) and DOWN_FOR seconds have passed."""
    app: GpuTuiApp = pilot.app  # type: ignore[assignment]
    await wait_for(pilot, lambda: app.fleet.view("demo-b").status == DOWN)
    view = app.fleet.view("demo-a")
    await wait_for(pilot, lambda: view.sample is not None and view.sample.seq >= last_seq("demo-a"))
    await redrawn(pilot)
    clock = app.clock
    assert isinstance(clock, SteppedClock)
    clock.now += DOWN_FOR
    app.received["demo-a"] = clock.now  # demo-a's replay is over, but it is live: as if it just spoke
    assert app._main is not None
    app._main.refresh_data(set(), ages=True)  # what the 1 s tick does
    await redrawn(pilot)


async def _down_host(pilot: Pilot[Any]) -> None:
    await went_down(pilot)
    assert pilot.app._main is not None  # type: ignore[attr-defined]
    pilot.app._main.select_host("demo-b")  # type: ignore[attr-defined]
    await redrawn(pilot)


SCENES = {
    scene.name: scene
    for scene in (
        Scene("fleet", (120, 36), _demo, _fleet),
        Scene("main", (120, 36), _demo, _host),
        Scene("ghost", (120, 36), _demo, _ghost_gpu),
        Scene("help", (120, 36), _demo, _help),
        Scene("filter", (120, 36), _demo, _filter),
        Scene("narrow", (80, 24), _demo, _host),
        Scene("narrow-fleet", (80, 24), _demo, _fleet),
        Scene("no-driver", (100, 24), _no_driver, _no_driver_ready),
        Scene("plan", (120, 36), _demo_plans, _plan_gpu),
        Scene("plan-host", (120, 36), _demo_plans, _plan_host),
        Scene("plan-narrow", (80, 24), _demo_plans, _plan_gpu),
        Scene("preflight", (120, 36), _preflight, _fleet),
        Scene("mig", (120, 36), _mig, _fleet),
        Scene("mig-narrow", (80, 24), _mig, _fleet),
        Scene("mps", (120, 36), _mps, _fleet),
        Scene("gpu-view", (120, 40), _preflight, _gpu_view(2)),  # GPU 1: orphaned memory
        Scene("ghost-view", (120, 40), _demo, _gpu_view(3, host=True)),  # demo-a's GPU 2: a ghost
        Scene("gpu-view-narrow", (80, 24), _preflight, _gpu_view(3)),  # GPU 2: throttling, cooling
        Scene("gpu-view-wide", (200, 50), _preflight, _gpu_view(4)),  # GPU 3: persistence off, ECC
        Scene("tree", (120, 36), _family, _tree),
        Scene("tree-narrow", (80, 24), _family, _tree),
        Scene("tree-wide", (200, 50), _family, _tree_folded),
        Scene("proc-detail", (120, 36), _demo, _detail_of(_hostile_row)),  # literal, every field
        Scene("proc-detail-narrow", (80, 24), _demo, _detail_of(_tied_holder_row)),
        Scene("proc-detail-wide", (200, 50), _demo, _detail_of(_widest_user_row)),
        # Its GPU memory, SM, CPU and RSS over time (the detail's charts, scrolled to).
        Scene("proc-history", (120, 40), _demo, _proc_history),
        Scene("gpu-view-mig", (120, 40), _mig, _gpu_view(1)),  # GPU 0 in MIG mode: three instances
        # The host header with the host's load; the fleet table's CPU and RAM columns when wide.
        Scene("host-metrics", (120, 36), _metrics, _host),
        Scene("host-metrics-narrow", (80, 24), _metrics, _host),
        Scene("host-metrics-wide", (200, 50), _metrics, _host),
        Scene("fleet-metrics-wide", (200, 50), _metrics, _fleet),
        # m: memory in exact MiB (GPU table, process table, the header's RAM; the fleet's RAM column).
        Scene("mib", (120, 36), _metrics, _host_mib),
        Scene("mib-narrow", (80, 24), _metrics, _host_mib),
        Scene("mib-wide", (200, 50), _metrics, _fleet_mib),
        Scene("mib-gpu-view", (120, 40), _metrics, _mib_gpu_view),
        Scene("paused", (120, 36), _metrics, _host_paused),
        # J: the processes grouped by job (the launcher's row above its two ranks, the supervisor's
        # above its worker, one-process jobs as their process's row).
        # With its jobs placed: a Slurm job, a unit, an LXC guest, a Docker container (the column).
        Scene("jobs", (120, 36), _jobs_placed, _jobs_view),
        Scene("jobs-narrow", (80, 24), _jobs, _jobs_view),
        Scene("jobs-wide", (200, 50), _jobs_placed, _jobs_view),
        Scene("plan-job", (120, 36), _jobs_placed, _plan_job),  # X on the launcher's row
        # demo-b went down 2 minutes ago: its last numbers dimmed, "last seen 2m ago", not counted.
        Scene("down", (120, 36), _down, went_down),
        Scene("down-narrow", (80, 24), _down, _down_host),
        Scene("down-wide", (200, 50), _down, _down_host),
    )
}

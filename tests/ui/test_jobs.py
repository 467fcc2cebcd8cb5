"""Jobs in the dashboard (issue 18), on the real thing: a sim probe as a real subprocess through the
local transport, its GPU memory owned by real processes.

The "jobs" scenario: a torchrun-like launcher (no GPU) with two CUDA ranks, a supervisor that
restarts its worker, two single-process jobs of one user. The "neighbour" scenario: memory used by
processes outside the probe's PID namespace (another guest's job, seen from inside an LXC guest).
Every process signalled here was started by the test's own sim probe, which ends them all when the
app stops the fleet.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from gputui.config.file import HostSpec
from gputui.model import Job, MemoryAccount, Proc, Sample
from gputui.ui import GpuTuiApp
from gputui.ui import jobs as ui_jobs
from gputui.ui.commands import GpuTuiCommands
from gputui.ui.screens.gpu_detail import PART_LABEL, PART_STYLE, GpuDetailScreen
from gputui.ui.screens.help import HelpBody, HelpScreen
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.plan import PlanScreen
from gputui.ui.screens.proc_detail import ProcDetailScreen
from gputui.ui.widgets.proc_table import JOB, job_row_key, proc_row_key
from tests.support.apps import build_app, live_app, recording
from tests.support.pilot import main_of, palette, redrawn, screen_text, settle, wait_for
from tests.support.scenes import JOBS_HOST, placed_records

HOST = "node"


def sim_app(tmp_path: Path, scenario: str, **kwargs: Any) -> GpuTuiApp:
    kwargs.setdefault("operator", "root")
    return live_app(tmp_path, HostSpec(name=HOST, reader="sim", sim_scenario=scenario, sim_seed=3), **kwargs)


def words(app: GpuTuiApp) -> str:
    return " ".join(screen_text(app).split())


async def ready(pilot: Any, jobs: int = 0) -> MainScreen:
    """The host's dashboard once a sample with `jobs` jobs at least has been drawn."""
    app: GpuTuiApp = pilot.app
    view = app.fleet.view(HOST)
    await wait_for(
        pilot,
        lambda: view.sample is not None and bool(view.sample.gpus) and len(view.sample.jobs) >= jobs,
        60,
    )
    await redrawn(pilot)
    return main_of(app)


# -- neighbour: memory used outside this container -------------------------------------------------


async def test_neighbour_gpu_table_and_gpu_view_say_outside_never_orphaned(tmp_path: Path) -> None:
    app = sim_app(tmp_path, "neighbour")
    async with app.run_test(size=(160, 40)) as pilot:
        main = await ready(pilot)
        text = words(app)
        assert "◌ 4.6 GiB outside" in text  # GPU 1: only a neighbour's memory
        assert "orphaned" not in text
        main.gpu_table.focus()
        await pilot.press("down", "down", "i")  # "all", GPU 0, GPU 1
        await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
        await pilot.pause(0.3)
        screen = app.screen
        assert isinstance(screen, GpuDetailScreen) and screen.gpu == 1
        text = words(app)
        assert "outside this container 4.6 GiB" in text  # the bar's legend
        assert "! 4.6 GiB used outside this container: another container or the host" in text
        assert "orphaned" not in text and "reset" not in text.casefold()  # no reset offered from inside
        await pilot.press("right_square_bracket")  # GPU 2: a job here and a neighbour's
        await pilot.pause(0.3)
        assert screen.gpu == 2 and "outside this container 30.0 GiB" in words(app)


def test_every_part_of_a_memory_account_has_a_style_and_a_label() -> None:
    """The GPU view draws each part of the account: a part added to the model (as `outside` was)
    must not open the view onto a KeyError."""
    for part in ("baseline", "processes", *MemoryAccount.UNACCOUNTED):
        assert part in PART_STYLE and part in PART_LABEL, part


# -- jobs: the view, the key, the dialog, the verdict ----------------------------------------------


def alive(pid: int, start_time: int | None) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return False
    return fields[0] != "Z" and int(fields[19]) == start_time


def dialog_text(app: GpuTuiApp) -> str:
    """The screen's words with borders and line breaks gone, so a wrapped cell reads as one."""
    return " ".join(re.sub(r"[┃│╭╮╰╯─━┏┓┗┛]", " ", screen_text(app)).split())


def log_text(main: MainScreen) -> str:
    return "\n".join(e.plain() for e in main.action_log.entries)


def launcher_of(sample: Sample) -> Job:
    """The torchrun-like launcher's job: two members, neither of them its root."""
    [job] = [j for j in sample.jobs if "torchrun" in " ".join(j.command)]
    assert len(job.members) == 2 and job.root not in job.members
    return job


def supervisor_of(sample: Sample) -> Job:
    [job] = [j for j in sample.jobs if "supervisor.py" in " ".join(j.command)]
    return job


async def dialog(pilot: Any) -> PlanScreen:
    app: GpuTuiApp = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))
    await pilot.pause()
    assert isinstance(app.screen, PlanScreen)
    return app.screen


async def test_jobs_view_lists_the_launcher_as_a_job_with_its_two_ranks(tmp_path: Path) -> None:
    app = sim_app(tmp_path, "jobs")
    async with app.run_test(size=(160, 40)) as pilot:
        main = await ready(pilot, jobs=4)
        table = main.proc_table
        table.focus()
        await pilot.press("J")
        await redrawn(pilot)
        sample = app.fleet.view(HOST).sample
        assert sample is not None
        launcher = launcher_of(sample)
        assert table.jobs_mode and " · 4 jobs" in str(table.border_title)
        row = job_row_key(launcher)
        assert row in table.rows_data()
        # The ranks hang under the launcher's row, in the table's order right after it.
        order = table.row_order()
        assert order is not None
        ranks = [proc_row_key(p) for p in sample.processes if p.pid in launcher.members]
        at = order.index(row)
        assert set(order[at + 1 : at + 3]) == set(ranks)
        assert {table._tree[k].parent for k in ranks} == {row}
        text = screen_text(app)
        [line] = [ln for ln in text.splitlines() if f" {launcher.root} " in ln]
        assert "◆ job ×2" in line and "0,1" in line and "36.0 GiB" in line
        assert "torchrun --nproc-per-node 2 train.py" in line
        # The supervisor is a job's row above its worker; a one-process job is its process's row.
        supervisor = supervisor_of(sample)
        assert job_row_key(supervisor) in table.rows_data()
        alone = [j for j in sample.jobs if j.members == (j.root,)]
        assert len(alone) == 2 and not any(job_row_key(j) in table.rows_data() for j in alone)
        # The cursor on the job's row: it is the job's (d shows its root), never a selectable process.
        assert table.move_to(row)
        assert table.cursor_job == launcher and table.cursor_proc_key is None
        assert main.procs.cursor_job() == launcher
        app.clear_notifications()
        await pilot.press("space")  # a job's row is no process to select
        await pilot.pause()
        assert main.state.selection.count() == 0
        assert any("X stops the whole job" in n.message for n in app._notifications)
        await pilot.press("d")  # its root (the launcher, a parent of the ranks), with its job
        await wait_for(pilot, lambda: isinstance(app.screen, ProcDetailScreen))
        await pilot.pause(0.3)
        detail = app.screen
        assert isinstance(detail, ProcDetailScreen) and detail.record.pid == launcher.root
        assert f"Job job {launcher.id} (its root) · 2 members" in words(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is main)
        assert table.move_to(row)
        # On GPU 1's list: the job's memory there, and only the rank there under it.
        main.gpu_table.move_to("1")
        main.refresh_procs()
        await redrawn(pilot)
        [rank1] = [p for p in sample.processes if p.pid in launcher.members and 1 in p.gpus]
        assert {table._tree[k].parent for k in table.rows_data() if k in ranks} == {row}
        assert [k for k in ranks if k in table.rows_data()] == [proc_row_key(rank1)]
        assert table.rows_data()[row]["mem"].plain == "18.0 GiB"
        main.gpu_table.move_to("all")
        main.refresh_procs()
        await redrawn(pilot)
        # A filter that names the job lists it with both ranks (the launcher of the sample drawn: on a
        # busy machine the sim's job may have been started again since the first look).
        main.state.procs.text = "torchrun"
        main.refresh_procs()
        await redrawn(pilot)
        shown = set(table.rows_data())
        [job] = [k for k in shown if k.startswith("@")]
        assert len(shown) == 3 and {table._tree[k].parent for k in shown - {job}} == {job}
        assert "torchrun" in table.rows_data()[job]["command"].plain
        main.state.procs.text = ""
        # t and J take turns; J again: the list.
        await pilot.press("t")
        await redrawn(pilot)
        assert table.tree_mode and not table.jobs_mode and row not in table.rows_data()
        await pilot.press("J", "J")
        await redrawn(pilot)
        assert not table.jobs_mode and not table.tree_mode and " jobs" not in str(table.border_title)
        assert not any(k.startswith(JOB) for k in table.rows_data())


async def test_stop_job_key_lists_the_members_then_stops_the_whole_job(tmp_path: Path) -> None:
    app = sim_app(tmp_path, "jobs")
    async with app.run_test(size=(160, 45)) as pilot:
        main = await ready(pilot, jobs=4)
        table = main.proc_table
        table.focus()
        await pilot.press("J")
        await redrawn(pilot)
        sample = app.fleet.view(HOST).sample
        assert sample is not None
        launcher = launcher_of(sample)
        ranks = [p for p in sample.processes if p.pid in launcher.members]
        assert table.move_to(job_row_key(launcher))

        # The dialog: the job, its root first, each rank with its GPU and memory; Cancel first.
        await pilot.press("X")
        screen = await dialog(pilot)
        [plan] = screen.plans
        assert [j.id for j in plan.jobs] == [launcher.id]
        assert [(t.pid, t.role) for t in plan.job_targets(plan.jobs[0])] == [
            (launcher.root, "root"),
            *sorted((p.pid, "member") for p in ranks),
        ]
        text = dialog_text(app)
        assert f"Stop job {launcher.id} (" in text and "Stop a job · confirm" in text
        assert f"Job {launcher.id} (3 to stop) · 2 members · GPU 0,1 · 36.0 GiB" in text
        assert "Stop 1 job (3 processes) on node" in text
        assert f"{launcher.root} root ◆ root" in text
        for rank in ranks:
            assert re.search(rf"{rank.pid} root ■ user {rank.gpus[0]} 18\.0 GiB", text), text
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        assert alive(launcher.root, launcher.root_start)
        assert all(alive(p.pid, p.start_time) for p in ranks)

        # Confirmed: the launcher and both ranks gone, their memory released.
        await pilot.press("X")
        await dialog(pilot)
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: "verdict:" in log_text(main), 60)
        logged = log_text(main)
        assert f"Stop job {launcher.id} (" in logged
        assert "verdict: stopped, memory released" in logged, logged
        assert not alive(launcher.root, launcher.root_start)
        assert not any(alive(p.pid, p.start_time) for p in ranks)
        # The other jobs were left alone.
        for job in sample.jobs:
            if job.id != launcher.id:
                assert alive(job.root, job.root_start), job


async def test_stop_job_from_a_process_row_stops_its_job_and_a_worker_alone_warns_of_its_supervisor(
    tmp_path: Path,
) -> None:
    """X on a process (the list view): its job's plan. x on the supervisor's worker alone: the
    verdict names the supervisor that still runs and may start it again."""
    app = sim_app(tmp_path, "jobs")
    async with app.run_test(size=(160, 45)) as pilot:
        main = await ready(pilot, jobs=4)
        table = main.proc_table
        table.focus()
        sample = app.fleet.view(HOST).sample
        assert sample is not None
        launcher = launcher_of(sample)
        rank = next(p for p in sample.processes if p.pid in launcher.members)
        assert table.move_to(proc_row_key(rank))
        await pilot.press("X")
        screen = await dialog(pilot)
        assert [j.id for j in screen.plans[0].jobs] == [launcher.id]
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))

        # The monitor (the probe) belongs to no job: X says so, plans nothing.
        probe = next(p for p in sample.processes if p.kind == "monitor")
        assert table.move_to(proc_row_key(probe))
        app.clear_notifications()
        await pilot.press("X")
        await pilot.pause(0.3)
        assert not isinstance(app.screen, PlanScreen)
        assert any("belongs to no job" in n.message for n in app._notifications)

        supervisor = supervisor_of(sample)
        [worker] = [p for p in sample.processes if p.pid in supervisor.members]
        assert table.move_to(proc_row_key(worker))
        await pilot.press("x")
        screen = await dialog(pilot)
        assert [t.pid for t in screen.plans[0].targets] == [worker.pid] and not screen.plans[0].jobs
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: "verdict:" in log_text(main), 60)
        logged = log_text(main)
        assert f"parent {supervisor.root} " in logged and "still runs" in logged, logged
        assert alive(supervisor.root, supervisor.root_start)
        assert any("may restart" in n.title for n in app._notifications)


# -- containers, seen from the host ------------------------------------------------------------------


def jobs_replay(records: list[dict[str, Any]] | None = None) -> GpuTuiApp:
    return build_app(
        (JOBS_HOST,), records={JOBS_HOST: records if records is not None else list(recording("jobs"))}
    )


async def test_container_column_shows_only_while_a_process_has_a_container() -> None:
    app = jobs_replay()
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        main = main_of(app)
        assert main.proc_table.width_of("container") == 0 and "Container" not in screen_text(app)

    hostile = "[red]lxc/129[/red]\x1b[2J"
    records = placed_records(list(recording("jobs")))
    for record in records:
        for proc in record.get("processes", []):
            if proc.get("container") == "lxc/129":
                proc["container"] = hostile
    app = jobs_replay(records)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        main = main_of(app)
        table = main.proc_table
        assert table.width_of("container") > 0
        text = screen_text(app)
        assert "Container" in text and "docker/3f2a9c1d0b7e" in text
        assert "[red]lxc/129[/red]\\e[2J" in text  # literal, the ESC made visible
        sample = app.fleet.view(JOBS_HOST).sample
        assert sample is not None
        docker = next(p for p in sample.processes if p.container == "docker/3f2a9c1d0b7e")
        [line] = [ln for ln in text.splitlines() if f" {docker.pid} " in ln]
        # The column says the container; the note no longer does: the command has the room.
        assert "in container docker" not in line and "python -S .../eval.py" in line
        # The filter finds a container's processes.
        main.state.procs.text = "docker/3f2a"
        main.refresh_procs()
        await redrawn(pilot)
        assert set(table.rows_data()) == {proc_row_key(docker)}
        main.state.procs.text = ""
        main.refresh_procs()
        await redrawn(pilot)
        # Narrow: the column gives way before the command, and the note names the container again.
        await pilot.resize_terminal(80, 24)
        await redrawn(pilot)
        assert table.width_of("container") == 0
        [line] = [ln for ln in screen_text(app).splitlines() if f" {docker.pid} " in ln]
        assert "in container" in line
        # The process detail names the container and the job.
        await pilot.resize_terminal(160, 40)
        await redrawn(pilot)
        table.focus()
        assert table.move_to(proc_row_key(docker))
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ProcDetailScreen))
        await pilot.pause(0.3)
        text = words(app)
        assert "Container docker/3f2a9c1d0b7e" in text
        assert f"Job job {docker.job} (its root) · 1 member: {docker.pid} · GPU 4 · 10.0 GiB" in text
        assert "container docker/3f2a9c1d0b7e" in text and "X on the process table stops" in text


# -- the palette, the help ---------------------------------------------------------------------------


async def test_palette_lists_the_jobs_view_and_stop_job_as_the_keys_do() -> None:
    app = jobs_replay()
    app.fresh_timeout = 0  # plan on the replayed sample: a recording answers no full-scan request
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        main = main_of(app)
        await palette(pilot, "processes by job")
        assert main.proc_table.jobs_mode
        sample = app.fleet.view(JOBS_HOST).sample
        assert sample is not None
        launcher = launcher_of(sample)
        assert main.proc_table.move_to(job_row_key(launcher))
        listed = [e.title for e in GpuTuiCommands(app.screen).entries()]
        assert any(t.startswith(f"Stop job {launcher.id} on {JOBS_HOST}: ") for t in listed), listed
        await palette(pilot, f"stop job {launcher.id}")
        screen = await dialog(pilot)
        assert [j.id for j in screen.plans[0].jobs] == [launcher.id]
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is main)
    app = build_app((JOBS_HOST,), records={JOBS_HOST: list(recording("jobs"))}, read_only=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        await pilot.press("J")
        await redrawn(pilot)
        listed = [e.title for e in GpuTuiCommands(app.screen).entries()]
        assert not [t for t in listed if t.startswith("Stop job")]
        assert main_of(app).proc_table.jobs_mode  # a view, read-only too


async def test_help_lists_the_jobs_keys() -> None:
    app = jobs_replay()
    async with app.run_test(size=(120, 60)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        text = " ".join(app.screen.query_one(HelpBody).plain(110).split())
        assert "J processes grouped by job, each job a row above its members (again: a list)" in text
        assert "X stop the job under the cursor (a job's row, or a process's job)" in text
        assert "Confirmation dialog (f, F, x, X, T, K, I, F9)" in text
    app = build_app((JOBS_HOST,), records={JOBS_HOST: list(recording("jobs"))}, read_only=True)
    async with app.run_test(size=(120, 60)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        text = " ".join(app.screen.query_one(HelpBody).plain(110).split())
        assert "processes grouped by job" in text and "stop the job" not in text


# -- gputui.ui.jobs on hand-made records ---------------------------------------------------------------


def test_group_puts_members_under_their_job_and_a_one_process_job_alone() -> None:
    procs = (
        Proc(pid=21, start_time=210, kind="user", ppid=20, job="20"),
        Proc(pid=22, start_time=220, kind="user", ppid=20, job="20"),
        Proc(pid=30, start_time=300, kind="user", ppid=1, job="30"),
        Proc(pid=40, start_time=400, kind="monitor", ppid=1),
        Proc(pid=50, start_time=500, kind="user", ppid=1, job="99"),  # a job the sample does not carry
    )
    jobs_ = (
        Job(id="20", root=20, root_start=200, members=(21, 22), processes=((20, 200), (21, 210), (22, 220))),
        Job(id="30", root=30, root_start=300, members=(30,), processes=((30, 300),), slurm_job="4711"),
    )
    sample = Sample(seq=1, time=0.0, gpus=(), processes=procs, jobs=jobs_)
    grouped = ui_jobs.group(((proc_row_key(p), p) for p in procs), sample, job_row_key)
    assert set(grouped.jobs) == {"@20"}
    assert {k: n.parent for k, n in grouped.nodes.items()} == {
        "@20": None,
        "21:210": "@20",
        "22:220": "@20",
        "30:300": None,
        "40:400": None,
        "50:500": None,
    }
    assert grouped.alone == {"30:300": jobs_[1]}
    assert ui_jobs.matching(sample, "4711") == {"30"} and ui_jobs.matching(sample, "") == set()

"""The default demo shows what gputui is for: on its two hosts, as `gputui --demo` starts them (real sim
probes through the local transport, each sim's jobs real processes), a torchrun-like launcher with its
ranks, a supervisor with its worker, a data-loader family, a ghost, an idle holder and a stopped
(Ctrl+Z'd) job; and `J` groups them, so that a job's row stands above several processes.

Every process here was started by the test's own sim probes, which end them all when the app stops
the fleet.
"""

from __future__ import annotations

from pathlib import Path

from gputui.cli.demo import demo_specs
from gputui.fleet.fleet import Fleet
from gputui.model import Job, Sample
from gputui.transport.local import LocalLink
from gputui.ui import GpuTuiApp, make_app
from gputui.ui.widgets.proc_table import job_row_key, proc_row_key
from tests.support.apps import LIVE_INTERVAL
from tests.support.pilot import main_of, redrawn, wait_for


def demo_app(tmp_path: Path) -> GpuTuiApp:
    """The app on the default demo's hosts (a fresh demo of the test's own: the suite sets
    GPUTUI_DEMO=fresh), its audit log in tmp_path."""
    fleet = Fleet()
    for spec in demo_specs():
        fleet.add(
            spec.name, lambda spec=spec: LocalLink(spec, interval=LIVE_INTERVAL), interval=LIVE_INTERVAL
        )
    return make_app(fleet, interval=LIVE_INTERVAL, log_path=tmp_path / "actions.jsonl")


def job_named(sample: Sample, word: str) -> Job:
    [job] = [j for j in sample.jobs if word in " ".join(j.command)]
    return job


def samples(app: GpuTuiApp) -> dict[str, Sample]:
    out = {}
    for spec in demo_specs():
        sample = app.fleet.view(spec.name).sample
        if sample is not None and sample.gpus:
            out[spec.name] = sample
    return out


def every_family_seen(app: GpuTuiApp) -> bool:
    """Both hosts sampled with the processes of every family listed (a supervisor's worker or a
    ghost's holder is seen a sample after its parent)."""
    seen = samples(app)
    if len(seen) < 2:
        return False
    kinds = {p.kind for s in seen.values() for p in s.processes}
    states = {p.state for s in seen.values() for p in s.processes}
    multi = [j for s in seen.values() for j in s.jobs if len(j.members) >= 2]
    return {"ghost", "hidden"} <= kinds and "T" in states and len(multi) >= 2


async def test_the_default_demo_has_every_family_and_j_groups_several_processes_under_a_job(
    tmp_path: Path,
) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(180, 50)) as pilot:
        await wait_for(pilot, lambda: every_family_seen(app), 60)
        await redrawn(pilot)
        seen = samples(app)
        a, b = seen["demo-a"], seen["demo-b"]
        # demo-a: a torchrun-like launcher whose two ranks are its job's members (it holds no GPU).
        launcher = job_named(a, "torchrun")
        assert len(launcher.members) == 2 and launcher.root not in launcher.members
        # demo-a: a job stopped by Ctrl+Z (state T), holding its memory.
        [stopped] = [p for p in a.processes if p.state == "T"]
        assert stopped.gpus and "sweep.py" in " ".join(stopped.command)
        # demo-b: a supervisor above its worker; a data-loader family (its workers hold the parent's
        # context: hidden holders tied through the process group, members of the parent's job).
        supervisor = job_named(b, "supervisor.py")
        assert supervisor.members and supervisor.root not in supervisor.members
        family = job_named(b, "pretrain.py")
        hidden = [p for p in b.processes if p.kind == "hidden" and p.pid in family.members]
        assert len(hidden) == 3
        # Both: a ghost (a dead PID's memory) and an idle holder (a notebook kernel at 0 % SM).
        for sample in (a, b):
            assert any(p.kind == "ghost" for p in sample.processes)
            assert any("notebook_kernel.py" in " ".join(p.command) for p in sample.processes)
        main = main_of(app)
        table = main.proc_table
        for name, sample in (("demo-a", a), ("demo-b", b)):
            # The host's "all" row: every process of the host in the table below.
            main.select_host(name)
            main.gpu_table.focus()
            await pilot.press("home")
            await redrawn(pilot)
            table.focus()
            if not table.jobs_mode:
                await pilot.press("J")
                await redrawn(pilot)
            assert table.jobs_mode and " jobs" in str(table.border_title)
            order = table.row_order()
            assert order is not None
            # Each job of several processes is a row, its members right below it.
            grouped = [j for j in sample.jobs if len(j.members) >= 2]
            assert grouped
            for job in grouped:
                members = {proc_row_key(p) for p in sample.processes if p.pid in job.members}
                at = order.index(job_row_key(job))
                assert len(members) >= 2 and set(order[at + 1 : at + 1 + len(members)]) == members, order
                assert {table._tree[k].parent for k in members} == {job_row_key(job)}
            assert job_row_key(launcher if name == "demo-a" else supervisor) in table.rows_data()

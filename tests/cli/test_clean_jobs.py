"""`gputui clean` on jobs (issue 18 part B): real probe subprocesses over the sim's "jobs" scenario.

- a launcher that holds no GPU (torchrun-like, two CUDA-like ranks) is stopped by `--pid
  <launcher>`: root first, then the members left, every member gone with its memory released and
  the root gone too (defect 1: it was refused, exit 2, "not a GPU process");
- `--gpu 2` stops the supervisor's worker: the verdict names the supervisor, which still runs and
  starts a new worker (defect 2: the verdict was CLEAN and said nothing);
- `--job`, `--slurm-job`, `--container`, `--user`: exact names, `--dry-run` lists the members, a
  name that matches nothing is exit 2 with one line listing what exists;
- a PID above the jobs (what acts as init here: the sim's session) is refused, never signalled.

The run_clean tests reuse a fleet started first (start() is idempotent) to learn the sim's PIDs;
the others run `python -m gputui clean` by subprocess on a config host with reader = "sim". Every
sim process ends with its probe.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

from gputui.cli.exits import Exit
from gputui.config.file import HostSpec
from gputui.fleet.fleet import Fleet
from gputui.model import Job, Sample
from gputui.model.events import Restart
from gputui.text.words import KEY_JOB_STOP, restart_words
from tests.support.cli import gputui as run_gputui
from tests.support.commands import clean, fleet_of
from tests.support.procs import start_time

HOST = "lab"
CONFIG = f"""
[[hosts]]
name = "{HOST}"
address = "local"
reader = "sim"
sim_scenario = "jobs"
"""
REPO = Path(__file__).resolve().parents[2]


def gputui(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return run_gputui(*args, timeout=timeout)


def config(tmp_path: Path) -> str:
    path = tmp_path / "gputui.toml"
    path.write_text(CONFIG)
    return str(path)


async def started() -> tuple[Fleet, Sample]:
    fleet = fleet_of([HostSpec(name=HOST, reader="sim", sim_scenario="jobs", sim_seed=3)])
    fleet.start()
    await fleet.wait_first_samples(60)
    sample = fleet.view(HOST).sample
    assert sample is not None and sample.jobs, "the jobs scenario's probe sent no jobs"
    return fleet, sample


def job_named(sample: Sample, name: str) -> Job:
    [job] = [j for j in sample.jobs if j.name == name]
    return job


# -- defect 1: a launcher is stopped by its PID --------------------------------------------------


async def test_a_launchers_pid_stops_its_job_root_first_and_proves_every_member_gone(tmp_path):
    fleet, sample = await started()
    launcher = job_named(sample, "torchrun")
    ranks = launcher.members
    assert len(ranks) == 2 and launcher.root not in {p.pid for p in sample.processes}
    code, out, err = await clean(
        HOST, "--pid", str(launcher.root), "--yes", "--json", "--log", str(tmp_path / "a"), fleet=fleet
    )
    assert code == Exit.CLEAN, err + out
    [host] = json.loads(out)["hosts"]
    assert host["status"] == "stopped" and host["ok"] is True
    plan = host["plan"]
    assert plan["scope"] == "jobs" and plan["title"].startswith(f"Stop job {launcher.id} (")
    [job] = plan["jobs"]
    assert job["root"] == launcher.root and sorted(job["members"]) == sorted(ranks)
    # The root is the first target, the members follow, each with what it holds.
    roles = [(t["pid"], t["role"]) for t in plan["targets"]]
    assert roles[0] == (launcher.root, "root")
    assert sorted(pid for pid, role in roles if role == "member") == sorted(ranks)
    assert all(t["gpu_memory"] for t in plan["targets"] if t["role"] == "member")
    # Every member gone, the root too; the memory the members held is released.
    results = {p["pid"]: p["result"] for p in host["processes"]}
    assert {launcher.root, *ranks} <= set(results)
    assert all(results[pid] == "exited" for pid in (launcher.root, *ranks)), results
    assert {g["result"] for g in host["gpus"].values()} == {"released"} and set(host["gpus"]) == {"0", "1"}
    assert start_time(launcher.root) != launcher.root_start
    # The root got SIGTERM first: the first signal the probe sent went to it.
    signalled = [line for line in err.splitlines() if line[:2].isdigit() and "SIGTERM -> " in line]
    assert signalled and f"SIGTERM -> {launcher.root} " in signalled[0], err
    assert f"Stop job {launcher.id}" in err and "members" in err


async def test_a_dry_run_of_a_job_lists_its_members_and_touches_nothing(tmp_path):
    fleet, sample = await started()
    launcher = job_named(sample, "torchrun")
    log = tmp_path / "a"
    code, out, err = await clean(
        HOST, "--job", launcher.id, "--dry-run", "--json", "--log", str(log), fleet=fleet
    )
    assert code == Exit.CLEAN, err
    [host] = json.loads(out)["hosts"]
    [job] = host["plan"]["jobs"]
    assert job["id"] == launcher.id and sorted(job["targets"]) == sorted([launcher.root, *launcher.members])
    # The text names the job, its root and each member with its GPU and memory.
    [line] = [row for row in err.splitlines() if row.strip().startswith(f"job {launcher.id}: root")]
    assert "2 members" in line and all(str(m) in line for m in launcher.members) and "18.0 GiB" in line
    assert not log.exists()


async def test_a_pid_above_the_jobs_is_refused_and_never_signalled(tmp_path):
    """What acts as init here (the sim's session, a subreaper) is above every job: refused."""
    fleet, sample = await started()
    launcher = job_named(sample, "torchrun")
    session = launcher.ppid
    assert session is not None and all(j.ppid == session for j in sample.jobs)
    code, out, err = await clean(
        HOST, "--pid", str(session), "--yes", "--log", str(tmp_path / "a"), fleet=fleet
    )
    assert code == Exit.REFUSED, err + out
    assert f"REFUSED: {session}" in out and "never signalled" in out and "clean --job" in out
    assert not (tmp_path / "a").exists()  # no plan was sent: it is written ahead of sending


# -- defect 2: a restarted worker is not called clean without a word --------------------------


def test_a_gpu_clean_names_the_supervisor_that_restarts_its_worker(tmp_path):
    run = gputui("clean", "--config", config(tmp_path), HOST, "--gpu", f"{HOST}:2", "--yes", "--json",
                 "--term-timeout", "2", "--log", str(tmp_path / "a"))  # fmt: skip
    assert "Traceback" not in run.stderr
    [host] = json.loads(run.stdout)["hosts"]
    [worker] = host["plan"]["targets"]  # the only process on GPU 2
    [restart] = host["restarts"]
    assert restart["children"] == [worker["pid"]] and restart["name"] == "python"
    assert "supervisor" in " ".join(restart["command"])
    words = restart["words"]
    assert words.startswith(f"parent {restart['pid']} `") and f"parent {restart['pid']}" in run.stderr
    # The way out it names works now. Until it starts its worker again the supervisor holds no GPU, so
    # `clean --pid` of it was refused ("not a GPU process", exit 2: it once said that): the shell's
    # kill stops it; once it has, it is a job's root again (restart_words_name_a_way_that_works).
    if restart["new"]:
        assert f"`clean --job {restart['pid']}` stops it whole" in words
    else:
        assert f"`kill {restart['pid']}` stops it" in words and "clean --pid" not in words


# -- names: exact, and a name that matches nothing lists what exists ---------------------------


def test_names_that_match_nothing_are_exit_2_with_what_exists(tmp_path):
    cfg = config(tmp_path)
    for argv, words in (
        (["--job", "999999999"], "no job 999999999 on the hosts (jobs: lab: "),
        (["--slurm-job", "4711"], "no Slurm job 4711 on the hosts (Slurm jobs seen: none)"),
        (["--container", "lxc/129"], "no job in container lxc/129 on the hosts (containers seen: none)"),
        (
            ["--user", "no-such-user-x"],
            "no job or GPU process of user no-such-user-x on the hosts (users seen: ",
        ),
        (
            ["--pid", "4194303"],
            "PID 4194303 is not a GPU process or a job's root on any of the hosts (jobs: lab:",
        ),
    ):
        run = gputui("clean", "--config", cfg, HOST, *argv, "--dry-run", "--log", str(tmp_path / "a"))
        assert run.returncode == Exit.USAGE, (argv, run.stderr)
        assert "Traceback" not in run.stderr
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], (argv, lines)
        assert "torchrun" in lines[0] or "--job" not in argv[0]


def test_a_user_is_matched_exactly_and_the_monitor_is_left_alone(tmp_path):
    import pwd

    me = pwd.getpwuid(os.getuid()).pw_name
    run = gputui("clean", "--config", config(tmp_path), HOST, "--user", me, "--dry-run", "--json",
                 "--log", str(tmp_path / "a"))  # fmt: skip
    assert run.returncode == Exit.CLEAN, run.stderr
    [host] = json.loads(run.stdout)["hosts"]
    plan = host["plan"]
    assert plan["scope"] == "jobs" and len(plan["jobs"]) == 4
    assert "monitor" not in {t["kind"] for t in plan["targets"]}
    assert all(t["role"] in ("root", "member", "between") for t in plan["targets"])
    # A prefix of the name is no match.
    short = gputui("clean", "--config", config(tmp_path), HOST, "--user", me[:-1] or "x", "--dry-run")
    assert short.returncode == Exit.USAGE and "users seen: " in short.stderr


# -- the dashboard's way: Request(scope="jobs") with the Job objects it shows ------------------


async def test_a_job_request_is_planned_by_its_roots_identity(tmp_path):
    from dataclasses import replace

    from gputui.kill.auditlog import ActionLog
    from gputui.kill.operate import Operations, Request

    fleet, sample = await started()
    try:
        ops = Operations(fleet, ActionLog(tmp_path / "a"), operator="t")
        launcher = job_named(sample, "torchrun")
        planned = ops.build([Request(HOST, "jobs", jobs=(launcher,))], {HOST: sample})
        [plan] = planned.plans
        assert plan.jobs == (launcher,) and plan.scope == "jobs" and not plan.cleans_gpus
        assert plan.describe_jobs() == plan.title and plan.title.startswith(f"Stop job {launcher.id} (")
        assert "torchrun --nproc-per-node 2" in plan.title
        assert [t.role for t in plan.job_targets(launcher)] == ["root", "member", "member"]
        assert plan.to_wire()["targets"][0] == {
            "pid": launcher.root, "start_time": launcher.root_start, "gpus": [], "role": "root",
            "reason": plan.targets[0].why,
        }  # fmt: skip
        # A root whose PID now names another process (another start time) is not a target.
        stale = replace(launcher, root_start=(launcher.root_start or 0) + 1)
        [other] = ops.build([Request(HOST, "jobs", jobs=(stale,))], {HOST: sample}).plans
        assert other.is_empty and not other.jobs
        [lost] = [e for e in other.excluded if e.pid == launcher.root]
        assert lost.chosen and "reused" in lost.why
    finally:
        await fleet.stop()


def test_a_name_not_found_while_a_host_did_not_answer_is_unknown_not_a_usage_error(tmp_path):
    """A PID or job that none of the hosts that answered has may be on the one that did not: that is
    no mistake of the user's (exit 2, "not a GPU process") but an outcome not known (exit 1), said
    with the host that did not answer; nothing is done. (On the lent H100 a probe that died at its
    first sample made `clean --pid` of a real GPU process say it was no GPU process.)"""
    path = tmp_path / "gputui.toml"
    # Port 1 on loopback: refused at once, as a host that is down.
    path.write_text(CONFIG + '\n[[hosts]]\nname = "far"\naddress = "127.0.0.1"\nport = 1\nuser = "nobody"\n')
    for argv, words in (
        (["--pid", "4194303"], "PID 4194303 is not a GPU process or a job's root on any of the hosts"),
        (["--job", "999999999"], "no job 999999999 on the hosts"),
        (["--gpu", "GPU-00000000-dead"], "--gpu GPU-00000000-dead: no GPU has that UUID"),
    ):
        run = gputui(
            "clean", "--config", str(path), HOST, "far", *argv, "--yes", "--log", str(tmp_path / "a")
        )
        assert run.returncode == Exit.FAILED, (argv, run.returncode, run.stderr)
        assert "Traceback" not in run.stderr
        assert words in run.stderr and "far did not answer" in run.stderr, run.stderr
        assert "far" in run.stdout and "UNREACHABLE" in run.stdout, run.stdout


def test_restart_words_name_a_way_that_works_in_each_front() -> None:
    """Before the supervisor starts its worker again, no plan can name it (it holds no GPU): kill.
    After, it is a job's root: `clean --job` in the CLI, X on the job in the dashboard."""
    waiting = Restart(pid=4242, name="python", command=("python", "supervisor.py"), children=(5252,))
    assert restart_words(waiting).endswith(
        "may start it again: `kill 4242` stops it (a plan names only what holds a GPU)"
    )
    assert restart_words(waiting, KEY_JOB_STOP) == restart_words(waiting)
    again = replace(waiting, new=(6363,), new_gpus=(2,))
    assert restart_words(again).endswith("has started 6363 on GPU 2 since: `clean --job 4242` stops it whole")
    assert restart_words(again, KEY_JOB_STOP).endswith("since: X on job 4242 stops it whole (J lists jobs)")

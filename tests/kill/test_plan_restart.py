"""A plan names the parent that may start a target again, before the kill, not only in the verdict.

Stopping a supervisor's worker (`x`, `clean --pid`, or a GPU it is on) left the supervisor running:
the plan said nothing, the verdict then said "parent ... may start it again" and a new worker ran
10 s later. Now every plan warns (kind `restart`) for each target whose parent is of the same job
(its root or a process between, by the sample's jobs) and is not in the plan, naming that parent
and the job to stop instead (`press X` in the dashboard, `clean --job` from the shell: each
front's words, PlanWarning.said). Pure functions
over a hand-made sample; the dashboard and `clean` on the sim's `jobs` scenario are tested in
tests/ui/test_plan_restart.py and below.
"""

from __future__ import annotations

import re
from pathlib import Path

from gputui.kill.plan import PlanOptions, plan_for_gpus, plan_for_jobs, plan_for_pids
from gputui.kill.plan.entries import STOP_JOB_FLAG
from gputui.kill.plan.record import Plan
from tests.support.cli import gputui
from tests.support.samples import launcher_sample

OPTS = PlanOptions(operator="alice")


def restarts(plan: Plan) -> list[str]:
    return [w.message for w in plan.warnings if w.kind == "restart"]


def test_a_member_stopped_without_its_parent_names_the_parent_and_the_job():
    sample = launcher_sample()
    [words] = restarts(plan_for_pids(sample, [301], host="h", options=OPTS))
    # 301's parent is the agent 201 (between the root and the ranks), of job 200.
    assert "parent 201 `python -m torch.distributed.elastic.agent`" in words
    assert "may start it again" in words and "301" in words
    assert "stop job 200 whole" in words and "X" not in words and "clean" not in words
    [warning] = [
        w for w in plan_for_pids(sample, [301], host="h", options=OPTS).warnings if w.kind == "restart"
    ]
    assert warning.job == "200" and warning.said(STOP_JOB_FLAG).endswith("whole (clean --job 200)")


def test_one_warning_per_parent_naming_every_child():
    sample = launcher_sample()
    [words] = restarts(plan_for_pids(sample, [300, 301], host="h", options=OPTS))
    assert "300, 301" in words and "may start them again" in words and "parent 201 " in words


def test_a_gpu_plan_warns_too():
    [words] = restarts(plan_for_gpus(launcher_sample(), [1], host="h", options=OPTS))
    assert "parent 201 " in words and "stop job 200 whole" in words


def test_part_of_a_job_names_the_parent_above_the_part():
    # 201 chooses the part of job 200 below it: the ranks' parent is in the plan, 201's (200) is not.
    [words] = restarts(plan_for_pids(launcher_sample(), [201], host="h", options=OPTS))
    assert "parent 200 `torchrun --nproc-per-node 2 train.py`" in words and "201" in words


def test_no_warning_where_the_parent_is_stopped_too_or_is_no_part_of_the_work():
    sample = launcher_sample()
    assert not restarts(plan_for_jobs(sample, [sample.jobs[0]], host="h", options=OPTS))
    assert not restarts(plan_for_pids(sample, [201, 200], host="h", options=OPTS))
    # A job of one process: its parent is the shell it was started from (above the job).
    assert not restarts(plan_for_pids(sample, [400], host="h", options=OPTS))
    # The data-loader child goes with its rank: its parent (300) is in the plan.
    plan = plan_for_pids(sample, [300], host="h", options=OPTS)
    assert {t.pid for t in plan.targets} == {300, 302}
    [words] = restarts(plan)  # for 300 alone (its parent 201 stays)
    assert " of 300 is not in the plan" in words


CONFIG = """
[[hosts]]
name = "lab"
address = "local"
reader = "sim"
sim_scenario = "jobs"
"""


def test_clean_dry_run_on_the_supervisors_gpu_names_the_supervisor(tmp_path: Path) -> None:
    """`clean --gpu lab:2 --dry-run` on the sim's jobs scenario (a real probe and its processes): GPU
    2's one process is the supervisor's worker. The plan says so before anything is signalled."""
    cfg = tmp_path / "gputui.toml"
    cfg.write_text(CONFIG)
    run = gputui("clean", "--config", str(cfg), "lab", "--gpu", "lab:2", "--dry-run",
                 "--log", str(tmp_path / "a"), timeout=180)  # fmt: skip
    assert "Traceback" not in run.stderr, run.stderr
    out = run.stdout + run.stderr
    said = re.search(r"parent (\d+) `[^`]*supervisor[^`]*` .*may start it again.*clean --job (\d+)", out)
    assert said is not None and said.group(1) == said.group(2), out

"""Job plans as pure functions over a hand-made sample (gputui/kill/plan/): which PID chooses which job,
the order of the targets (root, processes between, members), every GPU process of the root's
subtree, and the roots that are never signalled. The sim and the CLI are tested in
tests/cli/test_clean_jobs.py and tests/probe/test_reaper_jobs.py."""

from __future__ import annotations

from typing import Any

from gputui.kill.plan import PlanOptions, above_jobs, job_for_pid, jobs_title, plan_for_jobs, plan_for_pids
from gputui.model import Sample
from tests.support.samples import GiB, gpu, launcher_sample, parent, proc

OPTS = PlanOptions(operator="alice")


def test_a_launchers_pid_chooses_its_job_root_first_then_between_then_members():
    sample = launcher_sample()
    chosen = job_for_pid(sample, 200)
    assert chosen is not None and chosen.id == "200"
    plan = plan_for_pids(sample, [200], host="h", options=OPTS)
    assert plan.scope == "jobs" and [j.id for j in plan.jobs] == ["200"]
    assert [(t.pid, t.role) for t in plan.targets][:2] == [(200, "root"), (201, "between")]
    assert {t.pid: t.role for t in plan.targets[2:]} == {300: "member", 301: "member", 302: "member"}
    assert 400 not in {t.pid for t in plan.targets}  # another job is left alone
    assert plan.describe_jobs() == "Stop job 200 (torchrun --nproc-per-node 2 train.py)"
    assert [t.pid for t in plan.job_targets(plan.jobs[0])] == [200, 201, 300, 301, 302]
    wire = plan.to_wire()
    assert wire["scope"] == "processes" and wire["targets"][0]["role"] == "root"
    assert "job root" in " ".join(plan.stages) and "members left" in " ".join(plan.stages)


def test_a_process_between_the_root_and_its_members_chooses_the_part_below_it():
    sample = launcher_sample()
    part = job_for_pid(sample, 201)
    assert part is not None and part.root == 201 and part.id == "201"
    assert sorted(part.members) == [300, 301, 302] and part.command[0] == "python"


def test_a_single_gpu_process_is_a_plain_process_and_a_pid_above_a_job_is_none():
    sample = launcher_sample()
    assert job_for_pid(sample, 400) is None  # a job of one process: the process itself
    assert job_for_pid(sample, 300) is None  # a member is a process, not its job
    assert job_for_pid(sample, 10) is None and [j.id for j in above_jobs(sample, 10)] == ["200", "400"]


def test_a_pid_above_the_jobs_is_refused_with_the_job_to_stop_instead():
    sample = launcher_sample()
    plan = plan_for_pids(sample, [10], host="h", options=OPTS)
    assert plan.is_empty and not plan.jobs
    [refused] = plan.excluded
    assert refused.pid == 10 and refused.chosen and refused.protected == "session"
    assert "never signalled" in refused.why and "clean --job 200" in refused.why


def test_a_root_that_is_a_session_or_init_is_refused_and_its_job_not_stopped():
    for fields, reason in (
        ({"name": "sshd", "command": ["sshd: alice"]}, "session"),
        ({"name": "bash", "command": ["-bash"]}, "session"),
        ({"name": "systemd", "command": ["/sbin/init"]}, "init"),
    ):
        sample = launcher_sample(**fields)
        plan = plan_for_jobs(sample, [sample.jobs[0]], host="h", options=OPTS)
        assert plan.is_empty and not plan.jobs, fields
        [refused] = [e for e in plan.excluded if e.pid == 200]
        assert refused.protected == reason and refused.chosen and "its job is not stopped" in refused.why


def test_every_gpu_process_of_the_roots_subtree_is_a_member():
    """A GPU process below the root that the job's member list leaves out (another job's id: past a
    boundary, or the list bounded) is stopped with its job: killing the root orphans it anyway."""
    sample = launcher_sample()
    extra = proc(303, "user", gpus=[1], gpu_memory={"1": GiB}, ppid=301, job="303")
    wire = {
        "seq": 1,
        "gpus": [gpu(0, GiB), gpu(1, GiB), gpu(2, GiB)],
        "processes": [*(_wire(p) for p in sample.processes), extra],
        "parents": [_parent_wire(p) for p in sample.parents],
        "jobs": [j.describe() for j in sample.jobs],
        "scan": {"full": True},
    }
    bigger = Sample.from_wire(wire)
    plan = plan_for_pids(bigger, [200], host="h", options=OPTS)
    assert 303 in {t.pid for t in plan.targets if t.role == "member"}


def test_jobs_title_names_one_job_or_counts_many():
    sample = launcher_sample()
    assert jobs_title([]) is None
    assert (
        jobs_title(sample.jobs)
        == "Stop 2 jobs: 200 (torchrun --nproc-per-node 2 train.py), 400 (python eval.py)"
    )


def _wire(p: Any) -> dict[str, Any]:
    return proc(
        p.pid,
        p.kind,
        gpus=list(p.gpus),
        gpu_memory={str(k): v for k, v in p.gpu_memory.items()},
        ppid=p.ppid,
        job=p.job,
        reason=p.reason,
        links=list(p.links),
    )


def _parent_wire(p: Any) -> dict[str, Any]:
    return parent(p.pid, p.ppid, p.name, list(p.command))

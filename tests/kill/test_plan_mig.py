"""A plan of MIG instances (`--gpu MIG-...`) and the judgement of an instance after it
(gputui/kill/plan/mig.py): the processes in the instance and the hidden holders tied to them are
its targets, never a process of the GPU's other instances; an instance is clean when nothing runs in
it and, where its memory is read, that memory is back at idle."""

from __future__ import annotations

from typing import Any

import pytest

from gputui.kill.plan import PlanError, PlanOptions, plan_for_selection
from gputui.kill.plan.mig import instance_left
from gputui.model import MigPlace, Sample
from tests.support.samples import GiB, gpu, proc

IN_1 = MigPlace(0, 1, 0)


def mig_sample(used_1: int | None, *, train: bool = True) -> Sample:
    """GPU 0 in MIG mode: 1.0 (train.py 200 and its loader 202 unless `train` is off), 2.0 (serve
    201), 5.0 free; GPU 1 whole."""
    instances = [
        {"gi": 1, "ci": 0, "uuid": "MIG-00000001-0000-0000-0000-000000000000", "memory_used": used_1},
        {"gi": 2, "ci": 0, "uuid": "MIG-00000002-0000-0000-0000-000000000000", "memory_used": 5 * GiB},
        {"gi": 5, "ci": 0, "uuid": "MIG-00000005-0000-0000-0000-000000000000", "memory_used": 0},
    ]
    processes: list[dict[str, Any]] = [
        proc(201, "user", gpus=[0], gpu_memory={"0": 5 * GiB}, mig=[{"gpu": 0, "gi": 2, "ci": 0}]),
        proc(203, "user", gpus=[1], gpu_memory={"1": GiB}),
    ]
    if train:
        processes += [
            proc(200, "user", gpus=[0], gpu_memory={"0": 10 * GiB}, mig=[{"gpu": 0, "gi": 1, "ci": 0}]),
            proc(202, "hidden", gpus=[0], reason="pgid", links=[200], pgid=200, ppid=200),
        ]
    return Sample.from_wire(
        {
            "seq": 1,
            "time": 1.0,
            "gpus": [dict(gpu(0, 15 * GiB), mig_instances=instances), gpu(1, GiB)],
            "processes": processes,
            "scan": {"full": True, "age": 0.0, "unreadable": 0},
        }
    )


def test_a_mig_instance_plan_takes_what_runs_in_it_and_nothing_else() -> None:
    plan = plan_for_selection(
        mig_sample(10 * GiB), host="h", instances=[IN_1], options=PlanOptions(operator="alice")
    )
    assert plan.scope == "mig" and plan.instances == (IN_1,) and plan.gpus == ()
    assert {t.pid for t in plan.targets} == {200, 202}
    assert plan.to_wire()["scope"] == "processes" and plan.to_wire()["gpus"] == []
    assert plan.title == "Free MIG instance 0:1.0"
    assert "other MIG instances left alone" in plan.proves
    with pytest.raises(PlanError, match=r"no MIG instance 0:3\.0"):
        plan_for_selection(mig_sample(0), host="h", instances=[MigPlace(0, 3, 0)])


def test_an_instance_is_clean_only_with_nothing_in_it_and_its_memory_back() -> None:
    left, _ = instance_left(mig_sample(10 * GiB), IN_1)
    # A hidden holder has no MIG placement (NVML does not list it): its memory is the instance's.
    assert left == ["200 (user) still runs in it"]
    left, how = instance_left(mig_sample(0, train=False), IN_1)
    assert left == [] and how.startswith("nothing runs in it, memory at idle")
    left, _ = instance_left(mig_sample(3 * GiB, train=False), IN_1)
    assert left == [
        "3.0 GiB still used with nothing running in it (ghost or orphaned memory: a reset of the GPU frees it)"
    ]
    # No reading of the instance's memory: judged by its processes alone, and said so.
    left, how = instance_left(mig_sample(None, train=False), IN_1)
    assert left == [] and "judged by its processes alone" in how
    # The other instances are judged for themselves: 2.0 still runs serve.
    left, _ = instance_left(mig_sample(0, train=False), MigPlace(0, 2, 0))
    assert left == ["201 (user) still runs in it"]

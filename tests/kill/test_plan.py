"""Plans from samples (gputui/kill/plan/): who is targeted, who is left alone and why, the wire record."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gputui.kill.plan import (
    KillOptions,
    Plan,
    PlanError,
    PlanOptions,
    plan_for_gpus,
    plan_for_host,
    plan_for_pids,
    plan_for_selection,
    sweep_candidates,
)
from gputui.model import brief_command
from gputui.probe.run.orders import Settings
from tests.support.samples import GiB, sample

OPTS = PlanOptions(operator="alice", plan_id="p1")


def pids(items: Any) -> list[int]:
    return sorted(i.pid for i in items)


def excluded_why(plan: Plan, pid: int) -> str:
    [e] = [e for e in plan.excluded if e.pid == pid]
    return e.why


def warnings(plan: Plan) -> list[str]:
    return [w.message for w in plan.warnings]


# -- per GPU ------------------------------------------------------------------------------------


def test_a_gpu_plan_takes_its_users_and_attributed_hidden_holders():
    plan = plan_for_gpus(sample(), [0], host="h", options=OPTS)
    assert pids(plan.targets) == [100, 108]
    assert plan.gpu_indexes == (0,) and plan.scope == "gpus" and plan.host == "h"
    [user, loader] = plan.targets
    assert user.why == "uses GPU 0: 10.0 GiB" and user.memory == 10 * GiB
    assert loader.why == "hidden holder of GPU 0 (same process group as 100)"
    # The zombie of the job is shown with its parent; the unrelated one is not.
    assert pids(plan.excluded) == [106]
    assert excluded_why(plan, 106) == "zombie: holds nothing, parent 100 must reap it"
    # The unattributed holder is a sweep candidate, not included unless asked.
    assert pids(plan.sweep) == [104] and not plan.sweep_included
    assert pids(plan.signalled) == [100, 108]
    assert any("unattributed holders not included" in w for w in warnings(plan))


def test_a_ghost_is_no_target_its_suspects_are():
    plan = plan_for_gpus(sample(), [3], host="h", options=OPTS)
    assert pids(plan.targets) == [103]
    assert excluded_why(plan, 102) == "already dead; its memory is held by 103"


def test_a_ghost_without_a_holder_says_ghost_memory():
    s = sample()
    lonely = dataclasses.replace(next(p for p in s.processes if p.pid == 102), links=())
    s = dataclasses.replace(
        s, processes=tuple(lonely if p.pid == 102 else p for p in s.processes if p.pid != 103)
    )
    plan = plan_for_gpus(s, [3], host="h", options=OPTS)
    assert plan.targets == () and "no holder found" in excluded_why(plan, 102)
    assert any("only verify" in w for w in warnings(plan))


def test_warnings_name_other_users_state_d_and_other_gpus():
    plan = plan_for_gpus(sample(), [1], host="h", options=OPTS)
    assert pids(plan.targets) == [101]
    text = warnings(plan)
    assert "101 belongs to bob, not to you (alice)" in text
    assert any("101 is in state D" in w for w in text)
    assert "101 also uses GPU 2: stopping it frees that too" in text


def test_a_listed_monitor_is_excluded_as_protected():
    plan = plan_for_gpus(sample(), [2], host="h", options=OPTS)
    assert pids(plan.targets) == [101]
    assert "Xorg" in excluded_why(plan, 109) and "protected" in excluded_why(plan, 109)


def test_an_unknown_gpu_is_a_plan_error():
    with pytest.raises(PlanError, match="h has no GPU 9"):
        plan_for_gpus(sample(), [9], host="h", options=OPTS)


def test_an_unprivileged_probe_warns_about_other_users():
    plan = plan_for_gpus(sample(), [0, 1], host="h", options=dataclasses.replace(OPTS, probe_uid=1000))
    text = warnings(plan)
    assert any("runs as uid 1000: signals to 101 (bob) will be refused" in w for w in text)
    assert not any("signals to 100" in w for w in text)


def test_unreadable_fds_are_a_warning():
    plan = plan_for_gpus(sample(unreadable=3), [0], host="h", options=OPTS)
    assert any("3 processes' file descriptors could not be read" in w for w in warnings(plan))


# -- host-wide ----------------------------------------------------------------------------------


def test_a_host_plan_is_fuser_k_minus_the_protected():
    plan = plan_for_host(sample(), host="h", options=OPTS)
    assert plan.scope == "host" and plan.gpu_indexes == (0, 1, 2, 3)
    assert pids(plan.targets) == [100, 101, 103, 108]
    # Unattributed holders are listed as the sweep, left out unless asked (they may be a exporter).
    assert not plan.sweep_included and pids(plan.sweep) == [104]
    assert pids(plan.signalled) == [100, 101, 103, 108]
    assert any(w.kind == "sweep-off" for w in plan.warnings)
    assert pids(plan.excluded) == [102, 105, 106, 107, 109, 110]
    assert excluded_why(plan, 107) == "the gputui probe itself: never signalled"
    assert "nv-hostengine" in excluded_why(plan, 105)
    assert excluded_why(plan, 110) == "zombie: holds nothing, parent 50 must reap it"
    swept = plan_for_host(sample(), host="h", sweep=True, options=OPTS)
    assert swept.sweep_included and pids(swept.signalled) == [100, 101, 103, 104, 108]


# -- by PID -------------------------------------------------------------------------------------


def test_a_pid_plan_brings_the_hidden_holders_tied_to_it():
    plan = plan_for_pids(sample(), [100], host="h", options=OPTS)
    assert pids(plan.targets) == [100, 108] and plan.scope == "processes"
    assert plan.targets[0].why.startswith("chosen; ")
    # A plan of processes cleans no GPU: it proves them gone; the GPUs they use are reported.
    assert plan.gpu_indexes == () and not plan.cleans_gpus
    assert [g.index for g in plan.touched] == [0]
    assert plan.to_wire()["scope"] == "processes" and plan.to_wire()["gpus"] == []
    assert "each chosen process gone" in plan.proves
    assert "rescan: stop only holders tied to the targets" in plan.stages


def test_a_pid_plan_reports_every_gpu_the_process_uses():
    plan = plan_for_pids(sample(), [101], host="h", options=OPTS)
    assert [g.index for g in plan.touched] == [1, 2] and plan.gpu_indexes == ()
    assert not any(w.kind == "other-gpus" for w in plan.warnings)


def test_a_ghost_pid_targets_its_suspects_and_unknown_pids_are_excluded():
    plan = plan_for_pids(sample(), [102, 999], host="h", options=OPTS)
    assert pids(plan.targets) == [103]
    assert plan.ghosts == (102,) and plan.to_wire()["ghosts"] == [102]
    assert excluded_why(plan, 999) == "not a GPU process in the latest sample"


def test_only_a_monitor_can_be_included_explicitly():
    plan = plan_for_pids(sample(), [105, 107], host="h", options=OPTS)
    assert plan.targets == ()
    monitor, probe = sorted(plan.excluded, key=lambda e: e.pid)
    assert monitor.can_include and not probe.can_include
    assert [e.pid for e in plan.includable] == [105]  # chosen by name, and a monitor
    included = plan.including([105, 107])
    assert any(w.kind == "protected-included" and w.severe for w in included.warnings)
    assert not any(w.kind == "nothing" for w in included.warnings)
    assert pids(included.targets) == [105] and included.targets[0].protected == "monitor"
    assert included.include_protected == (105,)
    assert pids(included.excluded) == [107]
    assert included.to_wire()["include_protected"] == [105]
    assert plan.including([107]) is plan


def test_a_selection_joins_gpus_and_pids():
    plan = plan_for_selection(sample(), host="h", gpu_indexes=[3], pids=[101], options=OPTS)
    assert plan.scope == "selection" and plan.gpu_indexes == (3,)
    assert [g.index for g in plan.touched] == [1, 2]
    assert pids(plan.targets) == [101, 103]
    assert "GPU 3 clean" in plan.proves and "the chosen processes gone" in plan.proves


# -- the record ---------------------------------------------------------------------------------


def test_the_wire_record_is_what_the_probe_accepts():
    plan = plan_for_gpus(sample(), [0], host="h", options=OPTS)
    wire = plan.to_wire()
    assert wire == {
        "type": "plan",
        "v": 1,
        "id": "p1",
        "operator": "alice",
        "scope": "gpus",
        "targets": [
            {"pid": 100, "start_time": 1100, "reason": "uses GPU 0: 10.0 GiB", "gpus": [0]},
            {"pid": 108, "start_time": 1108, "reason": "hidden holder of GPU 0 (same process group as 100)",
             "gpus": [0]},
        ],
        "sweep": [],
        "gpus": [0],
        "ghosts": [],
        "include_protected": [],
        "signals": ["SIGTERM"],
        "term_timeout": 5.0,
        "verify_timeout": 10.0,
    }  # fmt: skip
    swept = plan.with_sweep(True).to_wire()
    assert swept["sweep"] == [
        {
            "pid": 104,
            "start_time": 1104,
            "reason": "unattributed hidden holder: holds /dev/nvidia*, no GPU listed, no link found",
            "gpus": [],
        }
    ]
    assert not any(w.kind == "sweep-off" for w in plan.with_sweep(True).warnings)
    settings = Settings(swept)  # the probe's own validation
    assert [t[0] for t in settings.targets] == [100, 108] and [t[0] for t in settings.sweep] == [104]


def test_options_and_stages():
    plan = plan_for_gpus(sample(), [0], host="h", options=OPTS).with_options(
        KillOptions(signals="int", term_timeout=2.5, verify_timeout=4)
    )
    assert plan.stages[0] == "SIGINT -> wait up to 2.5 s"
    assert plan.stages[1] == "SIGTERM -> wait up to 2.5 s"
    assert plan.stages[2] == "SIGKILL the survivors"
    assert plan.stages[-1] == "verify GPU 0 clean (NVML every 5-20 ms, up to 4 s)"
    assert plan.to_wire()["signals"] == ["SIGINT", "SIGTERM"]
    now = plan.with_options(KillOptions(signals="kill"))
    assert now.stages[0] == "SIGKILL at once" and now.to_wire()["signals"] == []
    for bad in (0, -1, float("nan"), float("inf"), 3601, True):
        with pytest.raises(PlanError):
            KillOptions(term_timeout=bad)
    with pytest.raises(PlanError):
        KillOptions(signals="stop")
    hup = plan.with_options(KillOptions(signals="hup"))
    assert hup.stages[:2] == ("SIGHUP -> wait up to 5 s", "SIGTERM -> wait up to 5 s")
    assert hup.to_wire()["signals"] == ["SIGHUP", "SIGTERM"]
    # The app's deadline for a verdict covers every stage the probe may run.
    assert plan.deadline > 4 * (2 * 2.5 + 2) + 4 and plan.silence_limit >= 4


def test_plans_are_frozen_and_describe_themselves_in_plain_json():
    import json

    plan = plan_for_host(sample(), host="h", options=OPTS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.id = "x"  # type: ignore[misc]
    doc = plan.describe()
    json.dumps(doc)
    assert doc["targets"][0]["command"] == ["python", "job100.py"] and doc["host"] == "h"
    assert {"targets", "excluded", "sweep", "warnings", "stages", "term_timeout", "verify_timeout"} <= set(
        doc
    )


def test_sweep_candidates_are_the_unattributed_unprotected_holders():
    assert pids(sweep_candidates(sample())) == [104]


def test_the_operator_defaults_to_the_local_user_and_ids_are_unique():
    import getpass

    a = plan_for_gpus(sample(), [0], host="h")
    b = plan_for_gpus(sample(), [0], host="h")
    assert a.operator == getpass.getuser() and a.id != b.id


def test_commands_are_shown_briefly():
    assert brief_command(
        ("/opt/venv/bin/python", "-S", "/tmp/gputui-sim-abcdefgh/bin/train.py", "--lr", "3")
    ) == ("python -S .../train.py --lr 3")
    assert brief_command(("python", "/short/x.py")) == "python /short/x.py"
    assert brief_command(()) == ""

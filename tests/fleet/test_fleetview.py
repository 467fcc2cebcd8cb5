"""What the fleet view says is wrong, and where (gputui/views/problems.py): problems and their order,
groups, the GPUs that differ from their siblings, GPUs and memory per user. From the recorded
probe output of the sim's scenarios, and small samples where a case needs one."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gputui.fleet.session import CONNECTING, DOWN, LIVE, STALE, HostView
from gputui.model import HostFacts, Sample
from gputui.views.filter import parse
from gputui.views.problems import (
    HEALTHY,
    RANKS,
    default_group,
    gpu_subject,
    group_of,
    host_state,
    majority,
    proc_subject,
    user_usage,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GiB = 1 << 30


def replayed(name: str, host: str | None = None, **changes: Any) -> HostView:
    """A live HostView that has taken every sample of recording `name`."""
    records = [
        json.loads(line) for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines() if line.strip()
    ]
    view = HostView(name=host or name)
    view.status = LIVE
    hello = next(r for r in records if r["type"] == "hello")
    view.facts = HostFacts.from_hello(hello)
    for record in records:
        if record["type"] == "sample":
            view.record(Sample.from_wire(record))
    for key, value in changes.items():
        setattr(view, key, value)
    return view


@pytest.mark.parametrize(
    ("name", "group"),
    [
        ("gpu017", "gpu"),
        ("node-12", "node"),
        ("a100-03", "a100"),
        ("rack3-node07", "rack3-node"),
        ("demo-a", "demo-a"),  # no number at its end: its own group
        ("node12-ib", "node12-ib"),
        ("42", "42"),
    ],
)
def test_a_hosts_group_is_its_name_without_its_number(name: str, group: str) -> None:
    assert default_group(name) == group


def test_a_group_the_source_names_wins() -> None:
    assert group_of(HostView(name="gpu017", group="rack3")) == "rack3"
    assert group_of(HostView(name="gpu017")) == "gpu"


def test_each_kind_of_trouble_of_the_preflight_scenario_and_its_rank() -> None:
    state = host_state(replayed("preflight"), idle_after=600)
    words = {i: [(p.state, p.words) for p in ps] for i, ps in state.gpus.items()}
    assert words == {
        0: [],
        1: [("orphaned", "orphaned 2.1 GiB")],
        2: [("throttle", "throttle: hw-thermal")],
        3: [("ecc", "1 ECC uncorrected, row remap pending"), ("mismatch", "differs: persistence off")],
    }
    assert state.worst is not None and state.worst.state == "ecc"
    assert [state.gpu_worst(i) is None for i in range(4)] == [True, False, False, False]
    assert RANKS["down"] < RANKS["ecc"] < RANKS["ghost"] < RANKS["idle-held"] < RANKS["throttle"] < HEALTHY


def test_ghosts_and_idle_holders_of_the_demo() -> None:
    demo = replayed("demo-a")
    # The recording is 13 s long: with a 5 s threshold its notebook kernel (GPU 2) and the sweep
    # trial stopped with SIGSTOP (GPU 3) are idle holders.
    state = host_state(demo, idle_after=5)
    assert [p.state for p in state.gpus[2]] == ["ghost", "idle-held"]
    assert state.gpus[2][1].words.startswith("idle 12s")
    assert [p.state for p in state.gpus[3]] == ["idle-held"]
    assert host_state(demo, idle_after=600).gpus[2][1:] == []  # not for 10 minutes
    assert host_state(demo, idle_after=600).gpus[3] == []
    assert not any(state.gpus[i] for i in (0, 1))


def test_hosts_down_or_stale_and_their_gpus() -> None:
    down = replayed("jobs", status=DOWN, reason="unreachable")
    state = host_state(down, 600)
    assert [(p.state, p.words) for p in state.problems] == [("down", "down: unreachable")]
    assert state.gpu_worst(3) is not None and state.gpu_worst(3).state == "down"  # type: ignore[union-attr]
    assert host_state(replayed("jobs", status=STALE), 600).problems[0].state == "stale"
    assert not host_state(replayed("jobs"), 600).troubled  # healthy


def test_a_down_host_trying_again_is_down_to_the_filter_not_connecting() -> None:
    # Between two attempts its session says "connecting"; the lists and the header say down.
    retrying = replayed("jobs", status=CONNECTING, last_down="unreachable")
    state = host_state(retrying, 600)
    assert [p.state for p in state.problems] == ["down"]
    sample = retrying.sample
    assert sample is not None
    row = gpu_subject(retrying, state, sample.gpus[0])
    assert parse("state:down").matches(row)
    assert not parse("state:connecting").matches(row)
    new = replayed("jobs", status=CONNECTING)  # never down: connecting for the first time
    assert parse("state:connecting").matches(gpu_subject(new, host_state(new, 600), sample.gpus[0]))


def test_a_gpu_that_differs_from_its_siblings() -> None:
    view = replayed("jobs")
    sample = view.sample
    assert sample is not None
    odd = [replace(g, name="NVIDIA A100") if g.index == 5 else g for g in sample.gpus]
    view.sample = Sample(seq=1, time=sample.time, gpus=tuple(odd), processes=sample.processes)
    state = host_state(view, 600)
    assert [p.words for p in state.gpus[5]] == ["differs: model NVIDIA A100 (others: NVIDIA H200 (sim))"]
    assert not any(state.gpus[i] for i in range(8) if i != 5)


def test_a_driver_that_differs_from_its_group() -> None:
    view = replayed("jobs")
    assert majority(["580.1", "580.1", "570.9"]) == "580.1"
    assert majority(["580.1", "570.9"]) is None  # no majority to differ from
    state = host_state(view, 600, group_driver="570.86")
    assert [(p.state, p.words) for p in state.problems] == [
        ("mismatch", "driver 580.159.04-sim (group: 570.86)")
    ]


def test_the_filter_matches_gpu_rows_and_processes() -> None:
    demo = replayed("demo-a", host="gpu017")
    state = host_state(demo, idle_after=5)
    sample = demo.sample
    assert sample is not None
    rows = {g.index: gpu_subject(demo, state, g) for g in sample.gpus}
    held = [i for i, s in rows.items() if parse("state:idle-held").matches(s)]
    assert held == [2, 3]
    assert [i for i, s in rows.items() if parse("state:ghost").matches(s)] == [2]
    assert [i for i, s in rows.items() if parse("mem>100G").matches(s)] == [0, 1]
    assert all(parse("host:gpu0* group:gpu state:live").matches(s) for s in rows.values())
    assert [i for i, s in rows.items() if parse("-state:problem").matches(s)] == [0, 1]
    kernel = next(p for p in sample.processes if "notebook_kernel.py" in " ".join(p.command))
    subject = proc_subject(demo, state.group, kernel, None, state.idle.get(kernel.key), 5)
    assert parse("state:idle-held mem>10G cmd:notebook").matches(subject)
    assert not parse("state:idle-held").matches(proc_subject(demo, "gpu", kernel, None, None, 5))


def test_gpus_and_memory_per_user_across_the_fleet() -> None:
    hosts = [replayed("demo-a", "a1"), replayed("demo-b", "b1"), replayed("jobs", "j1", status=DOWN)]
    users, left_out = user_usage(hosts, idle_after=5)
    assert left_out == 1  # down: its numbers are old
    root = next(u for u in users if u.user == "root")
    assert root.hosts == {"a1", "b1"}
    # demo-a's notebook kernel (12 GiB) and stopped sweep trial (8 GiB), demo-b's notebook (9 GiB)
    assert root.idle_holders == 3 and root.idle_memory == 29 * GiB
    assert root.memory == sum(
        p.gpu_bytes
        for v in hosts[:2]
        for p in v.sample.processes  # type: ignore[union-attr]
        if p.kind in ("user", "hidden") and p.gpus and p.user == "root" and p.state != "Z"
    )
    assert users == sorted(users, key=lambda u: -u.memory)


def test_a_gpus_problems_are_kept_while_what_they_come_from_is_the_same() -> None:
    """host_state's `kept`: a reading that moved (utilization, temperature) keeps the GPU's problems
    (the same list); memory that turns ghost, or an error, is worked out again at once."""
    view = replayed("preflight")
    kept: dict[int, Any] = {}
    first = host_state(view, idle_after=600, kept=kept)
    assert first.gpus == host_state(view, idle_after=600).gpus  # the same answer as without
    sample = view.sample
    assert sample is not None
    gpu0 = sample.gpus[0]
    assert gpu0.accounting is not None and first.gpus[0] == []
    warmer = replace(gpu0, util_gpu=(gpu0.util_gpu or 0) + 7, temperature=(gpu0.temperature or 0) + 3)
    view.sample = replace(sample, gpus=(warmer, *sample.gpus[1:]))
    again = host_state(view, idle_after=600, kept=kept)
    assert again.gpus[0] is first.gpus[0] and again.gpus[1] is first.gpus[1]
    haunted = replace(warmer, accounting=replace(gpu0.accounting, ghost=20 * GiB))
    view.sample = replace(sample, gpus=(haunted, *sample.gpus[1:]))
    assert [p.words for p in host_state(view, idle_after=600, kept=kept).gpus[0]] == ["ghost 20.0 GiB"]
    broken = replace(haunted, error="GPU is lost")
    view.sample = replace(sample, gpus=(broken, *sample.gpus[1:]))
    assert [p.state for p in host_state(view, idle_after=600, kept=kept).gpus[0]] == ["error", "ghost"]


def test_an_idle_holders_problem_is_worked_out_again_when_its_time_says_more() -> None:
    view = replayed("demo-a")
    kept: dict[int, Any] = {}
    first = host_state(view, idle_after=0, kept=kept)
    [idle] = [p for p in first.gpus[2] if p.state == "idle-held"]
    assert host_state(view, idle_after=0, kept=kept).gpus[2] is first.gpus[2]  # nothing moved
    assert view.idle.last is not None
    view.idle.last += 3600  # an hour later, the same sample: the words move on
    [later] = [p for p in host_state(view, idle_after=0, kept=kept).gpus[2] if p.state == "idle-held"]
    assert later.words != idle.words and "h" in later.words

"""Plans that touch CUDA MPS (gputui/kill/plan/): stopping an MPS server or its control daemon ends
every client, so the plan says so, naming them, in the dialog and in `gputui clean` alike."""

from __future__ import annotations

from typing import Any

from gputui.cli.clean import plan_lines
from gputui.kill.plan import PlanOptions, plan_for_gpus, plan_for_pids
from gputui.model import Sample
from tests.support.samples import proc

GiB = 1 << 30
ROOT = PlanOptions(operator="alice")


def mps_sample() -> Sample:
    """GPU 0 and 1 under MPS: alice's server on GPU 0 with two clients, bob's server on GPU 1 with
    one, the control daemon; and a plain job on GPU 1."""
    daemon = {"name": "nvidia-cuda-mps", "kind": "monitor", "protected": "monitor", "reason": "known-monitor"}
    processes: list[dict[str, Any]] = [
        proc(10, **daemon, mps="control", command=["nvidia-cuda-mps-control", "-d"]),
        proc(20, **daemon, mps="server", gpus=[0], gpu_memory={"0": GiB}),
        proc(21, "user", mps="client", gpus=[0], gpu_memory={"0": 8 * GiB}),
        proc(22, "user", mps="client", gpus=[0], gpu_memory={"0": 4 * GiB}),
        proc(30, **daemon, mps="server", gpus=[1], gpu_memory={"1": GiB}, user="bob", uid=1001),
        proc(31, "user", mps="client", gpus=[1], gpu_memory={"1": 2 * GiB}, user="bob", uid=1001),
        proc(40, "user", gpus=[1], gpu_memory={"1": 2 * GiB}),
    ]
    gpus = [
        {"index": i, "memory_total": 140 * GiB, "memory_used": 10 * GiB, "memory_baseline": 0} for i in (0, 1)
    ]
    return Sample.from_wire(
        {"seq": 1, "time": 1.0, "gpus": gpus, "processes": processes, "scan": {"full": True}}
    )


def test_freeing_a_gpu_stops_the_clients_and_leaves_the_server_alone_with_its_reason() -> None:
    plan = plan_for_gpus(mps_sample(), [0], host="h", options=ROOT)
    assert [t.pid for t in plan.targets] == [21, 22]
    assert all(t.mps == "client" for t in plan.targets)
    [server] = [e for e in plan.excluded if e.pid == 20]
    assert server.why == "MPS server: protected (stopping it ends its 2 clients)"
    assert server.mps_clients == (21, 22)
    assert not [w for w in plan.warnings if w.kind == "mps-server"]  # nothing that ends them all


def test_including_the_server_warns_and_names_its_clients_in_the_dialog_and_the_cli() -> None:
    plan = plan_for_pids(mps_sample(), [20], host="h", options=ROOT).including([20])
    assert [t.pid for t in plan.targets] == [20] and plan.include_protected == (20,)
    [warning] = [w for w in plan.warnings if w.kind == "mps-server"]
    # Bob's client (another server's, on another GPU) is not among them.
    assert warning.message == "20 is the MPS server: stopping it ends all its clients: 2 processes (21, 22)"
    assert warning.severe and warning.pid == 20
    assert "   ! 20 is the MPS server: stopping it ends all its clients: 2 processes (21, 22)" in plan_lines(
        plan
    )
    assert plan.describe()["targets"][0]["mps_clients"] == [21, 22]


def test_the_control_daemon_ends_every_client_and_the_servers() -> None:
    plan = plan_for_pids(mps_sample(), [10], host="h", options=ROOT).including([10])
    [warning] = [w for w in plan.warnings if w.kind == "mps-server"]
    assert warning.message == (
        "10 is the MPS control daemon: stopping it ends all its clients: 3 processes (21, 22, 31) "
        "and the MPS servers it started"
    )


def test_a_server_without_clients_still_warns() -> None:
    sample = mps_sample()
    lone = Sample.from_wire(
        {
            "seq": 2,
            "time": 1.0,
            "gpus": [{"index": 0, "memory_total": 140 * GiB, "memory_used": GiB}],
            "processes": [
                proc(20, "monitor", name="nvidia-cuda-mps", protected="monitor", mps="server", gpus=[0])
            ],
        }
    )
    assert sample.processes  # the full sample has clients; this one has none
    plan = plan_for_pids(lone, [20], host="h", options=ROOT).including([20])
    [warning] = [w for w in plan.warnings if w.kind == "mps-server"]
    assert warning.message == "20 is the MPS server: stopping it ends all its clients (none is listed now)"


def test_a_client_alone_has_no_such_warning() -> None:
    plan = plan_for_pids(mps_sample(), [21], host="h", options=ROOT)
    assert [t.pid for t in plan.targets] == [21]
    assert not [w for w in plan.warnings if w.kind == "mps-server"]

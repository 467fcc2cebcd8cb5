"""The sim's MIG and MPS scenarios, with real processes, through the probe.

"mig": GPU 0 in MIG mode with three instances, jobs in two of them; "mps": the MPS control daemon,
its server and three clients on GPU 0. Every process is the sim's and ends with it (the fixture
checks); the only signal sent goes to a job the sim started for this test, checked by start time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gputui.kill.plan import PlanOptions, plan_for_pids
from gputui.model import Sample
from gputui.probe.readers.sim import MIG_LAYOUT, GiB
from tests.support.pythons import PYTHON38

REPO = Path(__file__).resolve().parents[2]
PY38_SMOKE = textwrap.dedent(
    """
    import json
    from gputui.probe.core import Probe
    from gputui.probe.readers.sim import SimReader
    out = {}
    for scenario in ("mig", "mps"):
        probe = Probe(SimReader(gpus=2, scenario=scenario))
        try:
            probe.start()
            sample = probe.sample(full=True)
            out[scenario] = {
                "instances": [[i["gi"], i["ci"]] for i in sample["gpus"][0]["mig_instances"] or []],
                "mig": sorted(tuple(m["gi"] for m in p["mig"]) for p in sample["processes"]),
                "mps": sorted(p["mps"] or "-" for p in sample["processes"]),
            }
        finally:
            probe.close()
    print(json.dumps(out))
    """
)


def by_name(sample: dict[str, Any], script: str) -> list[dict[str, Any]]:
    return [p for p in sample["processes"] if any(a.endswith("/" + script) for a in p["command"])]


def test_mig_instances_under_gpu_0_and_the_jobs_in_them(sim_probe: Any) -> None:
    probe, reader = sim_probe(gpus=2, scenario="mig")
    sample = probe.sample(full=True)
    gpu0, gpu1 = sample["gpus"]
    assert gpu1["mig_instances"] is None and gpu1["util_gpu"] is not None
    assert gpu0["util_gpu"] is None  # a GPU in MIG mode reports no utilization of its own
    instances = gpu0["mig_instances"]
    assert [(i["gi"], i["ci"]) for i in instances] == [(1, 0), (2, 0), (5, 0)]
    assert [i["memory_total"] for i in instances] == [i["memory_total"] for i in MIG_LAYOUT]
    assert [i["memory_used"] for i in instances] == [46 * GiB, 20 * GiB, 0]
    assert all(i["uuid"].startswith("MIG-") for i in instances)
    assert gpu0["memory_used"] == 66 * GiB
    [train] = by_name(sample, "train.py")
    [serve] = by_name(sample, "serve.py")
    [bench] = by_name(sample, "bench.py")
    assert train["mig"] == [{"gpu": 0, "gi": 1, "ci": 0}] and train["gpus"] == [0]
    assert serve["mig"] == [{"gpu": 0, "gi": 2, "ci": 0}]
    assert bench["mig"] == [] and bench["gpus"] == [1]
    assert all(p["mps"] is None for p in sample["processes"])
    preflight = reader.preflight()
    assert preflight[0]["mig"] is True and preflight[1]["mig"] is False

    # Its job exits: the instance's memory comes back, the others keep theirs.
    [job] = [j for j in reader.jobs if j.name == "train.py"]
    assert job.signal(signal.SIGKILL)
    assert reader.wait_released(job.pid, 5.0)
    instances = probe.sample()["gpus"][0]["mig_instances"]
    assert [i["memory_used"] for i in instances] == [6 * GiB, 20 * GiB, 0]


def test_a_job_in_a_mig_instance_that_does_not_exist_is_refused(sim_probe: Any) -> None:
    _, reader = sim_probe(gpus=2, scenario="mig")
    with pytest.raises(ValueError, match=r"no MIG instance 3\.0"):
        reader.spawn("busy", gpu=0, mig=(3, 0))
    with pytest.raises(ValueError, match="GPU 1 has no MIG instance"):
        reader.spawn("busy", gpu=1, mig=(1, 0))  # GPU 1 is not in MIG mode


def test_mps_server_control_daemon_and_clients(sim_probe: Any) -> None:
    probe, reader = sim_probe(gpus=2, scenario="mps")
    wire = probe.sample(full=True)
    roles = {p["pid"]: p["mps"] for p in wire["processes"]}
    [control] = reader.jobs_with_role("mps-control")
    [server] = reader.jobs_with_role("mps-server")
    clients = reader.jobs_with_role("mps-client")
    assert roles[control.pid] == "control" and roles[server.pid] == "server"
    assert [roles[c.pid] for c in clients] == ["client"] * 3
    records = {p["pid"]: p for p in wire["processes"]}
    # Both daemons go by the comm "nvidia-cuda-mps": known monitors, protected.
    assert records[server.pid]["name"] == records[control.pid]["name"] == "nvidia-cuda-mps"
    assert records[server.pid]["protected"] == "monitor" and records[server.pid]["gpus"] == [0]
    assert records[control.pid]["gpus"] == [] and records[control.pid]["kind"] == "monitor"
    assert all(records[c.pid]["kind"] == "user" and records[c.pid]["gpus"] == [0] for c in clients)

    # A plan that includes the server warns that its clients end with it, and names them.
    sample = Sample.from_wire(wire)
    plan = plan_for_pids(sample, [server.pid], host="s", options=PlanOptions(operator="root"))
    assert plan.targets == () and plan.includable[0].pid == server.pid
    assert "MPS server: protected (stopping it ends its 3 clients)" in plan.includable[0].why
    plan = plan.including([server.pid])
    [warning] = [w for w in plan.warnings if w.kind == "mps-server"]
    pids = ", ".join(str(c.pid) for c in sorted(clients, key=lambda c: c.pid or 0))
    assert warning.message == (
        f"{server.pid} is the MPS server: stopping it ends all its clients: 3 processes ({pids})"
    )
    assert warning.severe


def test_mig_and_mps_scenarios_run_under_python_3_8() -> None:
    if not PYTHON38.exists():
        pytest.skip(f"no Python 3.8 interpreter at {PYTHON38}")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run(
        [str(PYTHON38), "-c", PY38_SMOKE], env=env, stdout=subprocess.PIPE, timeout=90, check=True
    )
    result = json.loads(out.stdout)
    assert result["mig"]["instances"] == [[1, 0], [2, 0], [5, 0]]
    assert result["mig"]["mig"] == [[], [], [1], [1], [2]]  # the probe, bench.py on GPU 1, three in MIG
    assert result["mps"]["mps"] == ["-", "client", "client", "client", "control", "server"]

"""Jobs and a container's view on real processes: the sim's "jobs" and "neighbour" scenarios
(issue 18), read by a real probe.

- jobs: a torchrun-like launcher that holds no GPU is the root of its two ranks; a supervisor is the
  root of the worker it restarts; one user's two jobs stay two jobs.
- neighbour: memory of another guest's jobs, which NVML inside a container lists for nobody, is
  `outside` (never orphaned), in the words `gputui wait` and the GPU view use, and no reset is made.

Signals go to sim processes only, through the sim's own checked signalling (below its session, by
pidfd); the fixture stops everything the sims started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from gputui.model import Sample
from gputui.probe.core import Probe
from gputui.probe.procfs import in_init_pid_namespace
from gputui.probe.readers.sim import GiB, SimReader, signal_checked, start_time
from gputui.probe.run.reset import execute
from gputui.text.words import unaccounted_words
from gputui.views.readiness import Conditions, unready
from tests.support.pythons import PYTHON38
from tests.support.simprobe import wait_gone

TIMEOUT = 30.0  # generous: a loaded 2-core CI box


def jobs_by_id(sample: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {j["id"]: j for j in sample["jobs"]}


def by_pid(sample: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {p["pid"]: p for p in sample["processes"]}


def holds_a_device(pid: int, prefix: str) -> bool:
    fds = f"/proc/{pid}/fd"
    return any(os.readlink(os.path.join(fds, fd)).startswith(prefix) for fd in os.listdir(fds))


def until(what, timeout: float = TIMEOUT, every: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        found = what()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(every)


def test_a_launcher_without_a_gpu_is_the_root_of_its_two_ranks(sim_probe):
    probe, reader = sim_probe(gpus=None, scenario="jobs")
    assert len(reader.device_paths) >= 8  # the jobs scenario's 8 GPUs
    sample = probe.sample(full=True)
    [launcher] = reader.jobs_with_role("launcher")
    ranks = sorted(pid for pid, _ in launcher.workers)
    assert len(ranks) == 2
    # The launcher holds no device file: it is no GPU process, and yet its job's root.
    assert not holds_a_device(launcher.pid, reader.device_prefix)
    assert launcher.pid not in by_pid(sample)
    job = jobs_by_id(sample)[str(launcher.pid)]
    assert job["root"] == launcher.pid and job["root_start"] == launcher.start_time
    assert job["name"] == "torchrun" and "--nproc-per-node" in job["command"]
    assert job["members"] == ranks and job["gpus"] == [0, 1] and job["memory"] == 2 * 18 * GiB
    assert job["processes"][0] == [launcher.pid, launcher.start_time]
    assert sorted(pid for pid, _ in job["processes"][1:]) == ranks
    assert job["boundary"] == "init"  # below the sim's session, a subreaper like init
    procs = by_pid(sample)
    for rank in ranks:
        assert procs[rank]["kind"] == "user" and procs[rank]["ppid"] == launcher.pid
        assert procs[rank]["job"] == str(launcher.pid)


def test_a_supervisor_is_the_root_of_the_worker_it_restarts(sim_probe):
    probe, reader = sim_probe(gpus=None, scenario="jobs")
    [supervisor] = reader.jobs_with_role("supervisor")
    [(worker, worker_start)] = supervisor.workers
    sample = probe.sample(full=True)
    job = jobs_by_id(sample)[str(supervisor.pid)]
    assert job["members"] == [worker] and job["gpus"] == [2] and job["name"] != "nv-hostengine"
    assert by_pid(sample)[worker]["job"] == str(supervisor.pid)
    assert not holds_a_device(supervisor.pid, reader.device_prefix)
    # The worker ends (killed, as a plan for GPU 2 would): half a second later there is a new one.
    assert signal_checked(worker, worker_start, signal.SIGKILL, supervisor.session)
    assert wait_gone(worker, worker_start, TIMEOUT)

    def new_worker():
        sample = probe.sample(full=True)
        job = jobs_by_id(sample).get(str(supervisor.pid))
        members = [m for m in (job or {}).get("members", []) if m != worker]
        # Once it is on its GPU: a worker that has started but not yet made its context is on none.
        return (members, sample) if members and all(by_pid(sample)[m]["gpus"] for m in members) else None

    found = until(new_worker)
    assert found, "the supervisor did not start a new worker"
    [again], sample = found
    assert by_pid(sample)[again]["ppid"] == supervisor.pid and by_pid(sample)[again]["gpus"] == [2]
    # SIGTERM to the supervisor: passed to its worker, then it exits, starting nothing more.
    again_start = start_time(again)
    assert supervisor.signal(signal.SIGTERM)
    assert wait_gone(supervisor.pid, supervisor.start_time, TIMEOUT)
    assert wait_gone(again, again_start, TIMEOUT)
    assert reader.wait_released(again, TIMEOUT)
    assert str(supervisor.pid) not in jobs_by_id(probe.sample(full=True))


def test_the_launcher_forwards_sigterm_and_exits_once_its_ranks_have(sim_probe):
    probe, reader = sim_probe(gpus=None, scenario="jobs")
    [launcher] = reader.jobs_with_role("launcher")
    assert launcher.signal(signal.SIGTERM)
    for pid, started in launcher.workers:
        assert wait_gone(pid, started, TIMEOUT)
        assert reader.wait_released(pid, TIMEOUT)
    assert wait_gone(launcher.pid, launcher.start_time, TIMEOUT)
    gpus = {g["index"]: g for g in probe.sample(full=True)["gpus"]}
    assert gpus[0]["memory_used"] == 0 and gpus[1]["memory_used"] == 0


def test_one_users_two_jobs_stay_two_jobs(sim_probe):
    probe, reader = sim_probe(gpus=None, scenario="jobs")
    sample = probe.sample(full=True)
    jobs = jobs_by_id(sample)
    busy = reader.jobs_with_role("busy")
    assert len(busy) == 2
    mine = [jobs[str(job.pid)] for job in busy]
    assert [j["members"] for j in mine] == [[job.pid] for job in busy]
    assert sorted(g for j in mine for g in j["gpus"]) == [3, 4]
    assert len({j["user"] for j in mine}) == 1 and mine[0]["id"] != mine[1]["id"]
    # Every GPU process of the scenario belongs to a job; the probe itself to none.
    for record in sample["processes"]:
        assert (record["job"] is None) == (record["kind"] == "monitor"), record
    assert len(sample["jobs"]) == 4 and sample["jobs_omitted"] == 0


def test_another_guests_memory_is_outside_never_orphaned(sim_probe):
    """Issue 18, defect 3, as the sim plays it: a probe inside an LXC guest beside other guests."""
    probe, reader = sim_probe(scenario="neighbour")
    assert probe.foreign_pids is True  # the reader said so: hello's host_pid_namespace false
    sample = probe.sample(full=True)
    gpus = {g["index"]: g for g in sample["gpus"]}
    one, two = gpus[1]["accounting"], gpus[2]["accounting"]
    assert one["outside"] == int(4.6 * GiB) and one["orphaned"] == 0 and one["processes"] == 0
    assert two["outside"] == 30 * GiB and two["processes"] == 12 * GiB and two["orphaned"] == 0
    assert gpus[3]["accounting"]["unaccounted"] == 0
    neighbours = reader.jobs_with_role("neighbour")
    assert len(neighbours) == 2 and not any(n.pid in by_pid(sample) for n in neighbours)
    # The words `gputui wait`, a verdict and the GPU view use.
    model = Sample.from_wire(sample)
    [why] = [u for u in unready(model.gpus[1], model, Conditions()) if u.condition == "unaccounted"]
    assert "used outside this container: another container or the host" in why.words
    assert "orphaned" not in why.words and "reset" not in why.words
    assert model.gpus[1].accounting is not None and model.gpus[1].accounting.outside == int(4.6 * GiB)
    assert "orphaned" not in unaccounted_words(model.gpus[2].accounting)  # type: ignore[arg-type]
    # A reset from in here is refused, with that reason; the GPU is never reset.
    events: list[dict[str, Any]] = []
    reader.set_state(1, persistence=False)
    execute(probe, {"type": "reset", "v": 1, "id": "r1", "gpu": 1, "dry_run": False}, events.append)
    done = events[-1]
    assert done["stage"] == "done" and done["result"] == "refused", done
    [blocker] = [b for b in done["data"]["blockers"] if b["kind"] == "outside"]
    assert "4.6 GiB used outside this container" in blocker["words"]
    assert reader.resets == []
    # When the other guest's job ends, its memory comes back: it was a process's, not orphaned.
    [on_one] = [n for n in neighbours if n.gpus == [1]]
    assert on_one.signal(signal.SIGTERM)
    assert until(lambda: probe.read_gpus()[0][1]["memory_used"] == 0)


def test_the_neighbour_scenarios_hello_says_it_is_not_in_the_host_pid_namespace():
    reader = SimReader(scenario="neighbour")
    probe = Probe(reader, hostname="guest")
    try:
        hello = probe.start()
        assert hello["host"]["host_pid_namespace"] is False and hello["host"]["in_container"] is True
    finally:
        probe.close()
    # Elsewhere the probe reads /proc, as on a real host.
    reader = SimReader(scenario="empty", gpus=1)
    probe = Probe(reader, hostname="host")
    try:
        assert probe.start()["host"]["host_pid_namespace"] is in_init_pid_namespace()
    finally:
        probe.close()


PY38_JOBS = """
import json, sys
from gputui.probe.core import Probe
from gputui.probe.readers.sim import SimReader
out = {}
for scenario in ("jobs", "neighbour"):
    probe = Probe(SimReader(scenario=scenario), hostname="py38")
    try:
        hello = probe.start()
        sample = probe.sample(full=True)
        out[scenario] = {
            "python": list(sys.version_info[:2]),
            "host_pid_namespace": hello["host"]["host_pid_namespace"],
            "jobs": [[j["name"], len(j["members"]), j["gpus"]] for j in sample["jobs"]],
            "outside": [g["accounting"]["outside"] for g in sample["gpus"]],
        }
    finally:
        probe.close()
print(json.dumps(out))
"""


@pytest.mark.skipif(not PYTHON38.exists(), reason=f"no Python 3.8 interpreter at {PYTHON38}")
def test_jobs_and_the_neighbour_scenario_run_under_python_3_8():
    """The probe runs on monitored hosts' Python 3.8: jobs.py and the new sim roles too."""
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(repo))
    done = subprocess.run(
        [str(PYTHON38), "-c", PY38_JOBS], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    jobs = result["jobs"]
    assert jobs["python"] == [3, 8] and jobs["host_pid_namespace"] in (True, False)
    assert ["torchrun", 2, [0, 1]] in jobs["jobs"] and len(jobs["jobs"]) == 4
    neighbour = result["neighbour"]
    assert neighbour["host_pid_namespace"] is False and neighbour["outside"][:3] == [
        0,
        int(4.6 * GiB),
        30 * GiB,
    ]

"""Kubernetes pods on the sim: the "kubepods" scenario plays a node (gputui/probe/readers/sim/pods.py:
its pods' cgroups and /var/log/pods under the sim's directory), whose jobs `snapshot` names by pod
and `clean --pod NAMESPACE/NAME` stops, with the usual dry run, plan and verdict.

The sim's processes are real processes that the test's own probe starts (and ends with it); the
real clean signals only the pod's job, whose PIDs the test read from its own fleet first.
"""

from __future__ import annotations

import json
from pathlib import Path

from gputui.cli.exits import Exit
from gputui.config.file import HostSpec
from gputui.fleet.fleet import Fleet
from gputui.model import Sample
from tests.support.cli import gputui
from tests.support.commands import clean, fleet_of
from tests.support.procs import start_time

HOST = "node-7"
TRAINER = "ml-team/llama-train-0"
NOTEBOOK = "notebooks/jupyter-alice"
CONFIG = f"""
[[hosts]]
name = "{HOST}"
address = "local"
reader = "sim"
sim_scenario = "kubepods"
"""


def config(tmp_path: Path) -> str:
    path = tmp_path / "gputui.toml"
    path.write_text(CONFIG)
    return str(path)


async def started() -> tuple[Fleet, Sample]:
    fleet = fleet_of([HostSpec(name=HOST, reader="sim", sim_scenario="kubepods", sim_seed=5)])
    fleet.start()
    await fleet.wait_first_samples(60)
    sample = fleet.view(HOST).sample
    assert sample is not None and len(sample.jobs) == 3, "the kubepods scenario's probe sent no jobs"
    return fleet, sample


def test_snapshot_json_shows_the_pods_jobs_by_namespace_and_name(tmp_path):
    run = gputui("snapshot", "--config", config(tmp_path), HOST, "--json", timeout=180)
    assert run.returncode == 0, run.stderr
    [host] = json.loads(run.stdout)["hosts"]
    jobs = {j["container"]: j for j in host["jobs"]}
    assert set(jobs) == {f"pod/{TRAINER}", f"pod/{NOTEBOOK}", None}, jobs
    assert jobs[f"pod/{TRAINER}"]["gpus"] == [0, 1] and jobs[f"pod/{TRAINER}"]["boundary"] == "container"
    assert jobs[None]["gpus"] == [3]  # the benchmark on the node itself
    by_pid = {p["pid"]: p for p in host["processes"]}
    assert by_pid[jobs[f"pod/{NOTEBOOK}"]["root"]]["container"] == f"pod/{NOTEBOOK}"


def test_a_dry_run_lists_the_pods_job_and_a_missing_pod_is_exit_2_naming_the_pods_there(tmp_path):
    cfg, log = config(tmp_path), tmp_path / "audit"
    run = gputui("clean", "--config", cfg, HOST, "--pod", TRAINER, "--dry-run", "--json", "--log", str(log))
    assert run.returncode == Exit.CLEAN, run.stderr
    [host] = json.loads(run.stdout)["hosts"]
    [job] = host["plan"]["jobs"]
    assert [t["pid"] for t in host["plan"]["targets"]] == [job["root"]] and not log.exists()
    missing = gputui("clean", "--config", cfg, HOST, "--pod", "ml-team/llama-train-9", "--dry-run")
    assert missing.returncode == Exit.USAGE and "Traceback" not in missing.stderr
    [line] = missing.stderr.strip().splitlines()
    assert line.endswith(
        f"no job in pod ml-team/llama-train-9 on the hosts (pods seen: {TRAINER}, {NOTEBOOK})"
    ), line
    # A name is taken literally: a control character is shown escaped, never sent to the terminal.
    hostile = gputui("clean", "--config", cfg, HOST, "--pod", "ml/\x1b[2Jx", "--dry-run")
    assert hostile.returncode == Exit.USAGE and "\x1b" not in hostile.stderr


async def test_clean_pod_stops_that_pods_job_and_proves_its_memory_released(tmp_path):
    fleet, sample = await started()
    [job] = [j for j in sample.jobs if j.container == f"pod/{TRAINER}"]
    [other] = [j for j in sample.jobs if j.container == f"pod/{NOTEBOOK}"]
    code, out, err = await clean(
        HOST, "--pod", TRAINER, "--yes", "--json", "--log", str(tmp_path / "a"), fleet=fleet
    )
    assert code == Exit.CLEAN, err + out
    [host] = json.loads(out)["hosts"]
    assert host["status"] == "stopped" and host["ok"] is True
    assert [j["root"] for j in host["plan"]["jobs"]] == [job.root]
    assert {p["pid"]: p["result"] for p in host["processes"]} == {job.root: "exited"}
    assert {g["result"] for g in host["gpus"].values()} == {"released"} and set(host["gpus"]) == {"0", "1"}
    assert start_time(job.root) != job.root_start
    # Only that pod's job was signalled (the sim, the other pod's job with it, ends with the fleet).
    assert other.root not in {t["pid"] for t in host["plan"]["targets"]}
    assert f"-> {other.root} " not in err

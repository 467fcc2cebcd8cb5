"""`gputui snapshot` and `gputui clean` over real SSH, as a user runs them (issue 5).

The real CLI (`python -m gputui ...`) with a TOML config whose [[hosts]] are ssh config aliases of
loopback sshd servers (tests/support/sshcluster.py), and HOME set to a directory holding .ssh/config and
.ssh/known_hosts: the CLI finds them as it would in ~/.ssh. The remote probes run the simulated GPUs;
every test checks that each remote probe and sim process ended and every sim directory is gone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.probe.readers.scenarios import scenario_gpus
from tests.support.sshcluster import SshCluster, running_cluster

pytestmark = pytest.mark.ssh

LAYOUT = {"sshd-1": ["gpu-a", "gpu-b"], "sshd-2": ["gpu-c", "ro-host"]}
HOSTS = [
    {"name": "gpu-a", "reader": "sim", "sim_scenario": "demo", "sim_variant": 0, "sim_seed": 1},
    {"name": "gpu-b", "reader": "sim", "sim_scenario": "demo", "sim_variant": 1, "sim_seed": 2},
    {"name": "gpu-c", "reader": "sim", "sim_scenario": "empty"},
    {"name": "ro-host", "reader": "sim", "sim_scenario": "demo", "read_only": True},
]


def every_gpu(name: str) -> list[int]:
    """Every GPU index of host `name`: as many as its scenario and variant give a sim (the demo's
    variant 1 is an 8-GPU box), so `all` is checked against the host, not a count written here."""
    host = next(h for h in HOSTS if h["name"] == name)
    return list(range(scenario_gpus(str(host["sim_scenario"]), int(host.get("sim_variant", 0)))))


def every_gpu_key(name: str) -> set[str]:
    """every_gpu as the keys of clean's JSON."""
    return {str(i) for i in every_gpu(name)}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SshCluster]:
    yield from running_cluster(tmp_path / "cluster", LAYOUT)


def gputui(cluster: SshCluster, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI to its end (subprocess.run kills it, by PID, if it overruns)."""
    config = cluster.write_config(HOSTS)
    return subprocess.run(
        [sys.executable, "-m", "gputui", *argv, "--config", str(config)],
        env=cluster.cli_env(),
        cwd=cluster.base,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_snapshot_json_has_every_ssh_host_live_with_gpus(cluster):
    run = gputui(cluster, "snapshot", "gpu-a", "gpu-b", "gpu-c", "--json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["version"] == 1
    assert [h["name"] for h in doc["hosts"]] == ["gpu-a", "gpu-b", "gpu-c"]
    for host in doc["hosts"]:
        assert host["status"] == "live", host
        assert [g["index"] for g in host["gpus"]] == every_gpu(host["name"])
        assert host["host"]["hostname"] == host["name"]
    by_name = {h["name"]: h for h in doc["hosts"]}
    for demo in ("gpu-a", "gpu-b"):
        kinds = {p["kind"] for p in by_name[demo]["processes"]}
        assert {"user", "ghost", "hidden", "monitor"} <= kinds
    assert not [p for p in by_name["gpu-c"]["processes"] if p["kind"] == "user"]
    # Each host had its own remote probe (its own sim): different PIDs for the same jobs.
    pids = [{p["pid"] for p in by_name[n]["processes"] if p["kind"] == "user"} for n in ("gpu-a", "gpu-b")]
    assert not pids[0] & pids[1]


@pytest.mark.parametrize(
    ("specs", "expected"),
    [
        (("gpu-a:all", "gpu-b:0"), {"gpu-a": every_gpu_key("gpu-a"), "gpu-b": {"0"}}),
        (("gpu-a:3", "gpu-b:all"), {"gpu-a": {"3"}, "gpu-b": every_gpu_key("gpu-b")}),
    ],
    ids=["all+index", "index+all"],
)
def test_clean_host_index_forms_across_ssh_hosts(cluster, tmp_path, specs, expected):
    log = tmp_path / "actions.jsonl"
    run = gputui(cluster, "clean", *specs, "--yes", "--json", "--term-timeout", "0.5", "--log", str(log))
    assert run.returncode == 0, run.stderr + run.stdout
    doc = json.loads(run.stdout)
    assert doc["ok"] is True and doc["exit_code"] == 0
    hosts = {h["host"]: h for h in doc["hosts"] if h["status"] != "skipped"}
    assert set(hosts) == set(expected)  # gpu-c was not named: not even connected
    for name, gpus in expected.items():
        host = hosts[name]
        assert host["status"] == "clean", host
        # The named GPUs are proven clean; another GPU a stopped job also used is reported as
        # released (the plan warned that stopping it frees that GPU too).
        cleaned = {i for i, g in host["gpus"].items() if g["result"] != "released"}
        assert cleaned == gpus
        assert {g["result"] for i, g in host["gpus"].items() if i in gpus} == {"clean"}
        # The memory came back: the sim GPUs' memory is owned by the job processes, so the jobs
        # holding it are gone (the probe verified it, through its pidfds and the sim's NVML).
        assert all(host["memory_after"][i] == 0 for i in gpus)
        assert any(v > 0 for v in host["memory_before"].values())
        assert host["processes"], host
        assert {p["result"] for p in host["processes"]} <= {"exited", "vanished"}, host["processes"]
        # Only processes on the named GPUs were targeted (a job may span another GPU too).
        named = {int(i) for i in gpus}
        assert all(set(p["gpus"]) & named for p in host["processes"] if p.get("gpus")), host["processes"]
    # Stages streamed with the host names (stderr: stdout carries the JSON).
    assert "gpu-a" in run.stderr and "gpu-b" in run.stderr and "SIGTERM -> " in run.stderr
    assert "gpu-c" not in run.stderr


def test_clean_on_a_read_only_host_exits_4_with_a_clear_message(cluster, tmp_path):
    log = tmp_path / "actions.jsonl"
    run = gputui(cluster, "clean", "ro-host:all", "--yes", "--log", str(log))
    assert run.returncode == 4, run.stderr + run.stdout
    assert "== ro-host: REFUSED: read-only host: kill actions are disabled here" in run.stdout
    assert "SIGTERM" not in run.stdout + run.stderr
    assert not log.exists()  # nothing was planned, nothing logged
    # The same host is readable: a snapshot shows it live, and read-only.
    run = gputui(cluster, "snapshot", "ro-host")
    assert run.returncode == 0, run.stderr
    assert "[read-only]" in run.stdout

"""@slurm:PARTITION and @slurm-job:ID against a real slurmctld (and munged) that the test starts
(tests/support/slurmctl.py): Debian's slurm-wlm and munge, installed by .ci/run. No slurmd runs: the nodes
are defined only, and a job's nodes are cloud nodes that slurmctld allocates and waits for."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.inventory.base import InventoryError
from gputui.inventory.slurm import job_hosts, partition_hosts
from tests.support.slurmctl import SlurmCluster, have_slurm

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    if not have_slurm():
        pytest.skip(
            "Slurm (slurmctld, scontrol, sinfo, squeue, sbatch) or munged is not installed (.ci/run installs them)"
        )
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm")).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def slurm_env(slurm: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    return slurm


def test_a_partition_lists_its_nodes_with_the_partition_as_group(slurm_env: SlurmCluster) -> None:
    hosts = partition_hosts("gpu")
    assert [h.name for h in hosts] == ["gpu001", "gpu002", "gpu003", "gpu004"]
    assert {h.group for h in hosts} == {"gpu"}
    assert {h.source for h in hosts} == {"@slurm:gpu"}
    assert all(h.address == h.name for h in hosts)  # reached by NodeName, as `ssh NODE` is


def test_a_partition_of_all_nodes_is_listed_by_sinfo(slurm_env: SlurmCluster) -> None:
    names = {h.name for h in partition_hosts("everything")}
    assert {"gpu001", "gpu004", "login1", "login2"} <= names


def test_an_unknown_partition_is_a_usage_error_in_one_line(slurm_env: SlurmCluster) -> None:
    with pytest.raises(InventoryError) as caught:
        partition_hosts("nosuch")
    assert not caught.value.unavailable  # bad usage (exit 2)
    assert "nosuch" in caught.value.message and "\n" not in caught.value.message


def test_a_partition_without_nodes_says_so(slurm_env: SlurmCluster) -> None:
    with pytest.raises(InventoryError, match="no nodes"):
        partition_hosts("empty")


def test_a_job_lists_the_nodes_slurm_gave_it(slurm_env: SlurmCluster) -> None:
    job = slurm_env.submit("--partition", "cloud", "--nodes", "2")
    deadline = time.monotonic() + 30
    while True:  # the scheduler allocates within a second or so
        try:
            hosts = job_hosts(job)
            break
        except InventoryError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert len(hosts) == 2
    assert {h.name for h in hosts} <= {"cn01", "cn02", "cn03", "cn04"}
    assert {h.group for h in hosts} == {f"job {job}"}


def test_a_held_job_has_no_nodes_yet(slurm_env: SlurmCluster) -> None:
    job = slurm_env.submit("--partition", "gpu", "--hold")
    with pytest.raises(InventoryError, match=r"has no nodes.*PENDING") as caught:
        job_hosts(job)
    assert not caught.value.unavailable  # bad usage (exit 2)


def test_an_unknown_job_is_a_usage_error(slurm_env: SlurmCluster) -> None:
    with pytest.raises(InventoryError) as caught:
        job_hosts("999999")
    assert not caught.value.unavailable  # bad usage (exit 2)


@pytest.mark.parametrize("bad", ["-1", "12;rm", "abc", ""])
def test_a_job_id_that_is_no_id_never_reaches_squeue(bad: str) -> None:
    with pytest.raises(InventoryError, match="not a Slurm job id"):
        job_hosts(bad)


def test_the_cli_lists_a_partition_and_fails_in_one_line(slurm: SlurmCluster, tmp_path: Path) -> None:
    env = dict(slurm.env(), PYTHONPATH=str(ROOT), HOME=str(tmp_path), GPUTUI_CONFIG="")
    env.pop("GPUTUI_CONFIG")
    ok = subprocess.run(
        [sys.executable, "-m", "gputui", "hosts", "@slurm:login", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert '"name": "login1"' in ok.stdout and '"group": "login"' in ok.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "gputui", "snapshot", "@slurm:nosuch"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == ["gputui: @slurm:nosuch: Partition nosuch not found"]


def test_without_the_tools_it_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing there
    with pytest.raises(InventoryError, match="scontrol is not installed") as caught:
        partition_hosts("gpu")
    assert not caught.value.unavailable  # bad usage (exit 2)


def test_a_controller_that_does_not_answer_is_like_a_host_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its own controller, stopped: scontrol fails, which is exit 1 (unavailable), not usage."""
    if not have_slurm():
        pytest.skip("Slurm is not installed (.ci/run installs it)")
    cluster = SlurmCluster(tmp_path / "down").start()
    try:
        cluster.stop_controller()
        monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
        with pytest.raises(InventoryError) as caught:
            partition_hosts("gpu")
    finally:
        cluster.stop()
    assert caught.value.unavailable  # like a host that is down (exit 1)
    assert "scontrol failed" in caught.value.message and "\n" not in caught.value.message

"""Bad days with kube and Slurm, fifth round: what an operator meets with a real cluster's tools.

The tools are fakes on PATH (as in test_kube_source.py and test_tool_bounds.py): scripts in tmp_path
that print what the real ones print, and misbehave the way wrappers and plugins do. Any process a
fake leaves behind writes its PID to a file, and the test ends it by that PID."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.config.file import Config
from gputui.inventory import kube
from gputui.inventory.base import InventoryError
from gputui.inventory.specs import host_specs
from gputui.inventory.tool import run_tool
from gputui.transport import make_link
from gputui.transport.local import LocalLink
from gputui.transport.ssh import SshLink
from tests.support.faketools import fake

NODES = {
    "kind": "List",
    "items": [
        {
            "kind": "Node",
            "metadata": {"name": "gpu-1", "labels": {}},
            "status": {"capacity": {"nvidia.com/gpu": "8"}},
        }
    ],
}

# A child the tool starts and leaves running with the tool's stdout and stderr (a credential plugin's
# cache refresher, a wrapper's `logger &`, an ssh ControlMaster): the tool itself has answered and exited.
LEAVES_A_CHILD = """\
import subprocess
child = subprocess.Popen(["sleep", "3600"])  # inherits stdout and stderr
open({pid_file!r}, "w").write(str(child.pid))
"""


@contextlib.contextmanager
def ended_after(pid_file: Path) -> Iterator[None]:
    """Ends the process whose PID the fake wrote to `pid_file` (one the test's fake started)."""
    try:
        yield
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


@pytest.mark.timeout(120)
def test_kubectl_that_answers_and_leaves_a_child_holding_its_output_is_read(tmp_path, monkeypatch):
    # Before: the answer was read only once both pipes closed, so a child holding them open made a
    # kubectl that had printed its nodes and exited 0 "did not answer within 30 s" (exit 1).
    pid_file = tmp_path / "child.pid"
    body = f"sys.stdout.write({json.dumps(NODES)!r}); sys.stdout.flush()\n"
    fake(tmp_path / "bin", "kubectl", body + LEAVES_A_CHILD.format(pid_file=str(pid_file)))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setattr(kube, "TIMEOUT", 20.0)
    with ended_after(pid_file):
        hosts = kube.kube_hosts("")
    assert [h.name for h in hosts] == ["gpu-1"]


@pytest.mark.timeout(120)
def test_a_failing_tool_that_leaves_a_child_says_its_own_reason(tmp_path, monkeypatch):
    pid_file = tmp_path / "child.pid"
    body = "sys.stderr.write('scontrol: error: Unable to contact slurm controller (connect failure)\\n')\n"
    fake(tmp_path / "bin", "scontrol", LEAVES_A_CHILD.format(pid_file=str(pid_file)) + body + "sys.exit(1)\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    with ended_after(pid_file), pytest.raises(InventoryError) as caught:
        run_tool(["scontrol", "show", "partition", "gpu"], "@slurm:gpu", install="nothing", timeout=20)
    assert caught.value.message == (
        "@slurm:gpu: scontrol failed: scontrol: error: Unable to contact slurm controller (connect failure)"
    )
    assert caught.value.unavailable


# --- a node named "local" -------------------------------------------------------------------------


def kube_node(name: str) -> dict[str, object]:
    return {"kind": "Node", "metadata": {"name": name}, "status": {"capacity": {"nvidia.com/gpu": "8"}}}


@pytest.mark.parametrize(
    ("spec", "tool", "body"),
    [
        (
            "@kube:",
            "kubectl",
            f"print({json.dumps({'kind': 'List', 'items': [kube_node('local'), kube_node('gpu-2')]})!r})\n",
        ),
        ("@slurm:gpu", "scontrol", "print('PartitionName=gpu AllowGroups=ALL Nodes=local,gpu-2 State=UP')\n"),
        ("@slurm-job:4711", "squeue", "print('RUNNING|local,gpu-2')\n"),
    ],
)
def test_a_cluster_node_named_local_is_that_node_over_ssh_not_this_machine(
    tmp_path, monkeypatch, spec, tool, body
):
    # Before: a node the cluster names "local" had the address gputui keeps for this machine, so
    # `gputui clean @kube: --all` read and cleaned the operator's own GPUs in its place.
    fake(tmp_path / "bin", tool, body)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    specs = {s.name: s for s in host_specs([spec], Config())}
    assert set(specs) == {"local", "gpu-2"}
    assert not specs["local"].is_local()
    assert specs["local"].address == "local"  # `ssh local`, as for any node: its ssh config entry applies
    assert isinstance(make_link(specs["local"]), SshLink)
    # The word on the command line, a host file or a hostlist still means this machine.
    (tmp_path / "hosts.txt").write_text("local\n")
    for mine in ("local", f"@file:{tmp_path / 'hosts.txt'}"):
        [this] = host_specs([mine], Config())
        assert this.is_local() and isinstance(make_link(this), LocalLink)


def test_an_ssh_config_entry_named_local_is_reached_over_ssh(tmp_path):
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text("Host local\n    HostName 10.0.0.9\n    User ops\n")
    [spec] = host_specs(["@ssh:local"], Config(), ssh_config)
    assert not spec.is_local()
    assert isinstance(make_link(spec), SshLink)


def test_gpu_nodes_whose_device_plugin_shares_or_splits_their_gpus_are_listed(tmp_path, monkeypatch):
    # Before: only `nvidia.com/gpu` capacity counted, so a node whose GPUs are all in MIG mode under
    # the device plugin's "mixed" strategy (`nvidia.com/mig-1g.10gb: 7`, no nvidia.com/gpu) or shared
    # by time-slicing with renameByDefault (`nvidia.com/gpu.shared: 32`) was no GPU node: left out,
    # and a cluster of only those "lists 2 nodes, none with nvidia.com/gpu capacity" (exit 2).
    def node(name: str, capacity: dict[str, str]) -> dict[str, object]:
        return {"kind": "Node", "metadata": {"name": name}, "status": {"capacity": {"cpu": "96", **capacity}}}

    items = [
        node(
            "mig-node", {"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "2", "nvidia.com/gpu": "0"}
        ),
        node("shared-node", {"nvidia.com/gpu.shared": "32"}),
        node("cpu-node", {"nvidia.com/mig-1g.10gb": "0"}),
        node("other-node", {"example.com/nvidia.com/mig-1g.10gb": "3"}),
    ]
    fake(tmp_path / "bin", "kubectl", f"print({json.dumps({'kind': 'List', 'items': items})!r})\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    assert [h.name for h in kube.kube_hosts("")] == ["mig-node", "shared-node"]

"""`@kube:[SELECTOR]`: a Kubernetes cluster's GPU nodes through `kubectl get nodes -o json`.

No cluster runs here (no kubelet, no API server on the test machine): `kubectl` is a fake on PATH, a
script in tmp_path that prints what a real `kubectl get nodes -o json` prints (a v1 List of Node
objects with their metadata, labels, capacity and addresses, as kubectl 1.29 writes them) and logs
its arguments; others hang, print garbage, or print more than gputui reads. `gputui hosts` runs as a
real subprocess: one line on stderr and its exit code, never a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gputui.cli.exits import Exit
from gputui.inventory import kube
from gputui.inventory.base import InventoryError

ROOT = Path(__file__).resolve().parents[2]


def node(name: str, gpus: str | None, product: str | None = None, ip: str = "10.0.0.1") -> dict[str, Any]:
    """One Node as `kubectl get nodes -o json` prints it (the fields that matter, and some that do not)."""
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "node.kubernetes.io/instance-type": "p5.48xlarge",
    }
    if product:
        labels["nvidia.com/gpu.product"] = product
    capacity = {"cpu": "192", "ephemeral-storage": "3750000000Ki", "memory": "2097152000Ki", "pods": "110"}
    if gpus is not None:
        capacity["nvidia.com/gpu"] = gpus
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "labels": labels,
            "name": name,
            "resourceVersion": "123456",
            "uid": "4f0c6d0e-3b4a-4c5d-9e8f-0a1b2c3d4e5f",
        },
        "spec": {"podCIDR": "10.244.1.0/24", "providerID": f"aws:///us-east-1a/i-{name}"},
        "status": {
            "addresses": [{"address": ip, "type": "InternalIP"}, {"address": name, "type": "Hostname"}],
            "allocatable": dict(capacity),
            "capacity": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {"kubeletVersion": "v1.29.4", "containerRuntimeVersion": "containerd://1.7.13"},
        },
    }


CLUSTER = {
    "apiVersion": "v1",
    "kind": "List",
    "metadata": {"resourceVersion": ""},
    "items": [
        node("gpu-node-1", "8", "NVIDIA-H100-80GB-HBM3"),
        node("cpu-node-1", None),  # no GPUs: not a host of the fleet
        node("gpu-node-2", "8", "NVIDIA-H100-80GB-HBM3", ip="10.0.0.2"),
        node("gpu-node-3", "4"),  # no GPU feature discovery: grouped by instance type
        node("gpu-node-4", "0", "NVIDIA-A100-SXM4-80GB"),  # the device plugin sees none
    ],
}


def fake_kubectl(tmp_path: Path, body: str) -> Path:
    """An executable `kubectl` in tmp_path/bin: Python, `body` after `import json, os, sys, time`;
    it appends its argv to tmp_path/argv.log first."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / "kubectl"
    log = tmp_path / "argv.log"
    path.write_text(
        f"#!{sys.executable}\nimport json, os, sys, time\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n{textwrap.dedent(body)}"
    )
    path.chmod(0o755)
    return path


def prints(tmp_path: Path, document: Any) -> None:
    (tmp_path / "nodes.json").write_text(json.dumps(document))
    fake_kubectl(tmp_path, f"sys.stdout.write(open({str(tmp_path / 'nodes.json')!r}).read())\n")


def hosts(tmp_path: Path, spec: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": str(tmp_path / "bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
    }
    return subprocess.run(
        [sys.executable, "-m", "gputui", "hosts", spec, "--json"],
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
    )


def one_line(run: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in run.stderr, run.stderr
    [line] = run.stderr.strip().splitlines()
    return line


def test_the_gpu_nodes_are_hosts_by_name_grouped_by_gpu_model(tmp_path):
    prints(tmp_path, CLUSTER)
    run = hosts(tmp_path, "@kube:")
    assert run.returncode == 0, run.stderr
    listed = json.loads(run.stdout)
    listed = listed["hosts"] if isinstance(listed, dict) else listed
    got = [(h["name"], h["address"], h["group"]) for h in listed]
    assert got == [
        ("gpu-node-1", "gpu-node-1", "NVIDIA-H100-80GB-HBM3"),
        ("gpu-node-2", "gpu-node-2", "NVIDIA-H100-80GB-HBM3"),
        ("gpu-node-3", "gpu-node-3", "p5.48xlarge"),
    ]
    assert all(h["source"] == "@kube:" for h in listed)
    [argv] = [json.loads(line) for line in (tmp_path / "argv.log").read_text().splitlines()]
    assert argv[:3] == ["get", "nodes", "--output=json"] and not any(a.startswith("--selector") for a in argv)


def test_a_selector_is_passed_as_one_argument(tmp_path):
    prints(tmp_path, CLUSTER)
    selector = "pool=train,nvidia.com/gpu.product in (NVIDIA-H100-80GB-HBM3)"
    run = hosts(tmp_path, f"@kube:{selector}")
    assert run.returncode == 0, run.stderr
    [argv] = [json.loads(line) for line in (tmp_path / "argv.log").read_text().splitlines()]
    assert argv[-1] == f"--selector={selector}"


@pytest.mark.parametrize("selector", ["-l=x", "--kubeconfig=/tmp/evil", "a\x1b[2Jb", "x" * 2000])
def test_a_selector_that_is_no_selector_never_reaches_kubectl(tmp_path, selector):
    prints(tmp_path, CLUSTER)
    with pytest.raises(InventoryError) as caught:
        kube.kube_hosts(selector)
    assert "is not a label selector" in caught.value.message and "\x1b" not in caught.value.message
    assert not (tmp_path / "argv.log").exists()


def test_a_cluster_without_gpu_nodes_says_so(tmp_path):
    prints(tmp_path, {"apiVersion": "v1", "kind": "List", "items": [node("cpu-1", None), node("cpu-2", "0")]})
    run = hosts(tmp_path, "@kube:pool=cpu")
    assert run.returncode == Exit.USAGE
    assert one_line(run).endswith(
        "@kube:pool=cpu: kubectl lists 2 nodes, none with nvidia.com/gpu capacity (or shared or MIG GPUs)"
    )


def test_without_kubectl_it_says_what_to_install(tmp_path):
    (tmp_path / "bin").mkdir()
    run = hosts(tmp_path, "@kube:")
    assert run.returncode == Exit.USAGE
    assert "kubectl is not installed or not on PATH (install kubectl" in one_line(run)


def test_a_failing_kubectl_is_one_line_with_its_reason(tmp_path):
    fake_kubectl(
        tmp_path,
        "sys.stderr.write('E0501 memcache.go:265] couldn\\'t get current server API group list\\n"
        "error: You must be logged in to the server (Unauthorized)\\n'); sys.exit(1)\n",
    )
    run = hosts(tmp_path, "@kube:")
    assert run.returncode == Exit.FAILED  # unavailable, as a failing scontrol is
    assert one_line(run).endswith("kubectl failed: error: You must be logged in to the server (Unauthorized)")


@pytest.mark.parametrize(
    ("output", "words"),
    [
        ("<html>502 Bad Gateway</html>", "kubectl did not print JSON"),
        ('{"kind": "Status", "status": "Failure"}', "kubectl printed JSON that is not a node list"),
        ('{"items": "nodes"}', "kubectl printed JSON that is not a node list"),
        ("[" * 100_000, "kubectl printed JSON nested too deeply to read"),
    ],
)
def test_garbage_is_one_line(tmp_path, output, words):
    (tmp_path / "out.txt").write_text(output)
    fake_kubectl(tmp_path, f"sys.stdout.write(open({str(tmp_path / 'out.txt')!r}).read())\n")
    run = hosts(tmp_path, "@kube:")
    assert run.returncode in (1, 2) and words in one_line(run)


def test_hostile_names_and_labels_are_refused_or_dropped_and_shown_escaped(tmp_path):
    evil = node("gpu-1", "8", "H100\x1b]0;owned\x07")  # a label that is no label value: no group
    prints(tmp_path, {"kind": "List", "items": [evil]})
    run = hosts(tmp_path, "@kube:")
    assert run.returncode == 0, run.stderr
    listed = json.loads(run.stdout)
    listed = listed["hosts"] if isinstance(listed, dict) else listed
    assert [(h["name"], h["group"]) for h in listed] == [("gpu-1", "p5.48xlarge")]
    for name in ("gpu-1\x1b[2J", "-oProxyCommand=sh", "a b", 42):
        prints(tmp_path, {"kind": "List", "items": [node(name, "8")]})  # type: ignore[arg-type]
        run = hosts(tmp_path, "@kube:")
        assert run.returncode == Exit.USAGE, name
        line = one_line(run)
        assert "node name" in line and "\x1b" not in line, line


def test_more_output_than_gputui_reads_is_one_line(tmp_path):
    # 2 GB written lazily: kubectl is killed past gputui's bound, never read whole.
    fake_kubectl(
        tmp_path,
        "chunk = b'{\"items\": [' + b' ' * (1 << 20)\nfor _ in range(2048):\n    sys.stdout.buffer.write(chunk)\n",
    )
    run = hosts(tmp_path, "@kube:")
    assert run.returncode == Exit.USAGE
    assert "kubectl printed more than" in one_line(run)


@pytest.mark.timeout(60)
def test_a_kubectl_that_hangs_is_killed_within_the_timeout(tmp_path, monkeypatch):
    fake_kubectl(tmp_path, "sys.stdout.write('{\"items\": [');sys.stdout.flush()\ntime.sleep(3600)\n")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(kube, "TIMEOUT", 1.0)
    with pytest.raises(InventoryError) as caught:
        kube.kube_hosts("")
    assert caught.value.message == "@kube:: kubectl did not answer within 1 s"
    argv = json.loads((tmp_path / "argv.log").read_text())
    assert "--request-timeout=1s" in argv  # kubectl is told to give up first, where it can

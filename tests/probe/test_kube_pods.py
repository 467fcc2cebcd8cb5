"""A process in a Kubernetes pod belongs to a job whose container is the pod, named `pod/NAMESPACE/NAME`
from what the node keeps (/var/log/pods/<namespace>_<name>_<uid>/: gputui/probe/pods.py).

Fake /proc trees (real files in the kernel's layout, read by the probe's own readers) for both cgroup
drivers (systemd: kubepods.slice/...-pod<uid with _>.slice/<runtime>-<id>.scope; cgroupfs:
/kubepods/<qos>/pod<uid>/<id>) and both cgroup versions (v2's one `0::` line, v1's one line per
controller), each QoS class and the runtimes' container id prefixes; a fake /var/log/pods beside.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gputui.probe import pods
from gputui.probe.jobs import JobFinder
from gputui.probe.pods import Containers, PodNames, parse_pod_dir
from gputui.probe.procfs import container_in, container_of

UID = "1a2b3c4d-5e6f-4a8b-9c0d-112233445566"
SYSTEMD_UID = UID.replace("-", "_")
STATIC_UID = "8e2f9c1b0a7d6e5f4c3b2a1908f7e6d5"  # a static pod's uid: the hash of its manifest
CID = "3f2a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a"

# (driver and version, the text of /proc/PID/cgroup of a process in the pod)
CGROUPS = {
    "systemd v2 burstable containerd": "0::/kubepods.slice/kubepods-burstable.slice/"
    f"kubepods-burstable-pod{SYSTEMD_UID}.slice/cri-containerd-{CID}.scope\n",
    "systemd v2 guaranteed cri-o": f"0::/kubepods.slice/kubepods-pod{SYSTEMD_UID}.slice/crio-{CID}.scope\n",
    "systemd v1 besteffort docker": "".join(
        f"{n}:{c}:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{SYSTEMD_UID}.slice/"
        f"docker-{CID}.scope\n"
        for n, c in ((12, "memory"), (11, "cpu,cpuacct"), (4, "devices"), (1, "name=systemd"))
    ),
    "cgroupfs v1 burstable": "".join(
        f"{n}:{c}:/kubepods/burstable/pod{UID}/{CID}\n"
        for n, c in ((9, "memory"), (3, "pids"), (1, "name=systemd"))
    ),
    "cgroupfs v2 guaranteed": f"0::/kubepods/pod{UID}/{CID}\n",
    "cgroupfs v2 besteffort": f"0::/kubepods/besteffort/pod{UID}/{CID}\n",
    "kubelet cgroup root (kind)": "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
    f"kubelet-kubepods-besteffort-pod{SYSTEMD_UID}.slice/cri-containerd-{CID}.scope\n",
}


class Tree:
    """A fake /proc: per process the files the probe reads (stat, status, cgroup, cmdline)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()
        self.add(1, 0, "systemd", ["/sbin/init"], cgroup="/init.scope")

    def add(
        self,
        pid: int,
        ppid: int,
        comm: str,
        argv: list[str],
        cgroup: str = "/",
        nspid: list[int] | None = None,
    ) -> None:
        d = self.root / str(pid)
        d.mkdir()
        fields = f"S {ppid} {pid} {pid} 0 0 0 0 0 0 0 0 0 0 0 20 0 1 0 {pid * 10} 0 0"
        (d / "stat").write_text(f"{pid} ({comm}) {fields}\n")
        ns = " ".join(str(p) for p in (nspid or [pid]))
        (d / "status").write_text(f"Name:\t{comm}\nUid:\t0\t0\t0\t0\nNSpid:\t{ns}\n")
        (d / "cgroup").write_text(f"0::{cgroup}\n")
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")


def gpu_proc(pid: int, gpus: list[int]) -> dict[str, Any]:
    memory = {str(g): 1 << 30 for g in gpus}
    return {
        "pid": pid,
        "start_time": pid * 10,
        "kind": "user",
        "state": "S",
        "gpus": gpus,
        "gpu_memory": memory,
    }


def pod_logs(tmp_path: Path, *names: str) -> Path:
    root = tmp_path / "var-log-pods"
    root.mkdir(exist_ok=True)
    for name in names:
        (root / name / "trainer").mkdir(parents=True)
        (root / name / "trainer" / "0.log").write_text("")
    return root


def pod_tree(tmp_path: Path, cgroup: str) -> Tree:
    """containerd's shim (on the host) -> the container's PID 1 `torchrun` -> two ranks, in the pod."""
    tree = Tree(tmp_path / "proc")
    tree.add(
        900, 1, "containerd-shim", ["containerd-shim-runc-v2"], cgroup="/system.slice/containerd.service"
    )
    tree.add(901, 900, "torchrun", ["torchrun", "--nproc-per-node", "2", "train.py"], nspid=[901, 1])
    tree.add(902, 901, "python", ["python", "train.py", "--local-rank", "0"], nspid=[902, 7])
    tree.add(903, 901, "python", ["python", "train.py", "--local-rank", "1"], nspid=[903, 8])
    for pid in (901, 902, 903):
        (tree.root / str(pid) / "cgroup").write_text(cgroup)
    return tree


def jobs(tree: Tree, logs: Path) -> dict[str, dict]:
    finder = JobFinder(set(), proc=str(tree.root), containers=Containers(str(tree.root), str(logs)))
    found, _, _ = finder.compute([gpu_proc(902, [0]), gpu_proc(903, [1])])
    return {j["id"]: j for j in found}


@pytest.mark.parametrize("layout", sorted(CGROUPS))
def test_a_process_in_a_pod_belongs_to_a_job_whose_container_is_the_pod_by_namespace_and_name(
    tmp_path, layout
):
    cgroup = CGROUPS[layout]
    assert container_in(cgroup) == f"pod/{UID}", layout
    tree = pod_tree(tmp_path, cgroup)
    logs = pod_logs(tmp_path, f"ml-team_trainer-7f9c4_{UID}", f"kube-system_coredns-5d78c_{UID[::-1]}")
    found = jobs(tree, logs)
    assert list(found) == ["901"], found
    job = found["901"]
    assert job["container"] == "pod/ml-team/trainer-7f9c4" and job["boundary"] == "container"
    assert job["members"] == [902, 903] and job["processes"][0] == [901, 9010]
    # The process records name it the same way (the core reads each process's container once).
    containers = Containers(str(tree.root), str(logs))
    assert containers.label(containers.container(902)) == "pod/ml-team/trainer-7f9c4"
    assert containers.label(containers.container(900)) is None  # the shim is on the host


def test_without_the_pods_directory_a_pod_keeps_its_uid(tmp_path):
    tree = pod_tree(tmp_path, CGROUPS["cgroupfs v2 guaranteed"])
    found = jobs(tree, tmp_path / "no-such-dir")
    assert found["901"]["container"] == f"pod/{UID}"


def test_a_static_pods_uid_is_a_hash_and_is_named_too(tmp_path):
    cgroup = f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{STATIC_UID}.slice/crio-{CID}.scope\n"
    tree = pod_tree(tmp_path, cgroup)
    found = jobs(tree, pod_logs(tmp_path, f"kube-system_etcd-node-1_{STATIC_UID}"))
    assert found["901"]["container"] == "pod/kube-system/etcd-node-1"


def test_cgroup_paths_that_are_no_pod():
    for path in (
        "/kubepods.slice",
        "/kubepods.slice/kubepods-burstable.slice",
        "/kubepods/besteffort",
        "/kubepods/burstable/podNOT-A-UID/abc",  # not a uid: no pod invented
        f"/kubepods.slice/kubepods-pod{SYSTEMD_UID}.slice/crio-conmon-{CID}.scope",  # CRI-O's monitor
    ):
        assert container_of(path) is None, path
    # The outermost container wins: a kubelet inside a Docker container (kind) is that container's.
    assert container_of(f"/system.slice/docker-{CID}.scope/kubepods/pod{UID}/x") == "docker/" + CID[:12]


def test_pod_directory_names_are_taken_only_when_they_are_dns_names():
    assert parse_pod_dir(f"default_web-0_{UID}") == ("default", "web-0", UID)
    assert parse_pod_dir(f"default_web.a-0_{UID}") == ("default", "web.a-0", UID)
    for name in (
        f"default_web_0_{UID}",  # a fourth part
        f"default_web\x1b[31m_{UID}",  # a control character
        f"Default_web-0_{UID}",  # upper case
        f"default__{UID}",
        "default_web-0_not-a-uid!",
        "README",
    ):
        assert parse_pod_dir(name) is None, name


def test_the_directory_is_read_again_for_an_unknown_pod_at_most_every_rescan_seconds(tmp_path):
    logs = pod_logs(tmp_path, f"a_one_{UID}")
    now = [100.0]
    names = PodNames(str(logs), clock=lambda: now[0])
    assert names.lookup(UID) == ("a", "one")
    assert names.lookup(STATIC_UID) is None  # not there: the listing was read again, found nothing
    (logs / f"b_two_{STATIC_UID}").mkdir()
    now[0] += pods.RESCAN_S / 2
    assert names.lookup(STATIC_UID) is None  # too soon to read it again
    now[0] += pods.RESCAN_S
    assert names.lookup(STATIC_UID) == ("b", "two")
    assert names.label(f"pod/{STATIC_UID}") == "pod/b/two" and names.label("lxc/129") == "lxc/129"


def test_one_listing_reads_at_most_max_entries_names(tmp_path, monkeypatch):
    monkeypatch.setattr(pods, "MAX_ENTRIES", 5)
    logs = pod_logs(tmp_path, *(f"ns_pod-{i}_{i:08x}-0000-4000-8000-000000000000" for i in range(20)))
    names = PodNames(str(logs))
    found = [names.lookup(f"{i:08x}-0000-4000-8000-000000000000") for i in range(20)]
    assert sum(1 for f in found if f) <= 5

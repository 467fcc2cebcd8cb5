"""How a GPU process's job and its root are found (gputui/probe/jobs.py), over fake /proc trees.

Each tree is real files in the layout the kernel gives (`stat`, `status`, `cgroup`, `cmdline` per
PID), read by the probe's own readers (JobFinder): one test per boundary people recognise (a
person's session, a Slurm job, a systemd unit, a container, init), and the rules around them. The
same on real processes through the sim is tests/probe/test_sim_jobs.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gputui.probe.jobs import MAX_JOBS, ROOT_ARG, JobFinder, Node, interactive_shell
from gputui.probe.procfs import container_of, slurm_job_in, unit_in

GiB = 1 << 30
SESSION = "/user.slice/user-1000.slice/session-3.scope"
DOCKER_ID = "3f2a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a"


class Tree:
    """A fake /proc: one directory per process with the files the probe reads."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()
        (root / "stat").write_text("btime 1000\n")
        self.add(1, 0, "systemd", ["/sbin/init"], cgroup="/init.scope", uid=0)

    def add(
        self,
        pid: int,
        ppid: int,
        comm: str,
        argv: list[str] | None = None,
        cgroup: str = SESSION,
        uid: int = 1000,
        nspid: list[int] | None = None,
        state: str = "S",
        start: int | None = None,
    ) -> None:
        d = self.root / str(pid)
        d.mkdir()
        start = pid * 10 if start is None else start
        fields = f"{state} {ppid} {pid} {pid} 0 0 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0"
        (d / "stat").write_text(f"{pid} ({comm}) {fields}\n")
        ns = " ".join(str(p) for p in (nspid or [pid]))
        (d / "status").write_text(f"Name:\t{comm}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nNSpid:\t{ns}\n")
        (d / "cgroup").write_text(f"0::{cgroup}\n")
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in (argv or [comm])) + b"\0")

    def finder(self, stop: set[int] | None = None) -> JobFinder:
        return JobFinder(stop or set(), proc=str(self.root))


def gpu_proc(
    pid: int, gpus: list[int], nbytes: int = GiB, kind: str = "user", **fields: Any
) -> dict[str, Any]:
    return {
        "pid": pid,
        "start_time": pid * 10,
        "kind": kind,
        "state": "S",
        "gpus": gpus,
        "gpu_memory": {str(g): nbytes for g in gpus} if kind == "user" else {},
        **fields,
    }


def jobs_of(tree: Tree, records: list[dict[str, Any]], stop: set[int] | None = None):
    jobs, job_of, omitted = tree.finder(stop).compute(records)
    return {j["id"]: j for j in jobs}, job_of, omitted


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path / "proc")


# -- a person's session -------------------------------------------------------------------------


def test_a_launcher_below_a_login_shell_is_the_root_of_its_ranks_and_their_workers(tree):
    tree.add(500, 1, "sshd", ["sshd: /usr/sbin/sshd -D"], cgroup="/system.slice/ssh.service", uid=0)
    tree.add(600, 500, "sshd-session", ["sshd: alice [priv]"], uid=0)
    tree.add(700, 600, "bash", ["-bash"])
    tree.add(
        800,
        700,
        "torchrun",
        ["/usr/bin/python3", "/usr/local/bin/torchrun", "--nproc-per-node", "2", "train.py"],
    )
    tree.add(801, 800, "python", ["/usr/bin/python3", "-u", "train.py", "--local-rank", "0"])
    tree.add(802, 800, "python", ["/usr/bin/python3", "-u", "train.py", "--local-rank", "1"])
    tree.add(803, 801, "pt_data_worker", ["/usr/bin/python3", "-u", "train.py", "--local-rank", "0"])
    records = [
        gpu_proc(801, [0], 9 * GiB),
        gpu_proc(802, [1], 9 * GiB),
        gpu_proc(803, [0], kind="hidden", reason="pgid"),  # a data-loader worker holding the devices
    ]
    jobs, job_of, omitted = jobs_of(tree, records)
    assert omitted == 0 and list(jobs) == ["800"]
    job = jobs["800"]
    assert job["root"] == 800 and job["root_start"] == 8000 and job["name"] == "torchrun"
    assert job["boundary"] == "shell" and job["members"] == [801, 802, 803]
    # Parents before children, the root first: the order a plan stops them in.
    assert job["processes"] == [[800, 8000], [801, 8010], [802, 8020], [803, 8030]]
    assert job["gpus"] == [0, 1] and job["memory"] == 18 * GiB
    assert job["uid"] == 1000 and job["command"][1] == "/usr/local/bin/torchrun"
    assert job["slurm_job"] is None and job["container"] is None and job["unit"] is None
    assert job_of == {801: "800", 802: "800", 803: "800"}


def test_a_roots_long_script_path_keeps_the_scripts_name_whole(tree):
    """A job's command (the job table, `jobs[].command` in JSON) gives up the directories of a long
    path, never the script's name: `/…/kernels/notebook_kernel_launcher.py`, not `/tmp/…(68 bytes)`."""
    script = "/home/alice/projects/2025-notebooks/runtime/kernels/notebook_kernel_launcher.py"
    config = "--connection-file=/home/alice/.local/share/jupyter/runtime/kernel-4f1c9d2e.json"
    assert len(script) > ROOT_ARG and len(config) > ROOT_ARG
    tree.add(700, 1, "bash", ["-bash"])
    tree.add(800, 700, "python", ["/usr/bin/python3", script, config])
    tree.add(801, 800, "python", ["/usr/bin/python3", "-m", "ipykernel_launcher"])
    jobs, _, _ = jobs_of(tree, [gpu_proc(801, [0])])
    command = jobs["800"]["command"]
    assert command[0] == "/usr/bin/python3"
    assert command[1].endswith("/kernels/notebook_kernel_launcher.py") and "\u2026" in command[1]
    assert command[2].startswith("--connection-file=/") and command[2].endswith("/kernel-4f1c9d2e.json")
    assert all(len(arg) <= ROOT_ARG for arg in command)


def test_a_bash_loop_in_tmux_is_the_root_of_the_runs_it_starts(tree):
    tree.add(900, 1, "tmux: server", ["tmux"])
    tree.add(901, 900, "bash", ["bash"])  # the pane's interactive shell
    tree.add(902, 901, "bash", ["bash", "run.sh"])  # work: a script
    tree.add(903, 902, "python", ["python", "bench.py", "--iters", "100"])
    tree.add(910, 900, "zsh", ["zsh", "-l"])  # another pane
    tree.add(911, 910, "sh", ["sh", "-c", "while true; do python serve.py; done"])
    tree.add(912, 911, "python", ["python", "serve.py"])
    jobs, job_of, _ = jobs_of(tree, [gpu_proc(903, [0]), gpu_proc(912, [1])])
    assert job_of == {903: "902", 912: "911"}
    assert jobs["902"]["boundary"] == "shell" and jobs["902"]["members"] == [903]
    assert jobs["911"]["boundary"] == "shell" and jobs["911"]["command"][:2] == ["sh", "-c"]


def test_a_process_started_from_a_shell_is_its_own_job():
    for argv in (["-bash"], ["bash"], ["zsh", "-l"], ["bash", "-i"], ["fish"]):
        assert interactive_shell(Node(5, 50, 1, argv[0].lstrip("-"), argv=tuple(argv))), argv
    for argv in (["bash", "run.sh"], ["sh", "-c", "python x.py"], ["bash", "-e", "loop.sh"]):
        assert not interactive_shell(Node(5, 50, 1, argv[0], argv=tuple(argv))), argv
    assert not interactive_shell(Node(5, 50, 1, "python", argv=("python", "-i")))


# -- Slurm --------------------------------------------------------------------------------------


def test_a_slurm_batch_script_is_the_root_and_names_its_slurm_job(tree):
    tree.add(1000, 1, "slurmd", ["/usr/sbin/slurmd"], cgroup="/system.slice/slurmd.service", uid=0)
    stepd = "/system.slice/slurmstepd.scope/job_4711/step_batch/slurm"
    task = "/system.slice/slurmstepd.scope/job_4711/step_batch/user/task_0"
    tree.add(1001, 1000, "slurmstepd", ["slurmstepd: [4711.batch]"], cgroup=stepd, uid=0)
    tree.add(1002, 1001, "bash", ["/bin/bash", "/var/spool/slurmd/job04711/slurm_script"], cgroup=task)
    tree.add(1003, 1002, "python", ["python", "train.py"], cgroup=task)
    jobs, job_of, _ = jobs_of(tree, [gpu_proc(1003, [2])])
    assert job_of == {1003: "1002"}
    job = jobs["1002"]
    assert job["boundary"] == "slurm" and job["slurm_job"] == "4711" and job["members"] == [1003]
    assert job["unit"] is None  # slurmstepd.scope is Slurm's, not a unit of work


# -- systemd units ------------------------------------------------------------------------------


def test_a_services_main_process_is_the_root_and_names_its_unit(tree):
    vllm = "/system.slice/vllm.service"
    tree.add(1100, 1, "python3", ["python3", "-m", "vllm.entrypoints.openai.api_server"], cgroup=vllm)
    tree.add(
        1101, 1100, "python3", ["python3", "-c", "from multiprocessing.spawn import spawn_main"], cgroup=vllm
    )
    # A Restart=always unit running a supervisor that runs the GPU worker.
    embed = "/system.slice/embed.service"
    tree.add(1200, 1, "python3", ["python3", "supervisor.py"], cgroup=embed)
    tree.add(1201, 1200, "python3", ["python3", "worker.py"], cgroup=embed)
    jobs, job_of, _ = jobs_of(tree, [gpu_proc(1100, [0]), gpu_proc(1101, [1]), gpu_proc(1201, [2])])
    assert job_of == {1100: "1100", 1101: "1100", 1201: "1200"}
    assert jobs["1100"]["boundary"] == "unit" and jobs["1100"]["unit"] == "vllm.service"
    assert jobs["1100"]["members"] == [1100, 1101]
    assert jobs["1200"]["boundary"] == "unit" and jobs["1200"]["unit"] == "embed.service"
    assert jobs["1200"]["members"] == [1201]  # the supervisor holds no GPU: the root all the same


def test_a_user_unit_below_the_users_service_manager(tree):
    manager = "/user.slice/user-1000.slice/user@1000.service/init.scope"
    tree.add(1250, 1, "systemd", ["/usr/lib/systemd/systemd", "--user"], cgroup=manager)
    unit = "/user.slice/user-1000.slice/user@1000.service/app.slice/run-r3f1.service"
    tree.add(1251, 1250, "python", ["python", "finetune.py"], cgroup=unit)
    jobs, job_of, _ = jobs_of(tree, [gpu_proc(1251, [0])])
    assert job_of == {1251: "1251"} and jobs["1251"]["unit"] == "run-r3f1.service"


# -- containers ---------------------------------------------------------------------------------


def test_a_docker_containers_process_is_bounded_by_its_container(tree):
    tree.add(
        1300,
        1,
        "containerd-shim",
        ["/usr/bin/containerd-shim-runc-v2"],
        cgroup="/system.slice/containerd.service",
        uid=0,
    )
    scope = f"/system.slice/docker-{DOCKER_ID}.scope"
    tree.add(1301, 1300, "python", ["python", "train.py"], cgroup=scope, nspid=[1301, 1])  # its PID 1
    tree.add(1302, 1301, "python", ["python", "train.py"], cgroup=scope, nspid=[1302, 7])
    jobs, job_of, _ = jobs_of(tree, [gpu_proc(1301, [0]), gpu_proc(1302, [1])])
    assert job_of == {1301: "1301", 1302: "1301"}
    job = jobs["1301"]
    assert job["boundary"] == "container" and job["container"] == "docker/" + DOCKER_ID[:12]


def test_an_lxc_guests_jobs_stop_below_its_own_init_and_shells(tree):
    tree.add(1400, 1, "lxc-start", ["[lxc monitor] /var/lib/lxc 129"], cgroup="/lxc.monitor/129", uid=0)
    tree.add(
        1401, 1400, "systemd", ["/sbin/init"], cgroup="/lxc/129/ns/init.scope", nspid=[1401, 1], uid=100000
    )
    tree.add(
        1402,
        1401,
        "sshd",
        ["sshd: /usr/sbin/sshd -D"],
        cgroup="/lxc/129/ns/system.slice/ssh.service",
        uid=100000,
    )
    guest_session = "/lxc/129/ns/user.slice/user-1000.slice/session-1.scope"
    tree.add(1403, 1402, "bash", ["-bash"], cgroup=guest_session, uid=101000)
    tree.add(1404, 1403, "python", ["python", "train.py"], cgroup=guest_session, uid=101000)
    tree.add(
        1405,
        1401,
        "python3",
        ["python3", "-m", "vllm"],
        cgroup="/lxc/129/ns/system.slice/vllm.service",
        uid=100000,
    )
    jobs, job_of, _ = jobs_of(tree, [gpu_proc(1404, [0]), gpu_proc(1405, [1])])
    assert job_of == {1404: "1404", 1405: "1405"}
    assert jobs["1404"]["container"] == "lxc/129" and jobs["1404"]["boundary"] == "shell"
    assert jobs["1405"]["container"] == "lxc/129" and jobs["1405"]["boundary"] == "unit"
    assert jobs["1405"]["unit"] == "vllm.service"


def test_container_names_from_cgroup_paths():
    assert container_of("/lxc/129/ns/system.slice/x.service") == "lxc/129"  # Proxmox
    assert container_of("/lxc.payload.129/init.scope") == "lxc/129"  # LXC 4+
    assert container_of("/lxc.payload/129") == "lxc/129"
    assert container_of("/lxc.monitor.129") is None and container_of("/lxc.monitor/129") is None
    assert container_of(f"/system.slice/docker-{DOCKER_ID}.scope") == "docker/" + DOCKER_ID[:12]
    assert container_of(f"/docker/{DOCKER_ID}") == "docker/" + DOCKER_ID[:12]
    assert container_of("/machine.slice/libpod-0123456789abcdef.scope") == "podman/0123456789ab"
    assert container_of("/machine.slice/libpod-conmon-0123456789abcdef.scope") is None
    pod = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b_3c4d.slice/cri-containerd-9f.scope"
    assert container_of(pod) == "pod/1a2b-3c4d"
    assert container_of("/kubepods/besteffort/pod1a2b-3c4d/9f9f") == "pod/1a2b-3c4d"
    assert container_of("/machine.slice/machine-box.scope") == "machine/box"
    assert container_of("/lxc/129/ns/system.slice/docker-ab.scope") == "lxc/129"  # the outermost
    for path in ("/", SESSION, "/system.slice/ssh.service", "/kubepods.slice"):
        assert container_of(path) is None, path


def test_slurm_jobs_and_units_from_cgroup_files():
    assert slurm_job_in("0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0\n") == "4711"
    assert slurm_job_in("7:memory:/slurm/uid_1000/job_88/step_batch/task_0\n0::/\n") == "88"  # v1
    assert slurm_job_in("0::/user.slice/job_x/a\n") is None and slurm_job_in(None) is None
    assert unit_in("0::/system.slice/vllm.service\n") == "vllm.service"
    assert unit_in("1:name=systemd:/system.slice/vllm.service\n") == "vllm.service"  # v1 hosts
    for text in (f"0::{SESSION}\n", "0::/init.scope\n", "0::/user.slice/user-1000.slice/user@1000.service/init.scope\n",
                 f"0::/system.slice/docker-{DOCKER_ID}.scope\n", "0::/\n", ""):  # fmt: skip
        assert unit_in(text) is None, text


# -- init, the probe, bounds --------------------------------------------------------------------


def test_an_orphan_below_init_is_its_own_job_and_the_probes_chain_is_never_climbed(tree):
    tree.add(1500, 1, "python", ["python", "train.py"])  # nohup'd, its shell gone
    tree.add(1600, 1, "python", ["python", "-m", "pytest"])  # the probe's ancestor
    tree.add(1601, 1600, "python", ["python", "cuda_job.py"])
    jobs, job_of, _ = jobs_of(
        tree, [gpu_proc(1500, [0]), gpu_proc(1601, [1]), gpu_proc(1600, [2])], stop={1600}
    )
    assert job_of == {1500: "1500", 1601: "1601", 1600: "1600"}
    assert {j["boundary"] for j in jobs.values()} == {"init"}


def test_a_subreaper_the_reader_names_is_like_init(tree):
    tree.add(1700, 1, "python", ["python", "gputui_sim_session.py"])
    tree.add(1701, 1700, "python", ["python", "train.py"])
    tree.add(1702, 1700, "python", ["python", "eval.py"])
    records = [gpu_proc(1701, [0]), gpu_proc(1702, [1])]
    assert jobs_of(tree, records)[1] == {1701: "1700", 1702: "1700"}  # unknown: one family
    assert jobs_of(tree, records, stop={1700})[1] == {1701: "1701", 1702: "1702"}


def test_a_walk_stops_after_64_ancestors(tree):
    for pid in range(2000, 2080):
        tree.add(pid, pid - 1 if pid > 2000 else 1, "python", ["python", "nest.py"])
    jobs, _, _ = jobs_of(tree, [gpu_proc(2079, [0])])
    [job] = jobs.values()
    assert job["boundary"] == "limit" and job["members"] == [2079] and 2000 < job["root"] < 2079


def test_monitors_zombies_ghosts_and_reused_pids_belong_to_no_job(tree):
    tree.add(2100, 1, "nv-hostengine", ["nv-hostengine"])
    tree.add(2101, 1, "python", ["python", "bench.py"], state="Z")
    tree.add(2102, 1, "python", ["python", "new.py"], start=99)  # the listed process was another
    records = [
        gpu_proc(2100, [], kind="monitor"),
        gpu_proc(2101, [], kind="zombie", state="Z"),
        {**gpu_proc(2103, [0], kind="ghost"), "start_time": None},
        gpu_proc(2102, [1]),  # start_time 21020 in the record, 99 in /proc
    ]
    jobs, job_of, omitted = jobs_of(tree, records)
    assert jobs == {} and job_of == {} and omitted == 0


def test_jobs_are_sorted_by_memory_and_bounded(tree):
    count = MAX_JOBS + 6
    for i in range(count):
        tree.add(3000 + i, 1, "python", ["python", f"run{i}.py"])
    records = [gpu_proc(3000 + i, [i % 8], (i + 1) * GiB) for i in range(count)]
    jobs, job_of, omitted = tree.finder().compute(records)
    assert len(jobs) == MAX_JOBS and omitted == 6 and len(job_of) == count
    assert [j["memory"] for j in jobs] == sorted((j["memory"] for j in jobs), reverse=True)
    assert jobs[0]["root"] == 3000 + count - 1

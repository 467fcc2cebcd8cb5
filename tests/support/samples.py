"""Hand-made samples as the app decodes them (Sample.from_wire over wire records): every kind of
process at once on four GPUs, and a torchrun-like job below a login shell. The planners' tests and
the audit log's read these, and so do the writers the audit log's tests run in a subprocess."""

from __future__ import annotations

from typing import Any

from gputui.model import Sample

GiB = 1 << 30


def proc(pid: int, kind: str, **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "pid": pid,
        "start_time": 1000 + pid,
        "name": "python",
        "command": ["python", f"job{pid}.py"],
        "user": "alice",
        "uid": 1000,
        "state": "S",
        "ppid": 1,
        "pgid": pid,
        "sid": pid,
        "holds": ["/dev/nvidia0", "/dev/nvidiactl"],
        "gpu_memory": {},
        "gpus": [],
        "kind": kind,
        "reason": None,
        "links": [],
        "protected": None,
    }
    record.update(fields)
    return record


def gpu(index: int, used: int) -> dict[str, Any]:
    return {
        "index": index,
        "uuid": f"GPU-{index:08d}-aaaa-bbbb-cccc-dddddddddddd",
        "memory_total": 140 * GiB,
        "memory_used": used,
        "memory_baseline": 0,
    }


def sample(unreadable: int = 0, extra: list[dict[str, Any]] | None = None) -> Sample:
    """Every kind at once: GPU 0 alice + her loader, GPU 1-2 bob (state D), GPU 3 a ghost."""
    processes = [
        proc(100, "user", gpus=[0], gpu_memory={"0": 10 * GiB}),
        proc(108, "hidden", gpus=[0], reason="pgid", links=[100], pgid=100, ppid=100),
        proc(106, "zombie", reason="parent 100", links=[100], ppid=100, pgid=100, state="Z", holds=[]),
        proc(101, "user", gpus=[1, 2], gpu_memory={"1": 20 * GiB, "2": 20 * GiB}, user="bob", uid=1001, state="D"),
        proc(102, "ghost", gpus=[3], gpu_memory={"3": 8 * GiB}, reason="dead", links=[103], start_time=None,
             name=None, command=[], user=None, uid=None, state=None),
        proc(103, "hidden", gpus=[3], reason="pgid", links=[102], pgid=102),
        proc(104, "hidden", reason="unattributed", user="carol", uid=1002),
        proc(105, "monitor", name="nv-hostengine", reason="known-monitor", protected="monitor"),
        proc(107, "monitor", name="python", reason="self", protected="probe"),
        proc(109, "monitor", name="Xorg", gpus=[2], gpu_memory={"2": GiB}, reason="known-monitor",
             protected="monitor"),
        proc(110, "zombie", reason="parent 50", links=[50], ppid=50, pgid=50, sid=50, state="Z", holds=[]),
    ]  # fmt: skip
    processes += extra or []
    return Sample.from_wire(
        {
            "seq": 7,
            "time": 1.0,
            "gpus": [gpu(0, 10 * GiB), gpu(1, 20 * GiB), gpu(2, 21 * GiB), gpu(3, 8 * GiB)],
            "processes": processes,
            "scan": {"full": True, "age": 0.0, "unreadable": unreadable},
        }
    )


def job(root: int, members: list[int], processes: list[int], **fields: Any) -> dict[str, Any]:
    record = {
        "id": str(root),
        "root": root,
        "root_start": 1000 + root,
        "name": "torchrun",
        "command": ["torchrun", "--nproc-per-node", "2", "train.py"],
        "user": "alice",
        "uid": 1000,
        "state": "S",
        "ppid": 10,
        "boundary": "shell",
        "members": members,
        "processes": [[p, 1000 + p] for p in processes],
        "gpus": [0, 1],
        "memory": 2 * GiB,
    }
    record.update(fields)
    return record


def parent(pid: int, ppid: int, name: str, command: list[str]) -> dict[str, Any]:
    return {
        "pid": pid,
        "start_time": 1000 + pid,
        "ppid": ppid,
        "name": name,
        "command": command,
        "user": "alice",
    }


def launcher_sample(**root_fields: Any) -> Sample:
    """bash (10, interactive) -> torchrun (200, no GPU) -> agent (201) -> ranks 300 (GPU 0), 301 (GPU 1);
    rank 300's data-loader child 302 holds GPU 0; a job of bob's (400) on GPU 2."""
    processes = [
        proc(300, "user", gpus=[0], gpu_memory={"0": GiB}, ppid=201, job="200"),
        proc(301, "user", gpus=[1], gpu_memory={"1": GiB}, ppid=201, job="200"),
        proc(302, "hidden", gpus=[0], reason="ancestor", links=[300], ppid=300, job="200"),
        proc(400, "user", gpus=[2], gpu_memory={"2": GiB}, ppid=10, user="bob", uid=1001, job="400"),
    ]
    parents = [
        parent(201, 200, "python", ["python", "-m", "torch.distributed.elastic.agent"]),
        parent(200, 10, "torchrun", ["torchrun", "--nproc-per-node", "2", "train.py"]),
        parent(10, 5, "bash", ["bash"]),
        parent(5, 1, "sshd", ["sshd: alice@pts/0"]),
    ]
    jobs = [
        job(200, [300, 301, 302], [200, 201, 300, 301, 302], **root_fields),
        job(400, [400], [400], name="python", command=["python", "eval.py"], user="bob", gpus=[2]),
    ]
    return Sample.from_wire(
        {
            "seq": 1,
            "time": 1.0,
            "gpus": [gpu(0, GiB), gpu(1, GiB), gpu(2, GiB)],
            "processes": processes,
            "parents": parents,
            "jobs": jobs,
            "scan": {"full": True, "age": 0.0, "unreadable": 0},
        }
    )

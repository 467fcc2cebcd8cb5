"""Issue 18 on a real GPU: what a container sees of a job of another PID namespace.

A CUDA job runs in this (the parent) PID namespace; a probe runs in a new one (`unshare --pid
--fork --mount-proc`, as an LXC guest or a Docker container is to the host). Whatever NVML shows in
there, the job's memory is never called orphaned (a reset would free it): it is `outside` (listed
for nobody) or a container's (listed for a PID of another namespace). A reset from in there is only
ever asked as a dry run here: nothing changes a GPU setting or resets it.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from gputui.probe.accounting import UNACCOUNTED

GiB = 1 << 30
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

INSIDE = r"""
import json, sys
from gputui.probe.core import Probe
from gputui.probe.readers.nvml import NvmlReader
from gputui.probe.run.reset import execute
probe = Probe(NvmlReader(), hostname="in-a-namespace")
hello = probe.start()
sample = probe.sample(full=True)
events = []
execute(probe, {"type": "reset", "v": 1, "id": "r1", "gpu": 0, "dry_run": True}, events.append)
print(json.dumps({"hello": hello, "sample": sample, "events": events}))
probe.close()
"""


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
    return done.returncode == 0


@pytest.mark.skipif(not _can_unshare(), reason="needs unshare --pid (root or user namespaces)")
def test_a_job_of_the_parent_namespace_is_never_orphaned_from_inside(cuda_job):
    job = cuda_job(gib=2.0, gpu=0)
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", INSIDE],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", "")),
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["hello"]["host"]["host_pid_namespace"] is False
    gpu = next(g for g in doc["sample"]["gpus"] if g["index"] == 0)
    books = gpu["accounting"]
    listed = [p for p in doc["sample"]["processes"] if p["pid"] == job.pid]
    reset = doc["events"][-1]
    print(
        "inside: job listed as",
        [(p["kind"], p["reason"]) for p in listed] or "nothing",
        "| accounting",
        {k: books[k] for k in UNACCOUNTED if books.get(k)},
        "| reset dry run:",
        reset["result"],
        [b["kind"] for b in reset["data"].get("blockers", [])],
    )
    assert books["orphaned"] == 0, books
    assert books.get("outside", 0) + books["container"] >= 2 * GiB, books
    # A reset from in there would be refused: the dry run names another namespace's memory (or its
    # listed process) as a blocker, so no reset is offered.
    assert reset["stage"] == "done" and reset["result"] == "dry-run", reset
    kinds = {b["kind"] for b in reset["data"]["blockers"]}
    assert kinds & {"outside", "container", "holder", "process"}, reset

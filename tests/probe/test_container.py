"""A probe inside a container (its own PID namespace) beside GPU users it cannot see.

NVML reports the host's PIDs; in the probe's /proc they do not exist. That memory is not orphaned
and its owners are not dead: it is held by processes of another PID namespace. The test runs a real
probe in a real new PID namespace (`unshare --pid --fork --mount-proc`, root only; skipped where
the kernel or the user cannot) over the same sim driver as a job started outside it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from gputui.model import Sample
from gputui.probe.accounting import UNACCOUNTED
from gputui.probe.readers.sim import GiB, SimReader
from gputui.views.readiness import Conditions, unready

INSIDE = r"""
import json, sys
from gputui.probe.core import Probe
from gputui.probe.readers.sim import SimReader
reader = SimReader(attach=True, base_dir=sys.argv[1])
probe = Probe(reader, hostname="in-a-container")
hello = probe.start()
sample = probe.sample(full=True)
print(json.dumps({"hello": hello, "sample": sample}))
probe.close()
"""


def can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, timeout=30
    )
    return done.returncode == 0


pytestmark = pytest.mark.skipif(not can_unshare(), reason="needs unshare --pid (root or user namespaces)")


@pytest.fixture
def host_sim() -> Iterator[SimReader]:
    reader = SimReader(gpus=2, scenario="empty")
    reader.open()
    try:
        yield reader
    finally:
        reader.close()


def test_memory_of_another_pid_namespace_is_accounted_as_a_containers_not_orphaned(host_sim):
    job = host_sim.spawn("busy", gpu=1, memory=6 * GiB)
    base = host_sim.device_prefix[: -len("/dev/nvidia")]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", INSIDE, base],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=os.path.dirname(root),
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["hello"]["host"]["host_pid_namespace"] is False
    records = {p["pid"]: p for p in doc["sample"]["processes"]}
    # The job is invisible in here; NVML still lists its host PID.
    assert records[job.pid]["kind"] == "ghost" and records[job.pid]["reason"] == "other-namespace"
    gpu = next(g for g in doc["sample"]["gpus"] if g["index"] == 1)
    books = gpu["accounting"]
    assert books["container"] == 6 * GiB and books["orphaned"] == 0
    assert sum(books[k] for k in UNACCOUNTED) == 6 * GiB
    # What `gputui wait` and a clean's verdict say about that GPU: another namespace holds it.
    sample = Sample.from_wire(doc["sample"])
    [why] = [u for u in unready(sample.gpus[1], sample, Conditions()) if u.condition == "unaccounted"]
    assert "another PID namespace" in why.words, why.words
    # And the GPU without a job is ready, container or not.
    assert unready(sample.gpus[0], sample, Conditions()) == []


INSIDE_RESET = r"""
import json, sys
from gputui.probe.core import Probe
from gputui.probe.readers.sim import SimReader
from gputui.probe.run.reset import execute
reader = SimReader(attach=True, base_dir=sys.argv[1])
probe = Probe(reader, hostname="in-a-container")
hello = probe.start()
sample = probe.sample(full=True)
events = []
execute(probe, {"type": "reset", "v": 1, "id": "r1", "gpu": 1, "dry_run": False}, events.append)
print(json.dumps({"hello": hello, "sample": sample, "events": events}))
probe.close()
"""


def test_memory_nobody_here_holds_seen_from_a_container_is_outside_not_orphaned(host_sim):
    """Issue 18, defect 3: from inside a container NVML lists nothing of another namespace's job.
    Memory listed for nobody that no process here holds is not orphaned (a reset would free it): it
    may be another guest's or the host's. The words say so, and a reset from inside is refused."""
    host_sim.set_state(1, orphaned=int(4.6 * GiB), persistence=False)  # used, listed for nobody
    base = host_sim.device_prefix[: -len("/dev/nvidia")]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", INSIDE_RESET, base],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=os.path.dirname(root),
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["hello"]["host"]["host_pid_namespace"] is False
    gpu = next(g for g in doc["sample"]["gpus"] if g["index"] == 1)
    books = gpu["accounting"]
    assert books["orphaned"] == 0, books
    assert books["outside"] == int(4.6 * GiB), books
    sample = Sample.from_wire(doc["sample"])
    [why] = [u for u in unready(sample.gpus[1], sample, Conditions()) if u.condition == "unaccounted"]
    assert "used outside this container" in why.words and "orphaned" not in why.words, why.words
    assert "reset" not in why.words
    # The reset is refused with that reason, and the sim's GPU was never reset.
    done_event = doc["events"][-1]
    assert done_event["stage"] == "done" and done_event["result"] == "refused", done_event
    blockers = [b for b in done_event["data"]["blockers"] if b["kind"] == "outside"]
    assert blockers and "used outside this container" in blockers[0]["words"], done_event
    assert host_sim.resets == []

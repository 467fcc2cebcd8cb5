"""What a sim job reports to its reader cannot get a process outside the sim signalled (issue 17).

The sim's jobs tell the reader their PIDs (and their children's, their workers') over a status
channel that every job inherits, even a job run as another user. A job that writes there a report
naming a process that is not the sim's (root's `sleep` that the test started, with its right start
time: anyone can read /proc/PID/stat) must not get it killed when the sim closes, nor signalled
through its SimJob, nor listed as a GPU user. The forger is a real job run as `nobody`: the sim's
own worker program with a few forged reports written first, and its own ready report lying about
its child and workers. Processes are started and ended by the test (or by the sim, which the
fixture closes).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.probe.readers.sim import GiB, SimJob, SimReader, start_time
from gputui.probe.readers.sim.worker import WORKER_SOURCE

NOBODY = 65534
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="running a job as another user needs root")
MAIN_GUARD = 'if __name__ == "__main__":\n    main()\n'

# Run before the worker's main(): argv is VICTIM_PID VICTIM_START OTHER_SERIAL.
FORGERY = r"""
VICTIM = {"pid": int(sys.argv[1]), "start_time": int(sys.argv[2])}
LIES = {"child_pid": VICTIM["pid"], "child_start_time": VICTIM["start_time"],
        "workers": [[VICTIM["pid"], VICTIM["start_time"]]]}
_own = json.loads(os.environ["GPUTUI_SIM_JOB"])["serial"]
_status = int(os.environ["GPUTUI_SIM_FDS"].split(",")[1])
sys.stderr.write("forging\n")  # first: a forged ready taken at once ends spawn() (before the fix)
sys.stderr.flush()
for _serial in (_own, int(sys.argv[3]), 0):
    for _event in ("spawned", "ready"):
        _forged = dict(VICTIM, serial=_serial, event=_event, **LIES)
        os.write(_status, (json.dumps(_forged) + "\n").encode())
_report = report


def report(status, message):
    if message.get("event") == "ready":
        message.update(LIES)  # its own ready report: its pid is its own, its child and workers not
    _report(status, message)


main()
"""


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """root's (the test's) own process, no child of the sim: started and ended here."""
    proc = subprocess.Popen(["sleep", "300"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def spawn_forger(sim: SimReader, victim: subprocess.Popen[bytes], other: SimJob) -> SimJob:
    """A `nobody` job that writes forged reports naming `victim` before reporting ready itself."""
    assert WORKER_SOURCE.endswith(MAIN_GUARD)
    source = WORKER_SOURCE[: -len(MAIN_GUARD)] + FORGERY
    Path(sim.directory, "bin", "forger.py").write_text(source)
    started = start_time(victim.pid)
    argv = [str(victim.pid), str(started), str(other.serial)]
    job = sim.spawn("idle", gpu=0, memory=GiB, name="forger.py", argv=argv, user=NOBODY)
    assert "forging" in Path(job.log).read_text(), "the forger did not run"
    return job


def victim_alive(victim: subprocess.Popen[bytes], started: int | None) -> bool:
    return victim.poll() is None and start_time(victim.pid) == started


@ROOT_ONLY
def test_closing_the_sim_does_not_kill_a_process_a_job_reported_falsely(make_sim, victim):
    """The previous engineer's case: closing the sim SIGKILLed every PID reported on the status
    channel whose start time matched, whoever reported it."""
    sim = make_sim(gpus=1)
    other = sim.spawn("idle", gpu=0, memory=GiB)  # root's job, whose serial the forger uses too
    started = start_time(victim.pid)
    spawn_forger(sim, victim, other)
    sim.close()
    assert victim_alive(victim, started), "closing the sim killed a process that is not the sim's"


@ROOT_ONLY
def test_a_jobs_reports_bind_only_its_own_pid_and_signal_only_the_sims_processes(make_sim, victim):
    """A report is taken only from the process it is about (the session for "spawned", the job for
    its ready report, with its own PID); what a job says of its children is its word only: the
    reader never signals nor lists a process that is not below the sim's session."""
    sim = make_sim(gpus=1)
    other = sim.spawn("idle", gpu=0, memory=GiB)
    other_pid, other_start = other.pid, other.start_time
    started = start_time(victim.pid)
    job = spawn_forger(sim, victim, other)
    assert job.pid is not None and job.pid != victim.pid
    assert os.stat(f"/proc/{job.pid}").st_uid == NOBODY and start_time(job.pid) == job.start_time
    assert (other.pid, other.start_time) == (other_pid, other_start)
    assert len(sim.refused_reports) == 6, sim.refused_reports  # every forged one, each with why
    assert job.child_pid == victim.pid  # its own (lying) word is kept, and is harmless:
    assert not job.signal(signal.SIGKILL, child=True)
    assert victim_alive(victim, started)
    listed = sim.read()[1]
    assert victim.pid not in listed and set(listed) == {other.pid, job.pid}
    # The sim's own processes are still signalled: the job itself.
    assert job.signal(signal.SIGKILL)
    assert sim.wait_released(job.pid, 10.0)
    sim.close()
    assert victim_alive(victim, started)

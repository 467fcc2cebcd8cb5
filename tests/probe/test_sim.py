"""The simulated GPU backend against docs/GPU_FACTS.md, with real processes.

Every test closes its sims (fixture) and checks that every process they started is gone. Tests signal
only processes the sim started for them, by PID, checked against their start time.
"""

import fcntl
import json
import os
import pwd
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gputui.probe.readers.base import ReaderError
from gputui.probe.readers.sim import (
    MEMORY_RESERVED,
    MEMORY_TOTAL,
    ROLES,
    GiB,
    SimError,
    SimReader,
    create_context,
    open_devices,
    start_time,
)
from tests.support.pythons import PYTHON38
from tests.support.simprobe import all_processes, fd_links
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
GPU_FIELDS = {
    "index", "minor", "uuid", "pci_bus_id", "name", "memory_total", "memory_used", "memory_reserved", "memory_version",
    "util_gpu", "util_mem", "temperature", "power_draw", "power_limit", "persistence", "error",
    "mig_instances", "topology",
}  # fmt: skip
# GPU_FACTS: 0.10 to 0.18 s from exit to release. Only the lower bound is checked (a busy machine
# can delay the poll that sees the release by any time, never make it come earlier).
RELEASE_MIN = 0.09


# -- helpers ------------------------------------------------------------------------------------


def stat(pid):
    """state, ppid, pgid, sid from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        raw = f.read()
    fields = raw[raw.rindex(b")") + 2 :].split()
    return {
        "state": fields[0].decode(),
        "ppid": int(fields[1]),
        "pgid": int(fields[2]),
        "sid": int(fields[3]),
    }


def comm(pid):
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


def alive(pid, started):
    return start_time(pid) == started and stat(pid)["state"] != "Z"


def measure_release(reader, pid, started, send, listed_pid=None):
    """Run `send()` (a signal), then poll every 2 ms until the process has exited and `pid` has left
    NVML's listing (`listed_pid`: for a ghost, the dead parent NVML names). Returns (seconds from
    the signal to the release as seen here, the GPUs at release). The process exits after the
    signal and the sim releases its memory RELEASE_DELAY after it saw the exit, so the time is at
    least the shortest delay, however late this poll or the sim's watcher comes: load only adds."""
    listed_pid = pid if listed_pid is None else listed_pid
    sent = time.monotonic()
    send()
    exited = released = None
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        now = time.monotonic()
        if exited is None and (start_time(pid) != started or not fd_links(pid)):
            exited = now
        gpus, listed = reader.read()
        if listed_pid not in listed:
            released = time.monotonic()
            break
        time.sleep(0.002)
    assert exited is not None, "the process never exited"
    assert released is not None, "NVML never stopped listing the process"
    return released - sent, gpus


# -- fixture ------------------------------------------------------------------------------------


# -- tests --------------------------------------------------------------------------------------


def test_open_builds_devices_and_the_reader_holds_them(make_sim):
    reader = make_sim(gpus=2, hostname="sim-x")
    base = Path(reader.directory)
    names = sorted(str(p.relative_to(base / "dev")) for p in (base / "dev").rglob("*") if p.is_file())
    expected = ["nvidia-caps/nvidia-cap1", "nvidia-caps/nvidia-cap2", "nvidia-uvm", "nvidia-uvm-tools"]
    assert names == sorted([*expected, "nvidia0", "nvidia1", "nvidiactl"])
    assert all(path.startswith(reader.device_prefix) for path in reader.device_paths)
    assert reader.device_prefix == str(base / "dev" / "nvidia")
    # Like every NVML client, the reader (this process) holds every device file.
    assert set(reader.device_paths) <= fd_links(os.getpid())

    gpus, listed = reader.read()
    assert listed == {}
    assert [g["index"] for g in gpus] == [0, 1]
    for gpu in gpus:
        assert set(gpu) == GPU_FIELDS
        assert gpu["minor"] == gpu["index"]
        assert gpu["uuid"].startswith("GPU-") and len(gpu["uuid"]) == 40
        assert gpu["memory_total"] == MEMORY_TOTAL and gpu["memory_reserved"] == MEMORY_RESERVED
        assert (gpu["memory_used"], gpu["util_gpu"], gpu["memory_version"]) == (0, 0, 2)
        assert gpu["persistence"] is True and gpu["error"] is None and gpu["power_limit"] == 700.0
    assert gpus[0]["uuid"] != gpus[1]["uuid"]


def test_open_returns_host_facts():
    reader = SimReader(gpus=1, scenario="empty", hostname="sim-x")
    try:
        facts = reader.open()
    finally:
        reader.close()
    assert facts == {
        "driver_version": "580.159.04-sim",
        "nvml_version": "13.580.159.04-sim",
        "cuda_driver_version": 13000,
        "hostname": "sim-x",
    }
    with pytest.raises(ReaderError):
        reader.read()


def test_every_job_holds_every_device_file(make_sim):
    reader = make_sim(gpus=2)
    jobs = {role: reader.spawn(role, gpu=1, memory=GiB) for role in ROLES}
    devices = set(reader.device_paths)
    # A launcher, a supervisor (their children hold them) and another guest's job hold none here.
    none = ("launcher", "supervisor", "neighbour")
    holders = [job.pid for role, job in jobs.items() if role not in ("ghost", *none)] + [
        jobs["ghost"].child_pid
    ]
    holders += [pid for role in ("launcher", "supervisor") for pid, _ in jobs[role].workers]
    for pid in holders:
        assert devices <= fd_links(pid), f"pid {pid} does not hold every device file"
    for role in none:
        assert not devices & fd_links(jobs[role].pid), f"the {role} holds a device file"
    # CUDA-like processes also map the device files; NVML clients (the monitor) do not.
    with open(f"/proc/{jobs['busy'].pid}/maps") as f:
        assert reader.device_prefix + "0" in f.read()
    with open(f"/proc/{jobs['monitor'].pid}/maps") as f:
        assert reader.device_prefix not in f.read()
    assert comm(jobs["monitor"].pid) == "nv-hostengine"
    assert fd_links(jobs["zombie"].child_pid) == set()  # a zombie holds nothing
    # Command lines look like jobs: python -S <sim>/bin/<name>.py ...
    with open(f"/proc/{jobs['busy'].pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")[:-1]
    assert argv[1:] == [b"-S", os.path.join(reader.directory, "bin", "train.py").encode()]


def test_memory_shows_on_the_right_gpu_and_in_the_listing(make_sim):
    reader = make_sim(gpus=4)
    busy = reader.spawn("busy", gpu=1, memory=3 * GiB, util=90, name="train.py", argv=["--model", "x"])
    idle = reader.spawn("idle", gpu=[0, 2], memory=2 * GiB)
    gpus, listed = reader.read()
    assert listed == {busy.pid: {1: 3 * GiB}, idle.pid: {0: 2 * GiB, 2: 2 * GiB}}
    assert [g["memory_used"] for g in gpus] == [2 * GiB, 3 * GiB, 2 * GiB, 0]
    assert 87 <= gpus[1]["util_gpu"] <= 93
    assert gpus[1]["power_draw"] > gpus[3]["power_draw"] and gpus[1]["temperature"] > gpus[3]["temperature"]
    assert [gpus[i]["util_gpu"] for i in (0, 2, 3)] == [0, 0, 0]
    assert busy.util == 90 and idle.util == 0 and idle.gpus == [0, 2]


def test_sigterm_releases_memory_some_time_after_the_exit(make_sim):
    reader = make_sim(gpus=2)
    job = reader.spawn("idle", gpu=0, memory=9 * GiB)
    delay, gpus = measure_release(reader, job.pid, job.start_time, lambda: os.kill(job.pid, signal.SIGTERM))
    assert delay >= RELEASE_MIN  # not at once: as NVML, some time after the exit
    assert gpus[0]["memory_used"] == 0
    assert wait_until(lambda: start_time(job.pid) != job.start_time, 5.0, step=0.005)  # reaped by the sim


def test_ignore_term_survives_sigterm_and_dies_on_sigkill(make_sim):
    reader = make_sim(gpus=2)
    job = reader.spawn("ignore-term", gpu=1, memory=4 * GiB, util=40)
    os.kill(job.pid, signal.SIGTERM)
    # It keeps running and keeps its memory (checked for 0.3 s, longer than any release).
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:
        assert alive(job.pid, job.start_time)
        assert reader.read()[1] == {job.pid: {1: 4 * GiB}}
        time.sleep(0.01)
    delay, gpus = measure_release(reader, job.pid, job.start_time, lambda: job.signal(signal.SIGKILL))
    assert delay >= RELEASE_MIN  # not at once: as NVML, some time after the exit
    assert gpus[1]["memory_used"] == 0


def test_ghost_dead_parent_listed_while_its_child_holds_the_memory(make_sim):
    reader = make_sim(gpus=2)
    ghost = reader.spawn("ghost", gpu=0, memory=5 * GiB, name="train.py")
    parent, child = ghost.pid, ghost.child_pid
    assert start_time(parent) is None  # the parent is dead and reaped
    gpus, listed = reader.read()
    assert listed == {parent: {0: 5 * GiB}}  # NVML names the dead PID
    assert gpus[0]["memory_used"] == 5 * GiB
    assert alive(child, ghost.child_start_time)
    assert set(reader.device_paths) <= fd_links(child)  # the real holder, listed on no GPU
    info = stat(child)
    assert info["pgid"] == parent and info["sid"] == parent  # the link to the ghost PID
    # Killing the hidden holder frees the memory and the ghost leaves the listing.
    delay, gpus = measure_release(
        reader, child, ghost.child_start_time, lambda: ghost.signal(signal.SIGKILL, child=True), parent
    )
    assert delay >= RELEASE_MIN  # not at once: as NVML, some time after the exit
    assert gpus[0]["memory_used"] == 0 and reader.read()[1] == {}


def test_zombie_holds_nothing_and_names_its_parent(make_sim):
    reader = make_sim(gpus=2)
    job = reader.spawn("zombie", gpu=1, memory=3 * GiB, util=80, name="bench.py")
    zombie = job.child_pid
    info = stat(zombie)
    assert info["state"] == "Z" and info["ppid"] == job.pid
    assert fd_links(zombie) == set()
    gpus, listed = reader.read()
    assert listed == {job.pid: {1: 3 * GiB}}  # the parent's own context; the zombie's is released
    assert gpus[1]["memory_used"] == 3 * GiB
    assert alive(job.pid, job.start_time)


def test_demo_shows_every_kind_at_once(make_sim):
    reader = make_sim(scenario="demo", variant=0, seed=1)  # demo-a: 4 GPUs
    other = make_sim(scenario="demo", variant=1, seed=2)  # demo-b: 8 GPUs
    # Between its two hosts, every role but MPS's and the neighbour's (the "mps" and "neighbour"
    # scenarios' own); each host every kind of process.
    own = {"mps-control", "mps-server", "mps-client", "neighbour"}
    assert sorted({job.role for sim in (reader, other) for job in sim.jobs}) == sorted(set(ROLES) - own)
    for sim in (reader, other):
        gpus, listed = sim.read()
        by_role = {job.role: job for job in sim.jobs}
        ghost, zombie = by_role["ghost"], by_role["zombie"]
        assert ghost.pid in listed and start_time(ghost.pid) is None
        assert stat(ghost.child_pid)["sid"] == ghost.pid and ghost.child_pid not in listed
        assert stat(zombie.child_pid)["state"] == "Z" and zombie.child_pid not in listed
        for role in ("busy", "idle", "ignore-term", "zombie"):
            assert by_role[role].pid in listed, role
        for role in ("hidden", "monitor"):
            assert by_role[role].pid not in listed
            assert set(sim.device_paths) <= fd_links(by_role[role].pid)
        hidden = stat(by_role["hidden"].pid)
        assert hidden["sid"] == hidden["pgid"] == by_role["hidden"].pid  # unattributed: its own session
        assert comm(by_role["monitor"].pid) == "nv-hostengine"
        assert any(g["util_gpu"] >= 85 for g in gpus)
        for gpu in gpus:
            on_gpu = sum(per_gpu.get(gpu["index"], 0) for per_gpu in listed.values())
            assert gpu["memory_used"] == on_gpu <= gpu["memory_total"]
    first, second = reader.read()[0], other.read()[0]
    assert (len(first), len(second)) == (4, 8)
    # Variant 1 leaves GPU 3 free (the live demo's benchmark comes and goes there) and 4-7 to pick.
    assert [g["index"] for g in second if g["memory_used"] == 0 and g["util_gpu"] == 0] == [3, 4, 5, 6, 7]
    assert {g["uuid"] for g in first}.isdisjoint(g["uuid"] for g in second)


def test_readings_are_reproducible_from_the_seed(make_sim):
    one = make_sim(gpus=2, seed=7)
    two = make_sim(gpus=2, seed=7)
    three = make_sim(gpus=2, seed=8)
    holders = []
    for sim in (one, two, three):  # contexts made by this very process: any process can allocate
        holders += [*open_devices(sim.directory), create_context(sim.directory, 1, GiB, util=60)]
    try:
        readings = [[sim.read()[0] for _ in range(20)] for sim in (one, two, three)]
    finally:
        for fd in holders:
            os.close(fd)
    assert readings[0] == readings[1]
    assert [g["uuid"] for g in readings[0][0]] != [g["uuid"] for g in readings[2][0]]
    utils = {reading[1]["util_gpu"] for reading in readings[0]}
    assert len(utils) > 1 and all(55 <= u <= 65 for u in utils)  # jitter, small
    assert all(reading[0]["util_gpu"] == 0 for reading in readings[0])
    for sim in (one, two, three):  # closing the fds released the memory
        assert sim.wait_released(os.getpid(), timeout=2.0)


def test_an_attached_reader_sees_the_same_driver(make_sim):
    owner = make_sim(gpus=2)
    job = owner.spawn("idle", gpu=1, memory=2 * GiB)
    watcher = SimReader(attach=True, base_dir=owner.directory)
    try:
        watcher.open()
        assert watcher.device_prefix == owner.device_prefix and watcher.gpus == 2
        assert watcher.read()[1] == owner.read()[1] == {job.pid: {1: 2 * GiB}}
        assert [g["uuid"] for g in watcher.read()[0]] == [g["uuid"] for g in owner.read()[0]]
        with pytest.raises(SimError):
            watcher.spawn("idle")
        sent = time.monotonic()
        os.kill(job.pid, signal.SIGTERM)
        released = {}
        deadline = time.monotonic() + 30.0
        while len(released) < 2 and time.monotonic() < deadline:
            for name, sim in (("owner", owner), ("watcher", watcher)):
                if name not in released and job.pid not in sim.read()[1]:
                    released[name] = time.monotonic()
            time.sleep(0.002)
        # Both release it, each after the same seeded delay from the exit (never at once).
        assert set(released) == {"owner", "watcher"}
        assert min(released.values()) - sent >= RELEASE_MIN
    finally:
        watcher.close()
    assert os.path.isdir(owner.directory)  # an attached reader never removes the sim


def test_pipes_numbered_over_1024_work(make_sim):
    """The sim's pipes keep the owner's fd numbers in every job: a busy owner gets high ones,
    which select() could not watch."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1400:
        if hard != resource.RLIM_INFINITY and hard < 1400:
            pytest.skip("the fd limit is too low")
        resource.setrlimit(resource.RLIMIT_NOFILE, (1400, hard))
    fillers = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        reader = make_sim(gpus=1)
        job = reader.spawn("idle", gpu=0, memory=GiB)
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert reader._session.lifeline_w > 1024  # white-box: the case under test really happened
    assert reader.read()[1] == {job.pid: {0: GiB}}
    delay, _ = measure_release(reader, job.pid, job.start_time, lambda: os.kill(job.pid, signal.SIGKILL))
    assert delay >= RELEASE_MIN  # not at once: as NVML, some time after the exit


def test_attach_to_nothing_is_a_reader_error(tmp_path):
    with pytest.raises(ReaderError) as err:
        SimReader(attach=True, base_dir=str(tmp_path)).open()
    assert err.value.code == "no-gpu"
    with pytest.raises(ValueError):
        SimReader(scenario="nope")


def test_a_stopped_job_holds_its_memory_in_state_t_until_sigterm_and_sigcont_end_it(make_sim):
    reader = make_sim(gpus=2)
    job = reader.spawn("stopped", gpu=1, memory=8 * GiB, name="sweep.py")
    assert wait_until(lambda: stat(job.pid)["state"] == "T", 10.0, step=0.01)  # Ctrl+Z: stopped
    assert reader.read()[1] == {job.pid: {1: 8 * GiB}}
    assert job.signal(signal.SIGTERM)  # pending while stopped: what a kill plan's SIGCONT is for
    assert stat(job.pid)["state"] == "T" and reader.read()[1] == {job.pid: {1: 8 * GiB}}
    _, gpus = measure_release(reader, job.pid, job.start_time, lambda: job.signal(signal.SIGCONT))
    assert gpus[1]["memory_used"] == 0


def test_a_stopped_job_ends_with_its_sim(make_sim):
    reader = make_sim(gpus=1)
    job = reader.spawn("stopped", gpu=0, memory=GiB)
    assert wait_until(lambda: stat(job.pid)["state"] == "T", 10.0, step=0.01)
    reader.close()  # make_sim checks that nothing of the sim is left
    assert not alive(job.pid, job.start_time)


def test_spawn_rejects_bad_requests(make_sim):
    reader = make_sim(gpus=2)
    with pytest.raises(ValueError):
        reader.spawn("sleepy")
    with pytest.raises(ValueError):
        reader.spawn("idle", gpu=2)
    with pytest.raises(ValueError):
        reader.spawn("idle", name="../evil.py")
    for role, restart in (("launcher", 5.0), ("supervisor", 0), ("supervisor", -1.0)):
        with pytest.raises(ValueError, match="restart_s"):
            reader.spawn(role, gpu=0, child={"name": "w.py", "restart_s": restart})


def test_busy_jobs_burn_only_a_little_cpu(make_sim):
    reader = make_sim(gpus=1)
    job = reader.spawn("busy", gpu=0, util=99)

    def cpu_ticks():
        with open(f"/proc/{job.pid}/stat", "rb") as f:
            raw = f.read()
        fields = raw[raw.rindex(b")") + 2 :].split()
        return int(fields[11]) + int(fields[12])  # utime + stime

    before, started = cpu_ticks(), time.monotonic()
    time.sleep(1.0)
    share = (cpu_ticks() - before) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - started)
    assert share < 0.15


@pytest.mark.skipif(os.geteuid() != 0, reason="running a job as another user needs root")
def test_a_job_can_run_as_another_user(make_sim):
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody'")
    reader = make_sim(gpus=2)
    job = reader.spawn("idle", gpu=0, memory=GiB, user="nobody")
    with open(f"/proc/{job.pid}/status") as f:
        uids = next(line.split()[1:] for line in f if line.startswith("Uid:"))
    assert uids == [str(nobody.pw_uid)] * 4 and job.uid == nobody.pw_uid
    assert set(reader.device_paths) <= fd_links(job.pid)
    assert reader.read()[1] == {job.pid: {0: GiB}}
    delay, _ = measure_release(reader, job.pid, job.start_time, lambda: os.kill(job.pid, signal.SIGTERM))
    assert delay >= RELEASE_MIN  # not at once: as NVML, some time after the exit


def test_close_leaves_no_process_and_no_directory():
    reader = SimReader(gpus=4, scenario="demo")
    reader.open()
    reader.test_session_start = start_time(reader.session_pid)
    processes = all_processes(reader)
    # demo-a's session and jobs, a launcher's ranks and a ghost's child included
    assert len(processes) == 14 and all(started is not None for _, started in processes)
    reader.close()
    assert [pid for pid, started in processes if start_time(pid) == started] == []
    assert not os.path.exists(reader.directory)
    reader.close()  # twice is fine


# The reader's owner, SIGKILLed by the test. It runs under a wrapper that is a child subreaper, so
# that the sim's session process, orphaned by the kill, is reaped (PID 1 of some containers never
# reaps); the jobs go because their lifeline breaks, whoever reaps them.
OWNER = textwrap.dedent(
    """
    import json, sys, time
    from gputui.probe.readers.sim import SimReader, start_time
    reader = SimReader(gpus=4, scenario="demo", seed=3)
    reader.open()
    pids = [(reader.session_pid, start_time(reader.session_pid))]
    for job in reader.jobs:
        pids += job.processes()
    print(json.dumps({"dir": reader.directory, "pids": pids}), flush=True)
    time.sleep(300)
    """
)
WRAPPER = textwrap.dedent(
    """
    import ctypes, os, subprocess, sys
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    owner = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
    print(owner.pid, flush=True)
    while True:
        try:
            os.wait()
        except ChildProcessError:
            break
    """
)


def test_sigkill_of_the_owner_leaves_no_job_behind():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    wrapper = subprocess.Popen([sys.executable, "-c", WRAPPER, OWNER], stdout=subprocess.PIPE, env=env)
    try:
        owner = int(wrapper.stdout.readline())
        owner_start = start_time(owner)
        state = json.loads(wrapper.stdout.readline())
        processes = [tuple(p) for p in state["pids"]]
        assert len(processes) == 14  # demo-a's session and jobs, a launcher's ranks, a ghost's child
        session, session_start = processes[0]
        assert start_time(session) == session_start and start_time(owner) == owner_start
        os.kill(owner, signal.SIGKILL)
        assert wait_until(
            lambda: all(start_time(pid) != started for pid, started in processes), 5.0, step=0.005
        )
        assert wait_until(lambda: not os.path.exists(state["dir"]), 5.0, step=0.005)  # the session cleaned up
        assert wrapper.wait(10) == 0
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
            wrapper.wait()
        wrapper.stdout.close()


PY38_SMOKE = textwrap.dedent(
    """
    import json, os, signal, sys
    from gputui.probe.readers.sim import SimReader, start_time
    reader = SimReader(gpus=4, scenario="demo", variant=1)
    reader.open()
    try:
        gpus, listed = reader.read()
        by_role = {job.role: job for job in reader.jobs}
        job = reader.spawn("idle", gpu=3, memory=1 << 30)
        before = reader.read()[1].get(job.pid)
        os.kill(job.pid, signal.SIGTERM)
        released = reader.wait_released(job.pid, 3.0)
        result = {
            "python": sys.version_info[:2],
            "roles": sorted(by_role),
            "ghost_listed": by_role["ghost"].pid in listed,
            "ghost_dead": start_time(by_role["ghost"].pid) is None,
            "before": before,
            "released": released,
            "used": reader.read()[0][3]["memory_used"],
            "interpreter": job.argv[0],
        }
    finally:
        reader.close()
    print(json.dumps(result))
    """
)


@pytest.mark.skipif(not PYTHON38.exists(), reason=f"no Python 3.8 interpreter at {PYTHON38}")
def test_the_sim_runs_under_python_3_8():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run(
        [str(PYTHON38), "-c", PY38_SMOKE], env=env, stdout=subprocess.PIPE, timeout=60, check=True
    ).stdout
    result = json.loads(out)
    assert result["python"] == [3, 8] and result["interpreter"] == str(PYTHON38)
    # demo-b runs every role but MPS's and the neighbour's (their scenarios' own) and demo-a's own.
    own = {"mps-control", "mps-server", "mps-client", "neighbour", "launcher", "stopped"}
    assert result["roles"] == sorted(set(ROLES) - own)
    assert result["ghost_listed"] and result["ghost_dead"]
    assert result["before"] == {"3": GiB} and result["released"] and result["used"] == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="a context file of another user needs root to make")
def test_a_forged_context_cannot_make_another_users_process_a_gpu_user(make_sim):
    """Issue 13 #10: a file of `nobody` naming root's process (with its right start time) made it a
    "GPU user" that a plan then killed. A context is believed only when its file belongs to the user
    of the process it names (and of the directory it is in). More: tests/probe/test_sim_contexts.py."""
    sim = make_sim(gpus=2)
    mine = create_context(sim.directory, 0, 4096)  # where this user's contexts go
    where = Path(os.readlink(f"/proc/self/fd/{mine}")).parent
    os.unlink(os.readlink(f"/proc/self/fd/{mine}"))
    os.close(mine)
    victim = subprocess.Popen(["sleep", "60"])  # root's process, started (and ended) by this test
    held = []
    try:
        record = {"gpu": 1, "pid": victim.pid, "start": start_time(victim.pid), "bytes": GiB, "util": 0}
        for name, owner in (("9nobody", 65534), ("9own", None)):
            path = where / f"1-{victim.pid}-{name}.ctx"
            path.write_text(json.dumps(record))
            if owner is not None:
                os.chown(path, owner, owner)  # made by `nobody`, naming root's process
            held.append(os.open(path, os.O_RDONLY))  # held, as a real context is: the memory stays
            fcntl.flock(held[-1], fcntl.LOCK_SH)
            gpus, listed = sim.read()
            if owner is not None:
                assert victim.pid not in listed and gpus[1]["memory_used"] == 0
                assert "owned by uid 65534" in sim.ignored[f"{where.name}/{path.name}"]
            else:  # the same record in a file of the process's own user is that user's context
                assert listed == {victim.pid: {1: GiB}} and gpus[1]["memory_used"] == GiB
    finally:
        for fd in held:
            os.close(fd)
        victim.kill()
        victim.wait()

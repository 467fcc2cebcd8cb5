"""The sim's context directory is as strict as the real driver (issue 17, #5).

Contexts are files that say "process P holds this much memory on GPU N". A sim's reader believes one
only when nobody but its own user (or a job's user, in its own directory) could have made it, when
it is a small regular file opened without following links or blocking, and when it is bound to the
process it names: same PID, same start time (/proc/PID/stat field 22), same user. Every test plants
real files next to real contexts and reads with the real reader. Processes are started and ended by
the tests (or by the sims, which the fixture closes); nothing else is signalled.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gputui.probe.readers.base import ReaderError
from gputui.probe.readers.sim import GiB, SimReader, create_context, open_devices, start_time

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="files of another user need root to make")


# -- helpers ------------------------------------------------------------------------------------


def context_of(sim: SimReader, gpu: int, pid: int) -> Path:
    """The file of `pid`'s context on `gpu`, wherever the sim keeps it (found, not assumed)."""
    found = sorted((Path(sim.directory) / "ctx").rglob(f"{gpu}-{pid}-*.ctx"))
    assert len(found) == 1, found
    return found[0]


def own_context_dir(sim: SimReader) -> Path:
    """Where this process's contexts go: the directory of one it makes (then removes unread)."""
    fds = open_devices(sim.directory)
    fd = create_context(sim.directory, 0, 4096)
    try:
        path = Path(os.readlink(f"/proc/self/fd/{fd}"))
        os.unlink(path)
    finally:
        for held in [*fds, fd]:
            os.close(held)
    return path.parent


def plant(path: Path, record: dict[str, Any], owner: int | None = None) -> int:
    """Write a context file and hold it as a real context is held (flock LOCK_SH), so that its
    memory stays; returns the fd to close."""
    path.write_text(json.dumps(record))
    if owner is not None:
        os.chown(path, owner, owner)
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """root's (the test's) own process, that no context of its own names: started and ended here."""
    proc = subprocess.Popen(["sleep", "300"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def read_attached(directory: str, timeout: float = 120.0) -> dict[str, Any]:
    """One read by a reader attached to the sim in a child process whose memory is capped at 2 GiB
    (a reader that reads without a bound dies there, not on this machine); it is ended if it blocks."""
    code = textwrap.dedent(
        """
        import json, resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        from gputui.probe.readers.sim import SimReader
        reader = SimReader(attach=True, base_dir=sys.argv[1])
        reader.open()
        try:
            gpus, listed = reader.read()
        finally:
            reader.close()
        print(json.dumps({"listed": {str(pid): {str(g): b for g, b in on.items()} for pid, on in
                                     listed.items()}, "used": [g["memory_used"] for g in gpus]}))
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    child = subprocess.Popen(
        [sys.executable, "-c", code, directory], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        raise AssertionError("the attached reader blocked") from None
    assert child.returncode == 0, err.decode(errors="replace")[-2000:]
    return json.loads(out)


# -- a context is bound to its process ----------------------------------------------------------


def test_a_context_whose_start_time_is_not_its_process_is_not_believed(make_sim, victim):
    """A context names a PID and the start time of the process that made it: one made by an earlier
    process with that PID (or one that names no start time) is not the process living there now."""
    sim = make_sim(gpus=2)
    where = own_context_dir(sim)
    started = start_time(victim.pid)
    assert started is not None
    record = {"gpu": 1, "pid": victim.pid, "bytes": GiB, "util": 50}
    held = [
        plant(where / f"1-{victim.pid}-1stale.ctx", dict(record, start=started - 1)),
        plant(where / f"1-{victim.pid}-2nostart.ctx", record),
    ]
    try:
        gpus, listed = sim.read()
        assert victim.pid not in listed and gpus[1]["memory_used"] == 0
        reasons = set(sim.ignored.values())
        assert any("start time" in r for r in reasons) and any("no start" in r for r in reasons), reasons
        # The same record with the process's own start time, made by its own user, is its context.
        held.append(plant(where / f"1-{victim.pid}-3own.ctx", dict(record, start=started)))
        gpus, listed = sim.read()
        assert listed == {victim.pid: {1: GiB}} and gpus[1]["memory_used"] == GiB
    finally:
        for fd in held:
            os.close(fd)


def _set_next_pid(pid: int) -> bool:
    try:
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        return True
    except OSError:
        return False


@ROOT_ONLY
def test_a_context_planted_for_a_pid_not_started_yet_never_names_the_process_that_gets_it(make_sim):
    """The issue's case: `nobody` plants a context naming a PID nobody has; root later starts a process
    that gets that PID. The planted file is believed neither before (no such process) nor after."""
    sim = make_sim(gpus=2)
    where = own_context_dir(sim)
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    proc = None
    held: list[int] = []
    try:
        for attempt in range(30):  # another process may take the PID first: try another one
            with open("/proc/sys/kernel/ns_last_pid") as f:
                pid = (int(f.read()) + 500 + 97 * attempt) % (pid_max - 1000) + 300
            if start_time(pid) is not None:
                continue
            guess = (start_time(os.getpid()) or 0) + 1000  # any start time: none is right yet
            record = {"gpu": 1, "pid": pid, "start": guess, "bytes": 8 * GiB, "util": 90}
            for name, owner in (("planted", NOBODY), ("mine", 0)):
                held.append(plant(where / f"1-{pid}-{attempt}{name}.ctx", record, owner))
            gpus, listed = sim.read()
            assert pid not in listed and gpus[1]["memory_used"] == 0  # no such process
            if not _set_next_pid(pid):
                pytest.skip("cannot choose the next PID here (/proc/sys/kernel/ns_last_pid)")
            proc = subprocess.Popen(["sleep", "300"])
            if proc.pid == pid:
                break
            proc.kill()
            proc.wait()
            proc = None
        else:
            pytest.skip("another process took the chosen PID every time")
        gpus, listed = sim.read()
        assert pid not in listed and gpus[1]["memory_used"] == 0
    finally:
        for fd in held:
            os.close(fd)
        if proc is not None:
            proc.kill()
            proc.wait()


# -- files that are not contexts -----------------------------------------------------------------


def test_a_symlink_to_a_jobs_context_does_not_put_the_job_on_another_gpu(sim_probe):
    """A link named for GPU 1 to a job's context on GPU 0: the job is a GPU 1 user neither to the
    reader nor in the probe's sample (so a plan for GPU 1 would not target it)."""
    probe, sim = sim_probe(gpus=2)
    job = sim.spawn("busy", gpu=0, memory=GiB)
    real = context_of(sim, 0, job.pid)
    link = real.parent / f"1-{job.pid}-9linked.ctx"
    os.symlink(real, link)
    gpus, listed = sim.read()
    assert listed == {job.pid: {0: GiB}} and gpus[1]["memory_used"] == 0
    assert "symbolic link" in sim.ignored[f"{link.parent.name}/{link.name}"]
    record = {p["pid"]: p for p in probe.sample(full=True)["processes"]}[job.pid]
    assert record["gpus"] == [0] and record["gpu_memory"] == {"0": GiB}


def test_a_fifo_does_not_stop_the_reader(make_sim):
    """A FIFO named like a context: opening it to read blocks until a writer comes; the reader must
    not wait (a blocked read stops every sample of the probe)."""
    sim = make_sim(gpus=1)
    job = sim.spawn("idle", gpu=0, memory=GiB)
    fifo = context_of(sim, 0, job.pid).parent / f"0-{job.pid}-9fifo.ctx"
    os.mkfifo(fifo)
    result: dict[str, Any] = {}
    reader = threading.Thread(target=lambda: result.update(read=sim.read()), daemon=True)
    reader.start()
    reader.join(30)
    blocked = reader.is_alive()
    if blocked:  # let the old code go: open the FIFO's other end, then close it (EOF)
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError as exc:
            assert exc.errno == errno.ENXIO
        reader.join(30)
    assert not blocked, "the reader blocked opening a FIFO"
    gpus, listed = result["read"]
    assert listed == {job.pid: {0: GiB}} and gpus[0]["memory_used"] == GiB
    assert "not a regular file" in sim.ignored[f"{fifo.parent.name}/{fifo.name}"]


def test_dev_zero_and_a_huge_file_are_not_read_whole(make_sim):
    """A link to /dev/zero and an 8 GiB (sparse) file named like contexts: a reader reads a context
    with a bound, and neither is one (read in a child whose memory is capped: unbounded, it dies)."""
    sim = make_sim(gpus=2)
    job = sim.spawn("idle", gpu=0, memory=GiB)
    where = context_of(sim, 0, job.pid).parent
    os.symlink("/dev/zero", where / f"1-{job.pid}-9zero.ctx")
    huge = where / f"1-{job.pid}-9huge.ctx"
    huge.write_text(json.dumps({"gpu": 1, "pid": job.pid, "start": job.start_time, "bytes": GiB}))
    os.truncate(huge, 8 * GiB)
    result = read_attached(sim.directory)
    assert result["listed"] == {str(job.pid): {"0": GiB}} and result["used"] == [GiB, 0]
    assert sim.read()[1] == {job.pid: {0: GiB}}
    assert "too big" in sim.ignored[f"{where.name}/{huge.name}"]


# -- the directory is private --------------------------------------------------------------------


@ROOT_ONLY
def test_another_user_cannot_write_in_the_context_directory(make_sim):
    """Nobody but the sim's user makes files where its contexts are read (a job of another user
    writes in a directory of its own, see the next test; everyone may read them, as NVML)."""
    sim = make_sim(gpus=1)
    top = Path(sim.directory) / "ctx"
    for where in (top, own_context_dir(sim)):
        info = where.lstat()
        assert info.st_uid == os.geteuid() and info.st_mode & 0o022 == 0, oct(info.st_mode)
        target = where / f"0-{os.getpid()}-9planted.ctx"
        done = subprocess.run(
            ["sh", "-c", 'echo "{}" > "$1"', "sh", str(target)],
            user=NOBODY,
            group=NOBODY,
            extra_groups=[],
            stderr=subprocess.DEVNULL,
            check=False,
        )
        assert done.returncode != 0 and not target.exists(), where


@ROOT_ONLY
def test_a_job_of_another_user_speaks_only_for_that_users_processes(make_sim, victim):
    """A sim job run as `nobody` allocates in its own directory; a file there naming root's process,
    with its right start time, is still not believed: a user's file speaks for that user only."""
    sim = make_sim(gpus=2)
    job = sim.spawn("idle", gpu=0, memory=GiB, user=NOBODY)
    where = context_of(sim, 0, job.pid).parent
    record = {"gpu": 1, "pid": victim.pid, "start": start_time(victim.pid), "bytes": GiB, "util": 0}
    fd = plant(where / f"1-{victim.pid}-9forged.ctx", record, NOBODY)
    try:
        gpus, listed = sim.read()
        assert listed == {job.pid: {0: GiB}} and gpus[1]["memory_used"] == 0
        assert "user" in sim.ignored[f"{where.name}/1-{victim.pid}-9forged.ctx"]
    finally:
        os.close(fd)


def test_attaching_refuses_a_directory_others_can_write_or_a_linked_one(make_sim, tmp_path):
    """An existing sim directory is used only if no one else could have changed it: a real directory
    of the running user (or root) that no one else can write; else one clear error."""
    owner = make_sim(gpus=1)
    ctx = Path(owner.directory) / "ctx"
    mode = ctx.lstat().st_mode & 0o7777
    os.chmod(ctx, 0o1777)
    try:
        with pytest.raises(ReaderError) as refused:
            SimReader(attach=True, base_dir=owner.directory).open()
    finally:
        os.chmod(ctx, mode)
    assert "ctx" in refused.value.message and "others" in refused.value.message
    # A sim whose context directory is a link to another's.
    fake = tmp_path / "fake-sim"
    fake.mkdir(mode=0o755)
    (fake / "sim.json").write_bytes((Path(owner.directory) / "sim.json").read_bytes())
    os.symlink(ctx, fake / "ctx")
    with pytest.raises(ReaderError) as refused:
        SimReader(attach=True, base_dir=str(fake)).open()
    assert "ctx" in refused.value.message and "link" in refused.value.message
    attached = SimReader(attach=True, base_dir=owner.directory)  # the real one is fine
    attached.open()
    attached.close()


@ROOT_ONLY
def test_attaching_refuses_another_users_sim(make_sim):
    owner = make_sim(gpus=1)
    os.chown(owner.directory, NOBODY, NOBODY)
    try:
        with pytest.raises(ReaderError) as refused:
            SimReader(attach=True, base_dir=owner.directory).open()
    finally:
        os.chown(owner.directory, os.geteuid(), os.getegid())
    assert "owned by" in refused.value.message

"""The audit log's path, read at every start (issue 17, defect 4): opened with the checks of a write.

`gputui clean` and the dashboard read the log at start to report what an earlier run left unfinished.
That read used to follow any symlink and read the whole file: a FIFO at the path hung every command
(`--dry-run` too), a symlink to /dev/zero grew without end, a 4 GiB sparse file was read whole, and
root followed a directory symlink another user had planted in the `--log` path. Each case runs the
real command (`python -m gputui clean --demo ... --dry-run`) in a subprocess with a generous timeout
and an address-space limit (so the old behaviour fails the test instead of filling this machine's
memory): an unsafe path is refused with one clear message and exit code 2; a huge regular log is read
from its tail. "Another user" is uid 65534 (nobody): these tests run as root (here and in CI).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.kill import auditlog as actionlog
from gputui.kill.auditlog import TAIL_BYTES, ActionLog, UnsafeLog, read_records, unfinished
from gputui.kill.plan import PlanOptions, plan_for_gpus
from tests.support.samples import sample

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
MEMORY = 2 << 30  # the address space a dry run gets: ample for it, far less than what the old reads took
# `python -m gputui ...` with its address space limited; at exit it copies /proc/self/io to a file.
RUN = r"""
import atexit, resource, runpy, sys
limit, report = int(sys.argv[1]), sys.argv[2]
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.argv = ["gputui", *sys.argv[3:]]

def dump():
    with open(report, "w") as f:
        f.write(open("/proc/self/io").read())

atexit.register(dump)
runpy.run_module("gputui", run_name="__main__", alter_sys=True)
"""
# A plan written by a process that then exits without an outcome: what the next start must report.
WRITER = r"""
import sys
from gputui.kill.auditlog import ActionLog
from gputui.kill.plan import PlanOptions, plan_for_gpus
from tests.support.samples import sample

with ActionLog(sys.argv[1], operator="t") as log:
    log.write_plan(plan_for_gpus(sample(), [0], host="h", options=PlanOptions(operator="t", plan_id=sys.argv[2])))
"""

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="making another user's directory needs root")


def dry_run(log: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, int]]:
    """`gputui clean --demo demo-b:3 --dry-run --log LOG`, to its end (a hang fails the test)."""
    report = tmp_path / "io.txt"
    report.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(MEMORY), str(report),
         "clean", "--demo", "demo-b:3", "--dry-run", "--log", str(log)],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    io = {}
    if report.exists():
        for line in report.read_text().splitlines():
            key, _, value = line.partition(":")
            io[key] = int(value)
    return done, io


def write_unfinished(log: Path, plan_id: str) -> None:
    """A plan on disk with no outcome, written by a process that is gone by the time this returns."""
    subprocess.run(
        [sys.executable, "-c", WRITER, str(log), plan_id],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        cwd=REPO,
        check=True,
        timeout=60,
    )


def refused(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert all(w in done.stderr for w in words), done.stderr
    assert "== demo-b: plan" not in done.stdout  # refused before any plan


# -- what sits at the log's path ----------------------------------------------------------------


def test_a_fifo_at_the_log_path_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "actions.jsonl"
    os.mkfifo(fifo)
    done, _ = dry_run(fifo, tmp_path)
    refused(done, str(fifo), "not a regular file")


def test_a_symlink_to_dev_zero_is_refused_not_read(tmp_path):
    link = tmp_path / "actions.jsonl"
    link.symlink_to("/dev/zero")
    done, _ = dry_run(link, tmp_path)
    refused(done, str(link), "symbolic link")


def test_a_device_named_as_the_log_is_refused(tmp_path):
    done, _ = dry_run(Path("/dev/zero"), tmp_path)
    refused(done, "/dev/zero", "not a regular file")


def test_a_directory_at_the_log_path_is_refused(tmp_path):
    (tmp_path / "actions.jsonl").mkdir()
    done, _ = dry_run(tmp_path / "actions.jsonl", tmp_path)
    refused(done, "not a regular file")


# -- symlinks and directories another user controls ------------------------------------------------


def victim(tmp_path: Path) -> Path:
    """Root's own log, with an unfinished plan in it: where a planted symlink would lead."""
    where = tmp_path / "root-only"
    where.mkdir(mode=0o700)
    write_unfinished(where / "actions.jsonl", "victim")
    return where


@root_only
@pytest.mark.parametrize(
    "planted",
    ["nobody's directory", "a world-writable directory", "a sticky directory, nobody's link"],
)
def test_a_directory_symlink_another_user_could_plant_is_not_followed(tmp_path, planted):
    target = victim(tmp_path)
    before = (target / "actions.jsonl").read_bytes()
    shared = tmp_path / "shared"
    shared.mkdir()
    link = shared / "logs"
    link.symlink_to(target)
    if planted == "nobody's directory":
        os.chown(shared, NOBODY, NOBODY)
        os.lchown(link, NOBODY, NOBODY)
    elif planted == "a world-writable directory":
        os.chmod(shared, 0o777)  # no sticky bit: anyone may replace the link root made
    else:
        os.chmod(shared, 0o1777)  # like /tmp: anyone may add an entry, only its owner replace it
        os.lchown(link, NOBODY, NOBODY)
    done, _ = dry_run(link / "actions.jsonl", tmp_path)
    refused(done, str(shared), "refused")
    assert (target / "actions.jsonl").read_bytes() == before  # not read, reported nor written


@root_only
def test_a_log_in_a_directory_another_user_owns_is_refused(tmp_path):
    """Another user may replace any entry of a directory of theirs, between a check and a use."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    done, _ = dry_run(theirs / "actions.jsonl", tmp_path)
    refused(done, str(theirs), "belongs to uid 65534")
    assert list(theirs.iterdir()) == []


def test_a_symlink_in_a_directory_only_we_control_is_followed(tmp_path):
    """The rule refuses what another user could change, not every symlink on the way (/var/run ->
    /run, a home on another disk)."""
    target = victim(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    (mine / "logs").symlink_to(target)
    done, _ = dry_run(mine / "logs" / "actions.jsonl", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "WARNING: action victim on h" in done.stderr
    assert unfinished(target / "actions.jsonl") == []  # reported, through the link


@root_only
def test_writing_through_a_planted_directory_symlink_is_refused_too(tmp_path):
    target = victim(tmp_path)
    before = (target / "actions.jsonl").read_bytes()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "logs").symlink_to(target)
    os.chown(theirs, NOBODY, NOBODY)
    plan = plan_for_gpus(sample(), [0], host="h", options=PlanOptions(operator="t", plan_id="w"))
    with ActionLog(theirs / "logs" / "actions.jsonl") as log, pytest.raises(UnsafeLog, match="uid 65534"):
        log.write_plan(plan)
    assert (target / "actions.jsonl").read_bytes() == before


def test_a_fifo_is_refused_when_writing_too(tmp_path):
    os.mkfifo(tmp_path / "actions.jsonl")
    plan = plan_for_gpus(sample(), [0], host="h", options=PlanOptions(operator="t", plan_id="w"))
    with ActionLog(tmp_path / "actions.jsonl") as log, pytest.raises(UnsafeLog, match="not a regular file"):
        log.write_plan(plan)
    assert stat.S_ISFIFO(os.lstat(tmp_path / "actions.jsonl").st_mode)


# -- a huge log: read from its tail ------------------------------------------------------------------


def test_a_sparse_4_gib_log_is_read_from_its_tail(tmp_path):
    log = tmp_path / "actions.jsonl"
    with open(log, "wb") as f:
        f.truncate(4 << 30)  # 4 GiB of holes: no disk used, all of it NUL bytes when read
    write_unfinished(log, "attheend")
    done, io = dry_run(log, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "WARNING: action attheend on h" in done.stderr  # the record at the end is still found
    # What the whole run read (Python's own modules included) is bounded by far less than the log.
    assert io and io["rchar"] < 256 << 20, io
    records, _ = read_records(log, tail=TAIL_BYTES)
    assert records[-1]["kind"] == "reported" and records[-1]["action"] == "attheend"


def test_the_start_reads_only_the_last_tail_bytes(tmp_path, monkeypatch):
    """The reader, unit by unit: bytes read are bounded, a line cut by the window's start is
    skipped (not counted bad), and everything after it is read."""
    log = tmp_path / "actions.jsonl"
    filler = b'{"v":1,"kind":"event","action":"old","time":1.0,"message":"' + b"x" * 900 + b'"}\n'
    with open(log, "wb") as f:
        for _ in range((3 * TAIL_BYTES) // len(filler)):
            f.write(filler)
    write_unfinished(log, "last")
    read = 0
    real = os.pread

    def counting(fd: int, n: int, offset: int) -> bytes:
        nonlocal read
        data = real(fd, n, offset)
        read += len(data)
        return data

    monkeypatch.setattr(actionlog.os, "pread", counting)  # the reader's only way to read the log
    [lost] = unfinished(log)
    assert lost.action == "last" and [i.pid for i in lost.pending] == [100, 108]
    assert 0 < read <= TAIL_BYTES + 1
    records, bad = read_records(log, tail=TAIL_BYTES)
    assert bad == 0 and records[0]["action"] == "old"
    assert len(records) < (3 * TAIL_BYTES) // len(filler)


def test_a_symlink_loop_on_the_way_is_refused_and_dot_dot_is_taken_physically(tmp_path, monkeypatch):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(UnsafeLog, match="too many symbolic links"):
        read_records(tmp_path / "a" / "actions.jsonl")
    # real/logs -> ../store: `..` goes up from where the link leads, as the kernel takes it.
    (tmp_path / "store").mkdir()
    write_unfinished(tmp_path / "store" / "actions.jsonl", "here")
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "logs").symlink_to("../store")
    monkeypatch.chdir(tmp_path / "real")
    assert [u.action for u in unfinished(Path("logs/actions.jsonl"))] == ["here"]
    assert [u.action for u in unfinished(Path("logs/../store/actions.jsonl"))] == ["here"]

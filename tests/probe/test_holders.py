"""The holder scan on real processes that open fake device files the test creates."""

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputui.probe.holders import HolderScanner, holders_of

HOLD = """
import os, sys, time
paths = sys.argv[1:]
fds = [os.open(p, os.O_RDONLY) for p in paths]
print("ready", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def devdir(tmp_path):
    d = tmp_path / "dev"
    (d / "nvidia-caps").mkdir(parents=True)
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-caps/nvidia-cap1"):
        (d / name).write_text("")
    return d


@pytest.fixture
def spawn():
    started = []

    def run(*paths):
        p = subprocess.Popen(
            [sys.executable, "-c", HOLD, *map(str, paths)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert p.stdout.readline().strip() == "ready"
        started.append(p)
        return p

    yield run
    for p in started:
        p.kill()
        p.wait()


def test_full_scan_finds_every_holder_with_every_file(devdir, spawn):
    a = spawn(devdir / "nvidia0", devdir / "nvidiactl", devdir / "nvidia-caps/nvidia-cap1")
    b = spawn(devdir / "nvidia1")
    found = holders_of(str(devdir / "nvidia"))
    assert sorted(found[a.pid]) == sorted(
        str(devdir / n) for n in ("nvidia0", "nvidiactl", "nvidia-caps/nvidia-cap1")
    )
    assert found[b.pid] == [str(devdir / "nvidia1")]
    assert os.getpid() not in found


def test_incremental_scan_sees_new_and_gone_holders(devdir, spawn):
    scanner = HolderScanner(str(devdir / "nvidia"), refresh_every=1000)
    first = scanner.scan(full=True)
    assert first.holders == {}
    a = spawn(devdir / "nvidia0")
    second = scanner.scan()
    assert a.pid in second.holders
    a.stdin.write("\n")
    a.stdin.flush()
    a.wait()
    third = scanner.scan()
    assert a.pid not in third.holders


def proc_view(tmp_path, *pids):
    """A /proc showing only `pids` (links to their real entries) and the real loadavg: a scanner
    given it reads real processes' real fd links, and no other process on the machine (a busy CI
    host starts and ends them all the time) changes what it reads."""
    view = tmp_path / "proc"
    if not view.exists():
        view.mkdir()
        (view / "loadavg").symlink_to("/proc/loadavg")
    for pid in pids:
        (view / str(pid)).symlink_to(f"/proc/{pid}")
    return str(view)


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_incremental_scan_reads_few_links(devdir, spawn, tmp_path):
    a = spawn(devdir / "nvidia0")
    idle = spawn()
    view = proc_view(tmp_path, a.pid, idle.pid)
    # No periodic re-read within the test, whatever the PIDs: a full scan dates each process's read
    # back by its PID modulo the recheck period (to spread the next ones), so with a period shorter
    # than the PIDs a process that has run since would be read in full again at any scan.
    scanner = HolderScanner(str(devdir / "nvidia"), proc=view, refresh_every=10**9)
    full = scanner.scan(full=True)
    assert full.reread == fd_count(a.pid) + fd_count(idle.pid)  # every link of every process
    # Nothing has changed: no link is read again, and the holder is still known.
    steady = scanner.scan()
    assert steady.reread == 0 and set(steady.holders) == {a.pid}
    # A new process: its links, and only its, are read.
    b = spawn(devdir / "nvidia1")
    proc_view(tmp_path, b.pid)
    after = scanner.scan()
    assert after.reread == fd_count(b.pid) and set(after.holders) == {a.pid, b.pid}


def test_fd_number_reuse_is_caught_by_the_round_robin_refresh(devdir, tmp_path):
    # A process that closes fd N and reopens a device file as the same fd N between two scans.
    script = """
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print(fd, flush=True)
sys.stdin.readline()
os.close(fd)
fd2 = os.open(sys.argv[2], os.O_RDONLY)
assert fd2 == fd
print("swapped", flush=True)
sys.stdin.readline()
"""
    other = tmp_path / "plain"
    other.write_text("")
    p = subprocess.Popen(
        [sys.executable, "-c", script, str(other), str(devdir / "nvidiactl")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        p.stdout.readline()
        refresh = 4
        scanner = HolderScanner(str(devdir / "nvidia"), refresh_every=refresh)
        scanner.scan(full=True)
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "swapped"
        _, worst = scanner.staleness()
        seen = [p.pid in scanner.scan().holders for _ in range(worst)]
        # Missed while the cache is trusted, found within the bound the scanner reports.
        assert any(seen)
    finally:
        p.kill()
        p.wait()


def test_every_holder_among_several_is_found(devdir, spawn):
    procs = [spawn(devdir / "nvidia0") for _ in range(5)]
    result = HolderScanner(str(devdir / "nvidia")).scan(full=True)
    assert all(p.pid in result.holders for p in procs)


LATE_OPEN = """
import os, sys
print("started", flush=True)
sys.stdin.readline()
fd = os.open(sys.argv[1], os.O_RDONLY)
print("opened", flush=True)
sys.stdin.readline()
"""


def _late_opener(path):
    p = subprocess.Popen(
        [sys.executable, "-c", LATE_OPEN, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert p.stdout.readline().strip() == "started"
    return p


def _open_now(p):
    p.stdin.write("\n")
    p.stdin.flush()
    assert p.stdout.readline().strip() == "opened"


@pytest.mark.parametrize("check_every", [1, 3, 5])
def test_known_process_that_opens_a_device_later_is_found_within_check_every(devdir, check_every):
    p = _late_opener(devdir / "nvidiactl")
    try:
        scanner = HolderScanner(
            str(devdir / "nvidia"), refresh_every=1000, check_every=check_every, budget=10**6
        )
        assert p.pid not in scanner.scan(full=True).holders
        _open_now(p)
        found_after = next(i for i in range(1, check_every + 1) if p.pid in scanner.scan().holders)
        assert found_after <= check_every
    finally:
        p.kill()
        p.wait()


def test_watched_pids_are_checked_every_scan(devdir):
    p = _late_opener(devdir / "nvidia0")
    try:
        scanner = HolderScanner(str(devdir / "nvidia"), refresh_every=1000, check_every=1000)
        scanner.scan(full=True)
        _open_now(p)
        assert p.pid in scanner.scan(watch={p.pid}).holders
    finally:
        p.kill()
        p.wait()


def test_busy_hosts_get_a_slower_round_robin_within_the_budget(devdir):
    scanner = HolderScanner(str(devdir / "nvidia"), check_every=1, budget=10)
    result = scanner.scan(full=True)
    check, worst = scanner.staleness()
    assert check >= len(result.states) // 10 and worst >= 4 * check
    again = scanner.scan()
    new = len(set(again.states) - set(result.states))  # new processes are always read at once
    # budget, holders, new ones, and the full re-reads (a quarter of the budget), with slack
    assert again.listed <= 10 + len(result.holders) + new + 3 + 3


# -- the sleeper rule (holders.py): a turn reads only schedstat when the process has not run ---------


TWO_THREADS = """
import sys, threading
threading.Thread(target=sys.stdin.readline, daemon=True).start()
print("ready", flush=True)
sys.stdin.readline()
"""

SPIN = """
print("ready", flush=True)
while True:
    pass
"""


def _started(script, *argv, word="ready"):
    p = subprocess.Popen(
        [sys.executable, "-c", script, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert p.stdout.readline().strip() == word
    return p


def _asleep(*pids):
    """Until each process is asleep (state S): one still on its way to a blocking read is running,
    and the rule takes no baseline from a running process."""
    deadline = time.monotonic() + 30
    for pid in pids:
        while Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] != b"S":
            assert time.monotonic() < deadline, f"{pid} never went to sleep"
            time.sleep(0.001)


def _listings(scanner):
    """Record the pids whose fd directory the scanner lists."""
    listed = []
    real = scanner._list

    def record(pid, *args):
        listed.append(pid)
        return real(pid, *args)

    scanner._list = record
    return listed


def test_a_sleeping_process_is_not_listed_again_until_it_runs(devdir):
    p = _started(LATE_OPEN, str(devdir / "nvidia0"), word="started")
    try:
        _asleep(p.pid)
        scanner = HolderScanner(str(devdir / "nvidia"), refresh_every=1000, check_every=1, budget=10**6)
        scanner.scan(full=True)
        listed = _listings(scanner)
        results = [scanner.scan() for _ in range(3)]
        assert p.pid not in listed  # three turns, each one schedstat read
        assert all(r.skipped >= 1 for r in results)
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "opened"
        assert p.pid in scanner.scan().holders  # it ran: listed at its next turn, found
        assert p.pid in listed
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("script", [TWO_THREADS, SPIN], ids=["two-threads", "running"])
def test_a_process_with_threads_or_running_is_listed_at_every_turn(devdir, script):
    """The rule needs one thread (no other could change the table unseen) that is off the CPU."""
    p = _started(script)
    try:
        scanner = HolderScanner(str(devdir / "nvidia"), refresh_every=1000, check_every=1, budget=10**6)
        scanner.scan(full=True)
        listed = _listings(scanner)
        for _ in range(3):
            scanner.scan()
        assert listed.count(p.pid) == 3
    finally:
        p.kill()
        p.wait()


def test_fd_number_reuse_by_a_process_that_ran_is_caught_within_refresh_every(devdir, tmp_path):
    script = """
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print(fd, flush=True)
sys.stdin.readline()
os.close(fd)
fd2 = os.open(sys.argv[2], os.O_RDONLY)
assert fd2 == fd
print("swapped", flush=True)
sys.stdin.readline()
"""
    other = tmp_path / "plain"
    other.write_text("")
    p = subprocess.Popen(
        [sys.executable, "-c", script, str(other), str(devdir / "nvidiactl")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        p.stdout.readline()
        scanner = HolderScanner(str(devdir / "nvidia"), refresh_every=6, check_every=1, budget=10**6)
        scanner.scan(full=True)
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "swapped"
        # Same fd numbers, so the turns that list it read nothing new; the refresh re-reads every link.
        found = next(i for i in range(1, 100) if p.pid in scanner.scan().holders)
        assert found <= scanner.refresh_every < scanner.staleness()[1]
    finally:
        p.kill()
        p.wait()


SHARED_TABLE = r"""
import ctypes, os, platform, sys
# clone(CLONE_FILES | SIGCHLD): a child process (not a thread) that shares this process's fd table.
number = {"x86_64": 56, "aarch64": 220}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
nothing = ctypes.c_void_p(0)
pid = libc.syscall(ctypes.c_long(number), ctypes.c_ulong(0x400 | 17), nothing, nothing, nothing, nothing)
assert pid >= 0, ctypes.get_errno()
mine, its = int(sys.argv[2]), int(sys.argv[3])
if pid == 0:
    os.write(1, b"%d\n" % os.getpid())  # one write: the other process prints too
    os.read(its, 1)
    os.open(sys.argv[1], os.O_RDONLY)  # into the table both processes share
    os.write(1, b"opened\n")
    os.read(its, 1)
    os._exit(0)
os.write(1, b"%d\n" % os.getpid())
os.read(mine, 1)  # asleep until EOF: it never runs meanwhile
os.waitpid(pid, 0)
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="clone's number is known here")
def test_a_process_sharing_its_fd_table_is_caught_by_the_recheck(devdir):
    """What the sleeper rule cannot see: B, made by clone(CLONE_FILES) without CLONE_THREAD, opens a
    device file into the fd table it shares with A, which sleeps throughout. B ran and is found at
    its turn; A's table changed though A did not run: only the unconditional full read finds it,
    within `recheck_every` (the worst case the scanner reports). A full scan finds it at once."""
    a_r, a_w = os.pipe()
    b_r, b_w = os.pipe()
    p = subprocess.Popen(
        [sys.executable, "-c", SHARED_TABLE, str(devdir / "nvidia1"), str(a_r), str(b_r)],
        stdout=subprocess.PIPE,
        text=True,
        pass_fds=(a_r, b_r),
    )
    os.close(a_r)
    os.close(b_r)
    try:
        a = p.pid
        [b] = {int(p.stdout.readline()), int(p.stdout.readline())} - {a}
        _asleep(a, b)
        scanner = HolderScanner(str(devdir / "nvidia"), refresh_every=4, check_every=1, budget=10**6)
        scanner.scan()  # every process new to it: read in full (a full scan would date them back)
        os.write(b_w, b"o")
        assert p.stdout.readline().strip() == "opened"
        seen = [scanner.scan().holders for _ in range(scanner.staleness()[1])]
        assert b in seen[0]
        a_found = next(i for i, holders in enumerate(seen, 1) if a in holders)
        assert scanner.refresh_every < a_found <= scanner.staleness()[1]
        assert a in HolderScanner(str(devdir / "nvidia")).scan(full=True).holders
    finally:
        os.close(b_w)
        os.close(a_w)
        p.wait(timeout=30)

"""The holder scan on real processes that open fake device files the test creates."""

import os
import subprocess
import sys

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


def test_incremental_scan_reads_few_links(devdir, spawn):
    spawn(devdir / "nvidia0")
    scanner = HolderScanner(str(devdir / "nvidia"), refresh_every=1000)
    full = scanner.scan(full=True)
    steady = scanner.scan()
    assert full.reread > 10
    # Only fds opened since the last scan are read again (the scan itself opens a few).
    assert steady.reread < full.reread / 4


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

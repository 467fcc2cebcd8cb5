"""Parsing /proc records: recorded texts and this very process."""

import os
import subprocess
import sys

from gputui.probe import procfs

# A real /proc/PID/stat line of a CUDA job whose comm holds a space and a parenthesis.
STAT = (
    "4121 (python (x) y) S 4100 4121 4100 34816 4121 4194560 90934 0 12 0 1234 567 0 0 20 0 "
    "45 0 123456 31488937984 412345 18446744073709551615 1 1 0 0 0 0 0 16781312 17642 0 0 0 17 "
    "11 0 0 0 0 0 0 0 0 0 0 0 0 0"
)


def test_parse_stat_takes_comm_up_to_the_last_paren():
    s = procfs.parse_stat(STAT)
    assert s.pid == 4121
    assert s.comm == "python (x) y"
    assert (s.state, s.ppid, s.pgid, s.sid) == ("S", 4100, 4121, 4100)
    assert s.cpu_ticks == 1234 + 567
    assert s.start_time == 123456
    assert s.rss == 412345 * procfs.PAGE_SIZE


def test_parse_status_reads_real_uid_and_nspid():
    text = "Name:\tpython\nUid:\t1000\t1000\t1000\t1000\nNSpid:\t98765\t42\n"
    st = procfs.parse_status(text)
    assert st.uid == 1000
    assert st.nspid == [98765, 42]


def test_parse_cmdline_splits_on_nul_and_keeps_odd_bytes():
    assert procfs.parse_cmdline(b"python\x00train.py\x00--x=\xff\x00") == ["python", "train.py", "--x=\ufffd"]
    assert procfs.parse_cmdline(b"") == []


def test_this_process_reads_back():
    s = procfs.read_stat(os.getpid())
    assert s is not None and s.pid == os.getpid() and s.state in "RS"
    assert procfs.read_cmdline(os.getpid())[0].endswith(("python", "python3")) or sys.executable
    assert procfs.read_status(os.getpid()).uid == os.getuid()
    assert os.getppid() in procfs.ancestors(os.getpid())


def test_vanished_process_reads_as_none():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert procfs.read_stat(child.pid) is None
    assert procfs.read_cmdline(child.pid) == []


def test_zombie_state_is_z():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        # Not reaped yet: wait for the exit without reaping (WNOWAIT).
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
        assert procfs.read_stat(child.pid).state == "Z"
    finally:
        child.wait()

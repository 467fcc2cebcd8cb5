"""What the probe reads once of each process (its command line, whether it is another gputui's
probe), and what it reads again: right after exec returns, Linux shows an empty /proc/PID/cmdline for a
moment, and a process first read there must not be cached without a command, nor taken for a job when
it is a peer's probe (which `clean --all --sweep` would then end)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from gputui.probe.core import Probe
from gputui.probe.readers.sim import SimReader
from gputui.transport.headstart import local_argv

PID, START = 4242, 777


def fake_proc(root: Path) -> Path:
    """A /proc with one process, 4242, whose command line is empty for now."""
    (root / "stat").write_text("cpu 1 0 1 100 0 0 0 0 0 0\nbtime 1700000000\n")
    me = root / str(PID)
    me.mkdir()
    (me / "cmdline").write_bytes(b"")
    (me / "status").write_text(f"Name:\tpython3\nPid:\t{PID}\nUid:\t0\t0\t0\t0\nNSpid:\t{PID}\n")
    os.symlink(sys.executable, me / "exe")
    return root


def probe_over(proc: Path) -> Probe:
    return Probe(SimReader(gpus=1, scenario="empty"), read_only=True, hostname="known", proc=str(proc))


def test_an_empty_command_line_is_read_again_and_a_peer_probe_is_known_then(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path)
    probe = probe_over(proc)
    first = probe._known_of(PID, START)
    assert first.cmdline == [] and not first.peer  # read in the instant after exec
    argv = local_argv(sys.executable, ["--read-only"])
    (proc / str(PID) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    later = probe._known_of(PID, START)
    assert later.cmdline == argv
    assert later.peer  # another gputui's probe: protected, never a target


def test_a_command_line_once_read_is_kept_for_that_process(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path)
    (proc / str(PID) / "cmdline").write_bytes(b"python3\0train.py\0")
    probe = probe_over(proc)
    assert probe._known_of(PID, START).cmdline == ["python3", "train.py"]
    (proc / str(PID) / "cmdline").write_bytes(b"python3\0renamed-itself\0")  # argv rewritten in place
    assert probe._known_of(PID, START).cmdline == ["python3", "train.py"]  # read once, as before
    assert probe._known_of(PID, START + 1).cmdline == ["python3", "renamed-itself"]  # a new process

"""Another gputui's probe is recognised by what it is (probe/peers.py), never by a name.

The command lines are the ones every version of gputui has started its probe with, taken from the
code that builds them today (the bootstrap over SSH, the local launcher, `gputui probe`) and from the
first versions (the bootstrap's whole source as the `-c` program). Real processes the test starts
check the /proc side: the command line and executable read back, and the gputui above a probe.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from gputui.probe.classify import HIDDEN, MONITOR, USER, ProcFacts, classify, protection
from gputui.probe.peers import is_gputui_probe, peer_probe
from gputui.probe.run.checks import drives_peer_probe
from gputui.transport.bootstrap import BOOT, boot_argv
from gputui.transport.headstart import local_argv

PY = "/usr/bin/python3"


@pytest.mark.parametrize(
    "argv",
    [
        boot_argv(PY),  # over SSH, and a local probe on another interpreter
        boot_argv("python3.8"),
        local_argv(sys.executable, ["--reader", "sim", "--interval", "1"]),  # this installation's
        [PY, "-c", BOOT, "gputui-probe"],  # the first versions: the bootstrap's source on the line
        [PY, "-u", "-X", "dev", "-c", "import gputui", "gputui-probe", "--read-only"],
        [PY, "/opt/venv/bin/gputui", "probe", "--reader", "nvml"],  # `gputui probe` by hand
        [PY, "-m", "gputui", "probe"],
        [PY, "-m", "gputui.probe"],
    ],
)
def test_every_launcher_of_a_probe_is_recognised(argv: list[str]) -> None:
    assert is_gputui_probe(argv)
    assert is_gputui_probe(argv, exe="/usr/bin/python3.12")


@pytest.mark.parametrize(
    "argv, exe",
    [
        (["gputui-probe"], None),  # a name only
        (["gputui", "probe"], "/usr/local/bin/my-job"),  # argv[0] says python, the executable does not
        ([PY, "-c", "import gputui", "gputui-probe"], "/usr/bin/bash"),
        ([PY, "train.py", "gputui-probe"], None),  # the word as an argument of a job
        ([PY, "-c", "print(1)", "gputui-probe"], None),  # a program that is not gputui's
        ([PY, "-c", "import gputui", "worker"], None),
        ([PY, "/opt/gputui-probe.py", "probe"], None),
        ([PY, "-m", "gputui", "wait"], None),  # the gputui front end, not its probe
        ([PY, "serve.py", "--name", "gputui"], None),
        (["/usr/bin/gputui", "probe"], None),  # not a Python interpreter
    ],
)
def test_a_job_that_takes_the_name_is_not_a_probe(argv: list[str], exe: str | None) -> None:
    assert not is_gputui_probe(argv, exe=exe)


def facts(comm: str, pid: int) -> ProcFacts:
    return ProcFacts(comm, "S", 1, pid, pid)


def test_a_peer_holder_is_a_protected_monitor_and_a_listed_one_stays_a_user() -> None:
    peers = {700, 800}
    listed = {800: {0: 4 << 30}}  # NVML lists 800 with memory: it uses the GPU, whatever it looks like
    verdicts = classify(
        listed, {700, 800, 900}, lambda pid: facts("python3", pid), 1, peer=peers.__contains__
    )
    assert verdicts[700].kind == MONITOR and verdicts[700].reason == "gputui"
    assert verdicts[800].kind == USER
    assert verdicts[900].kind == HIDDEN
    assert protection(700, MONITOR, 1, set(), reason="gputui") == "gputui"
    assert protection(900, MONITOR, 1, set(), reason="known-monitor") == "monitor"


def test_a_job_named_gputui_is_no_monitor_by_its_name() -> None:
    verdicts = classify({}, {700}, lambda pid: facts("gputui", pid), 1)
    assert verdicts[700].kind == HIDDEN


@pytest.fixture
def family() -> Iterator[tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]]:
    """A parent (a gputui's stand-in) whose child runs with a probe's command line, and a plain one
    whose child is a job: both children sleep; every process is the test's, ended by PID."""
    # The parent says the child's PID once the child runs its code: right after exec returns, Linux
    # shows an empty /proc/PID/cmdline for a moment (the new arguments are not in place yet; seen
    # once in eight parallel runs here).
    probe_like = (
        "import subprocess, sys; c = subprocess.Popen([sys.executable, '-c', "
        "'import sys, time; print(1, flush=True); time.sleep(120)  # gputui', 'gputui-probe'], "
        "stdout=subprocess.PIPE); c.stdout.readline(); sys.stdout.write(str(c.pid) + chr(10)); "
        "sys.stdout.flush(); sys.stdin.read(); c.kill(); c.wait()"
    )
    plain = probe_like.replace("'gputui-probe'", "'worker'")
    started = [
        subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for code in (probe_like, plain)
    ]
    yield started[0], started[1]
    for parent in started:
        assert parent.stdin is not None
        parent.stdin.close()  # each ends its own child, then itself
        parent.wait(timeout=60)


def test_the_gputui_above_a_probe_is_known_by_its_child(
    family: tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]],
) -> None:
    owner, plain = family
    assert owner.stdout is not None and plain.stdout is not None
    probe_pid, job_pid = int(owner.stdout.readline()), int(plain.stdout.readline())
    assert peer_probe(probe_pid) and not peer_probe(job_pid)
    assert drives_peer_probe(owner.pid)
    assert not drives_peer_probe(plain.pid)

"""`gputui clean`, `wait` and `snapshot` leave without the interpreter's teardown (cli.entry): what
that teardown was for must still happen. Their output is whole, their exit code kept, and a probe
started ahead for a command that then failed is ended and reaped, not orphaned."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gputui.transport.headstart import MARKER

ROOT = Path(__file__).resolve().parents[2]

# Runs the command as a child of a subreaper: a grandchild the command leaves behind (its probe)
# is re-parented to this wrapper instead of init, and so can be found and ended here, by PID.
SUBREAPER = textwrap.dedent(
    """
    import ctypes, json, os, subprocess, sys, time
    PR_SET_CHILD_SUBREAPER = 36
    assert ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    done = subprocess.run([sys.executable, "-m", "gputui", *sys.argv[1:]], capture_output=True)
    time.sleep(0.3)  # an orphan is re-parented as its parent exits
    left = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\\0")
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == os.getpid():
            left.append([int(name), [a.decode(errors="replace") for a in argv]])
    for pid, _ in left:
        os.kill(pid, 9)  # our own grandchild, by PID
        os.waitpid(pid, 0)
    print(json.dumps({"rc": done.returncode, "stdout": done.stdout.decode(), "stderr": done.stderr.decode(), "left": left}))
    """
)


def run(*args: str, home: Path) -> dict:
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config")}
    env.pop("GPUTUI_CONFIG", None)
    done = subprocess.run(
        [sys.executable, "-c", SUBREAPER, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def subreaper_works() -> bool:
    try:
        return hasattr(ctypes.CDLL(None), "prctl") and sys.platform == "linux"
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not subreaper_works(), reason="needs Linux prctl (a child subreaper)")


def test_a_probe_started_ahead_for_a_command_that_then_failed_is_reaped(tmp_path: Path) -> None:
    # `clean` with nothing to clean: this machine's probe was started ahead (no config, no HOST),
    # then the command refused its arguments and returned, never taking that probe.
    out = run("clean", "--yes", home=tmp_path)
    assert out["rc"] == 2
    assert "say what to clean" in out["stderr"]
    assert not [argv for _, argv in out["left"] if MARKER in argv], out["left"]
    assert out["left"] == []


def test_the_output_is_whole_and_the_exit_code_kept(tmp_path: Path) -> None:
    out = run("snapshot", "--demo", "--json", home=tmp_path)
    assert out["rc"] == 0, out["stderr"]
    document = json.loads(out["stdout"])  # the whole document reached the pipe before the exit
    assert {h["name"] for h in document["hosts"]} == {"demo-a", "demo-b"}
    assert out["left"] == []
    waited = run("wait", "--demo", "demo-a", "--timeout", "0.5", home=tmp_path)
    assert waited["rc"] == 1  # demo-a's GPUs are busy: a timeout, said as one
    assert "demo-a" in waited["stdout"] + waited["stderr"]
    assert waited["left"] == []

"""A hint to try the demo is for a person at a terminal: never in the JSON a script (a Slurm prolog
on a real node) reads, nor in output that does not go to a terminal. This dev machine has no NVIDIA
driver: `wait`, `clean` and `snapshot` on it meet "no GPU", where the hint used to be added."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ttyrun import on_pty

REPO = Path(__file__).resolve().parents[2]


def gputui(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), XDG_STATE_HOME=str(tmp_path / "state"))
    env.pop("GPUTUI_CONFIG", None)
    (tmp_path / "none.toml").touch()  # no hosts: this machine
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args, "--config", str(tmp_path / "none.toml")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


def no_gpu_here(tmp_path: Path) -> None:
    if gputui(tmp_path, "snapshot", "--json").returncode != 3:
        pytest.skip("this machine has an NVIDIA GPU: no 'no GPU' message to look at")


@pytest.mark.parametrize(
    "argv",
    [
        ("wait", "--json", "--timeout", "5"),
        ("wait", "--timeout", "5"),
        ("clean", "--all", "--yes", "--json"),
        ("snapshot", "--json"),
        ("snapshot",),
    ],
)
def test_no_demo_hint_where_no_person_reads(tmp_path, argv):
    no_gpu_here(tmp_path)
    done = gputui(tmp_path, *argv)
    assert done.returncode in (1, 3), done.stderr
    assert "--demo" not in done.stdout + done.stderr, done.stdout + done.stderr
    if "--json" in argv:
        json.loads(done.stdout)  # the document is still there, and says why


@pytest.mark.parametrize("argv", [("wait", "--timeout", "5"), ("snapshot",)])
def test_a_person_at_a_terminal_still_gets_the_hint(tmp_path, argv):
    """stderr on a real pty, no --json: the one line says what to try."""
    no_gpu_here(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO), XDG_STATE_HOME=str(tmp_path / "state"))
    env.pop("GPUTUI_CONFIG", None)
    (tmp_path / "none.toml").touch()
    argv_ = [sys.executable, "-m", "gputui", *argv, "--config", str(tmp_path / "none.toml")]
    code, said = on_pty(argv_, env=env, cwd=tmp_path, streams=("stderr",))
    assert code == 3, said
    assert b"--demo" in said, said

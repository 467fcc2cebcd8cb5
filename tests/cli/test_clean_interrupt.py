"""Ctrl+C during `gputui clean`, after a signal was sent (issue 19, item 10): the command says on
stderr what it sent and that the outcome is unknown, exits 130, and the audit log has the plan's
`done` line with outcome unknown (as the dashboard's hard exit writes it; the next start still
reports the plan as unfinished).

A real `gputui clean --demo demo-a:3 --yes` subprocess: GPU 3 of demo-a runs a server that ignores
SIGTERM (the sim's `ignore-term` role), so with a long TERM timeout the plan waits after its SIGTERM
until the Ctrl+C comes. SIGINT is sent to the process this test started, once the audit log shows its
SIGTERM.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shlex
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from gputui.kill.auditlog import read_records, unfinished
from tests.support.livedemo import Live, private_env
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]


def _sigtermed(log: Path) -> bool:
    records, _ = read_records(log) if log.exists() else ([], 0)
    return any(
        r.get("stage") == "signal" and r.get("result") == "sent" and r.get("signal") == "SIGTERM"
        for r in records
    )


def _interrupted_clean(
    args: list[str], env: dict[str, str], cwd: Path, log: Path, gputui: tuple[str, ...] = ("gputui",)
) -> str:
    """`gputui clean ARGS --yes --term-timeout 60 --log LOG` (`gputui`: the command, by default the
    one on env's PATH), sent SIGINT once its SIGTERM is in the log (its target ignores SIGTERM, so the
    plan waits there): its stderr, after checking it exited 130 without a traceback."""
    argv = [*gputui, "clean", *args, "--yes", "--term-timeout", "60", "--log", str(log)]
    proc = subprocess.Popen(
        argv,
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert wait_until(lambda: _sigtermed(log), 120, step=0.05), (
            proc.stderr.read1().decode() if proc.poll() is not None else "no SIGTERM"
        )
        # The process started here is the clean itself (the PATH wrapper execs python).
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    stderr = err.decode()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    return stderr


def test_ctrl_c_after_sigterm_says_what_was_sent_and_logs_outcome_unknown(tmp_path):
    log = tmp_path / "actions.jsonl"
    env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(tmp_path))
    stderr = _interrupted_clean(
        ["--demo", "demo-a:3"], env, REPO, log, gputui=(sys.executable, "-m", "gputui")
    )
    records = [json.loads(line) for line in log.read_bytes().splitlines()]
    sent = [r for r in records if r["stage"] == "signal" and r["result"] == "sent"]
    plan = sent[0]["action"]
    # stderr says what was sent, to which PIDs, and that the outcome is unknown.
    assert "interrupted" in stderr and "outcome unknown" in stderr, stderr
    assert "SIGTERM" in stderr and all(str(r["pid"]) in stderr for r in sent), stderr
    assert str(log) in stderr
    # The audit log has the plan's done line, outcome unknown, saying the same.
    [done] = [r for r in records if r["kind"] == "done" and r["action"] == plan]
    assert done["result"] == "outcome-unknown" and done["ok"] is False
    assert "interrupted" in done["message"] and "SIGTERM" in done["message"], done["message"]
    # An outcome-unknown done does not end the action: the next start still reports it.
    assert [u.action for u in unfinished(log)] == [plan]


def _controlling_tty() -> None:
    """In the child: a session of its own whose controlling terminal is its stdin (the pty), so that
    ^C typed there is SIGINT to it, as in a shell. SIGINT is not ignored in it whatever this process
    does with it: a shell's `&` starts its commands with SIGINT ignored, and an ignored SIGINT is
    inherited across exec (Python then installs no KeyboardInterrupt, and the ^C went nowhere)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _read_until(fd: int, proc: subprocess.Popen, what: bytes, timeout: float) -> bytes:
    buf = b""
    deadline = time.monotonic() + timeout
    while what not in buf and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            buf += chunk
        elif proc.poll() is not None:
            break
    return buf


def test_ctrl_c_at_the_prompt_exits_at_once_and_nothing_is_sent(tmp_path):
    """It waited for Enter: the prompt's read ran in the event loop's executor, which the interpreter
    joins at exit, so ^C went nowhere until a line was typed."""
    log = tmp_path / "actions.jsonl"
    env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(tmp_path), TERM="xterm")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputui", "clean", "--demo", "demo-a:3", "--log", str(log)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd=REPO,
        preexec_fn=_controlling_tty,
    )
    os.close(slave)
    try:
        shown = _read_until(master, proc, b"Proceed? [y/N]", 90)
        assert b"Proceed? [y/N]" in shown, shown.decode(errors="replace")
        os.write(master, b"\x03")  # ^C, as typed
        rest = _read_until(master, proc, b"\x00never", 30)  # until it exits and closes the pty
        assert proc.wait(timeout=30) == 130, rest.decode(errors="replace")
    finally:
        if proc.poll() is None:
            os.write(master, b"\n")  # the old code: a line ends the wait
            proc.wait(timeout=30)
        os.close(master)
    text = rest.decode(errors="replace")
    assert "interrupted" in text and "nothing was sent" in text, text
    assert not log.exists() or not [r for r in read_records(log)[0] if r.get("kind") == "plan"]


# -- the advice on stderr is a command that works as printed ------------------------------------


def _advice(stderr: str) -> list[str]:
    """The command the interrupted clean says to check the GPUs with, as words."""
    found = re.search(r"\(`(gputui snapshot [^`]*)`\)", stderr)
    assert found, stderr
    return shlex.split(found.group(1))


def _run_as_printed(words: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(words, env=env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def _plan_of(log: Path) -> dict[str, object]:
    [done] = [r for r in read_records(log)[0] if r.get("kind") == "done"]
    return done


@pytest.mark.timeout(600)
def test_the_advice_after_ctrl_c_runs_as_printed_on_the_demo_and_the_next_start_says_what_the_log_says(
    live: Live,
) -> None:
    log = live.root / "actions.jsonl"
    stderr = _interrupted_clean(["--demo", "demo-b:1"], live.env, live.cwd, log)
    live.record()
    words = _advice(stderr)
    assert "--demo" in words and "demo-b" in words, stderr
    r = _run_as_printed(words, live.env, live.cwd)
    live.record()
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert "demo-b" in r.stdout
    done = _plan_of(log)
    assert done["result"] == "outcome-unknown"
    # The next start reports what the log says: a done line with the outcome unknown, not "never
    # recorded", through the function and through the next command's start.
    [action] = unfinished(log)
    said = action.describe()
    assert "outcome unknown" in said and "never recorded" not in said, said
    assert "interrupted (Ctrl+C)" in said and "SIGTERM" in said, said
    nxt = live.gputui("clean", "--demo", "demo-b:1", "--dry-run", "--log", str(log))
    live.record()
    assert nxt.returncode == 0, nxt.stdout + nxt.stderr
    assert f"action {done['action']} on demo-b" in nxt.stderr, nxt.stderr
    assert "outcome unknown" in nxt.stderr and "never recorded" not in nxt.stderr, nxt.stderr


@pytest.mark.timeout(600)
def test_the_advice_after_ctrl_c_names_the_config_and_quotes_the_host(tmp_path: Path) -> None:
    env, _run, _tmp = private_env(tmp_path)
    env["GPUTUI_DEMO"] = "fresh"
    cwd = tmp_path / "work"
    cwd.mkdir()
    name = "lab'1;$HOME|x"  # a host name a shell would read as code: the advice quotes it
    config = tmp_path / "my config.toml"
    config.write_text(
        "[[hosts]]\n"
        f"name = {json.dumps(name)}\n"
        'address = "local"\nreader = "sim"\nsim_scenario = "demo"\nsim_variant = 1\nsim_seed = 2\n'
    )
    log = tmp_path / "actions.jsonl"
    stderr = _interrupted_clean(["--config", str(config), name, "--gpu", "1"], env, cwd, log)
    words = _advice(stderr)
    assert words[:2] == ["gputui", "snapshot"] and name in words, stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = _run_as_printed(words, env, elsewhere)  # from another directory too: the path is absolute
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert name in r.stdout

"""Bad days, fifth round (second part): what `gputui clean`, `pick` and the other commands say, found
by driving the real CLI against a live demo of the test's own (tests/support/livedemo.py). Each test
failed before its fix (docs/RELIABILITY.md, "Bad days, fifth round")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.cli import host_doc
from tests.support.livedemo import Live, snapshot

# Each test starts a demo (two sims, some twenty processes): more than the suite's 120 s on a busy
# machine. Nothing here asserts a duration.
pytestmark = pytest.mark.timeout(600)


def processes(live: Live, host: str) -> list[dict[str, Any]]:
    assert live.gputui("demo", "start").returncode == 0
    procs: list[dict[str, Any]] = host_doc(snapshot(live, host), host, "name")["processes"]
    return procs


# -- a zombie chosen by PID: nothing is signalled, and the verdict says so ---------------------------


def test_a_zombie_chosen_by_pid_is_not_said_stopped(live: Live) -> None:
    """`clean --pid <zombie>` sent nothing (no signal reaches a zombie) and said "STOPPED in 56 ms ...
    every target stopped, its memory released", exit 0, the zombie still there."""
    (zombie,) = [p for p in processes(live, "demo-b") if p["kind"] == "zombie"]
    pid, parent = zombie["pid"], zombie["ppid"]
    r = live.gputui(
        "clean", "--demo", "demo-b", "--pid", str(pid), "--yes", "--log", str(live.root / "a.jsonl")
    )
    live.record()
    assert r.returncode == 4, r.stdout + r.stderr
    assert "STOPPED" not in r.stdout and "every target stopped" not in r.stdout
    assert "nothing was signalled" in r.stdout and f"parent {parent}" in r.stdout
    assert "holds no GPU memory" in r.stdout or "holds nothing" in r.stdout
    assert "the probe will only verify" not in r.stdout
    j = live.gputui(
        "clean", "--demo", "demo-b", "--pid", str(pid), "--yes", "--json", "--log", str(live.root / "a.jsonl")
    )
    assert j.returncode == 4, j.stdout + j.stderr
    doc = json.loads(j.stdout)
    entry = host_doc(doc, "demo-b")
    assert doc["ok"] is False and doc["exit_code"] == 4 and entry["status"] == "refused"
    assert "nothing was signalled" in entry["message"]
    # It is still there: its parent has not reaped it.
    assert [p["pid"] for p in processes(live, "demo-b") if p["kind"] == "zombie"] == [pid]


# -- --log: a path that names no file, a pseudo file, a directory that does not exist ----------------

LOG_COMMANDS = {
    "clean": ("clean", "--demo", "demo-a", "--gpu", "3", "--yes"),
    "dashboard": ("--demo",),
    "record": ("record", "REC", "--demo", "--seconds", "1"),
}


@pytest.mark.parametrize("command", sorted(LOG_COMMANDS))
@pytest.mark.parametrize(
    "log, words, wrong",
    [
        ("", "'' names no file", "audit log . is"),
        ("/proc/self/status", "keeps no files", "free"),
        ("MISSING/dir/a.jsonl", "does not exist", "Traceback"),
    ],
)
def test_a_log_path_that_cannot_be_a_log_is_bad_usage(
    live: Live, command: str, log: str, words: str, wrong: str
) -> None:
    """`--log ''` was "audit log . is not a regular file"; `--log /proc/self/status` blamed the free
    space ("0 KiB free ... nothing sent ...; nothing was sent", exit 1); `--log /nonexistent/dir/a.jsonl`
    made the directories without a word. Each is bad usage (exit 2) of every command taking --log,
    said as what it is; a directory is not made for a path the user named."""
    log = log.replace("MISSING", str(live.root / "missing"))
    argv = [a.replace("REC", str(live.root / "rec.jsonl")) for a in LOG_COMMANDS[command]]
    r = live.gputui(*argv, "--log", log, timeout=120)
    live.record()
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--log" in r.stderr and words in r.stderr, r.stderr
    assert wrong not in r.stderr and "nothing sent" not in r.stdout + r.stderr
    assert not (live.root / "missing").exists()


def test_the_default_log_directories_are_still_made(live: Live) -> None:
    """Only a path the user named must have its directory: the default log's are made."""
    env = dict(live.env, XDG_STATE_HOME=str(live.root / "state" / "deeper"))
    assert live.gputui("demo", "start").returncode == 0
    r = live.gputui("clean", "--demo", "demo-a", "--gpu", "3", "--yes", env=env)
    live.record()
    assert r.returncode == 0, r.stdout + r.stderr
    assert (live.root / "state" / "deeper" / "gputui" / "actions.jsonl").stat().st_size > 0


# -- a plan's warning names the CLI's way, not the dashboard's key ----------------------------------


def test_a_restart_warning_in_the_cli_names_the_cli_flag_not_a_key(live: Live) -> None:
    """A member stopped without its parent: the plan said "X stops job N whole", `X` being the
    dashboard's key; the CLI's way is `--job N`."""
    assert live.gputui("demo", "start").returncode == 0
    jobs = host_doc(snapshot(live, "demo-a"), "demo-a", "name")["jobs"]
    job = next(j for j in jobs if len(j["members"]) > 1 and j["root"] not in j["members"])
    member = job["members"][0]
    r = live.gputui("clean", "--demo", "demo-a", "--pid", str(member), "--dry-run")
    live.record()
    assert r.returncode == 0, r.stdout + r.stderr
    (warning,) = [line for line in r.stdout.splitlines() if "may start it again" in line]
    assert f"--job {job['id']}" in warning and "X " not in warning, warning


# -- a PID above several jobs: the hint names them all (bounded) ------------------------------------


def test_a_pid_above_several_jobs_names_every_job_to_stop(live: Live) -> None:
    """`clean --pid 1`: "stop the job instead: clean --job N" named the first of the jobs below it."""
    assert live.gputui("demo", "start").returncode == 0
    jobs = [j["id"] for j in host_doc(snapshot(live, "demo-a"), "demo-a", "name")["jobs"]]
    assert len(jobs) > 3, jobs
    r = live.gputui("clean", "--demo", "demo-a", "--pid", "1", "--dry-run")
    live.record()
    assert r.returncode == 4, r.stdout + r.stderr
    (refused,) = [line for line in r.stdout.splitlines() if line.startswith("== demo-a: REFUSED")]
    hint = refused.split("instead: ", 1)[1]
    named = hint.split(" (and ")[0].split()
    assert named[0] == "clean" and named[1::2] == ["--job"] * 3, hint
    assert set(named[2::2]) <= set(jobs) and len(set(named[2::2])) == 3, hint
    assert hint.endswith(f"(and {len(jobs) - 3} more)"), hint


# -- pick: one GPU is "1 GPU" ---------------------------------------------------------------------


def test_pick_says_one_gpu_in_the_singular(live: Live) -> None:
    """`gputui pick 1` with no GPU ready said "no host has 1 GPUs ready" (and "waiting ... for 1
    GPUs ready" with --wait)."""
    assert live.gputui("demo", "start").returncode == 0
    r = live.gputui("pick", "1", "--demo", "demo-a", "--memory-below", "1B", "--wait", "1")
    live.record()
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no host has 1 GPU ready" in r.stderr and "for 1 GPU ready" in r.stderr, r.stderr
    assert "1 GPUs" not in r.stderr

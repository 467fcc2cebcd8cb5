"""Bad days, fifth round (second part): what `gputui clean`, `pick` and the other commands say, found
by driving the real CLI against a live demo of the test's own (tests/support/livedemo.py). Each test
failed before its fix (docs/RELIABILITY.md, "Bad days, fifth round")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cli.test_bad_days_five import host_doc
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

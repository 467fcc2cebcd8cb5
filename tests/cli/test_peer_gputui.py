"""Two operators' gputui runs on one host: a clean never signals the other's probe or the gputui
that owns it.

The other operator's run is `gputui snapshot --demo --watch 1`, a real command of this checkout
that runs until it is stopped; its probe attaches to the test's own demo and holds the sim's device
files, as every NVML client holds /dev/nvidia*. By the device-file scan alone it is an unattributed
hidden holder: the sweep's target, and its gputui the root of a job of its user. It must be listed
as a monitor (`reason` and `protected` "gputui") and survive `clean --all --sweep`, `clean --user`,
and `clean --pid <its probe> --include-monitor`.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
from pathlib import Path
from typing import Any

from gputui.cli.exits import Exit
from tests.support.livedemo import Live, snapshot
from tests.support.procs import probes_below, start_time
from tests.support.simprobe import alive
from tests.support.waiting import wait_until

HOST = "demo-a"


def record_of(doc: dict[str, Any], pid: int) -> dict[str, Any] | None:
    (host,) = [h for h in doc["hosts"] if h["name"] == HOST]
    return next((p for p in host["processes"] if p["pid"] == pid), None)


def targets(run: subprocess.CompletedProcess[str]) -> set[int]:
    doc = json.loads(run.stdout)
    return {t["pid"] for h in doc["hosts"] if h.get("plan") for t in h["plan"]["targets"]}


def signalled(log: Path) -> set[int]:
    """Every PID the audit log meant to signal (an intent) or says a signal went to (an event)."""
    pids = set()
    for line in log.read_text().splitlines() if log.exists() else ():
        entry = json.loads(line)
        if (
            entry.get("kind") in ("intent", "event")
            and entry.get("signal")
            and isinstance(entry.get("pid"), int)
        ):
            pids.add(entry["pid"])
    return pids


def test_another_gputui_beside_a_clean_is_a_monitor_and_never_signalled(live: Live, tmp_path: Path) -> None:
    assert live.gputui("demo", "start").returncode == 0
    out = (tmp_path / "watch.out").open("w")
    other = subprocess.Popen(
        ["gputui", "snapshot", "--demo", HOST, "--watch", "1", "--json"],
        cwd=live.cwd, env=live.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        other_id = (other.pid, start_time(other.pid))
        wait_until(lambda: probes_below(other.pid), 120.0, step=0.2)
        (probe,) = probes_below(other.pid)
        # The clean's own probe sees the other one as what it is.
        wait_until(lambda: record_of(snapshot(live, HOST), probe[0]) is not None, 120.0, step=0.5)
        record = record_of(snapshot(live, HOST), probe[0])
        assert record is not None
        assert (record["kind"], record["reason"], record["protected"]) == ("monitor", "gputui", "gputui")
        assert record["job"] is None

        log = tmp_path / "actions.jsonl"
        me = pwd.getpwuid(os.getuid()).pw_name
        by_user = live.gputui("clean", "--demo", HOST, "--user", me, "--dry-run", "--json", "--log", str(log))
        assert by_user.returncode in (0, 2), by_user.stderr
        if by_user.returncode == 0:
            assert not {other.pid, probe[0]} & targets(by_user)

        chosen = live.gputui("clean", "--demo", HOST, "--pid", str(probe[0]), "--include-monitor", "--yes",
                             "--json", "--log", str(log))  # fmt: skip
        assert chosen.returncode == Exit.REFUSED, chosen.stdout + chosen.stderr
        assert "gputui" in chosen.stdout + chosen.stderr

        swept = live.gputui("clean", "--demo", HOST, "--all", "--sweep", "--yes", "--json", "--log", str(log))
        assert swept.returncode in (0, 1), swept.stdout + swept.stderr
        assert not {other.pid, probe[0]} & targets(swept)
        assert not {other.pid, probe[0]} & signalled(log)
        assert alive(*other_id) and alive(*probe), "the other operator's gputui or its probe was stopped"
        assert other.poll() is None
    finally:
        if other.poll() is None:
            os.kill(other.pid, signal.SIGINT)  # the watcher this test started; Ctrl+C ends it, exit 0
        other.wait(timeout=60)
        out.close()

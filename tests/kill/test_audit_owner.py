"""Other runs' plans in a shared audit log (issue 17, defect 8): unfinished only once their process is gone.

Two `gputui clean` sharing a log: the second used to report the first's plan, still running, as one
that "never recorded an outcome", and mark it reported; when the first was then SIGKILLed mid-plan,
no later start reported it. Every record now names the process that wrote it (PID, start time in
clock ticks since boot, boot id): a later start reports a plan only when that process no longer
exists. Records without these fields (older logs) are judged as before. Every process here is the
test's own child, signalled by PID and reaped; the probes a killed `gputui clean` leaves are ended
by PID and start time (tests/cli/test_clean.py's helpers).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from gputui.kill.auditlog import ActionLog, read_records, unfinished
from gputui.kill.plan import PlanOptions, plan_for_gpus
from tests.support.cli import gputui as run_gputui
from tests.support.procs import descendants, end_probes, start_time
from tests.support.samples import sample
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
ENV = dict(
    os.environ, PYTHONPATH=str(REPO), GPUTUI_DEMO="fresh"
)  # made at import: conftest's fixture is later
# Writes a plan (no outcome), says so, then waits on its stdin: a run that is still going.
WRITER = r"""
import sys
from gputui.kill.auditlog import ActionLog
from gputui.kill.plan import PlanOptions, plan_for_gpus
from tests.support.samples import sample

log = ActionLog(sys.argv[1], operator="t")
log.write_plan(plan_for_gpus(sample(), [0], host="h", options=PlanOptions(operator="t", plan_id=sys.argv[2])))
print("planned", flush=True)
sys.stdin.read()
"""


def gputui(*argv: str) -> subprocess.CompletedProcess[str]:
    return run_gputui(*argv, env=ENV, timeout=120)


def reported(log: Path, action: str) -> int:
    return sum(1 for r in read_records(log)[0] if r["kind"] == "reported" and r["action"] == action)


def test_a_clean_still_running_is_not_reported_by_another_and_is_reported_once_after_a_sigkill(tmp_path):
    log = tmp_path / "actions.jsonl"
    # The first clean: GPU 3 of demo-a runs a job that ignores SIGTERM; with a 60 s TERM timeout
    # the plan waits there, mid-action, until the test kills it.
    first = subprocess.Popen(
        [sys.executable, "-m", "gputui", "clean", "--demo", "demo-a:3", "--yes", "--term-timeout", "60",
         "--log", str(log)],
        env=ENV, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    started: list[tuple[int, int | None]] = []
    try:

        def signalled() -> bool:
            records = read_records(log)[0]
            return any(r.get("stage") == "signal" and r.get("result") == "sent" for r in records)

        assert wait_until(signalled, 90), "the first clean sent no signal"
        [action] = {r["action"] for r in read_records(log)[0] if r["kind"] == "plan"}
        # The second clean, on another host, sharing the log, while the first is mid-plan.
        second = gputui("clean", "--demo", "demo-b:3", "--yes", "--log", str(log))
        assert "Traceback" not in second.stderr, second.stderr
        assert action not in second.stderr and "WARNING" not in second.stderr, second.stderr
        ends = {r["action"] for r in read_records(log)[0] if r["kind"] == "done" and r["host"] == "demo-b"}
        assert len(ends) == 1 and action not in ends  # the second ran a plan of its own, to its end
        assert reported(log, action) == 0
        assert first.poll() is None  # still mid-plan: nothing reported it
        started = [(pid, start_time(pid)) for pid in descendants(first.pid)]
        first.send_signal(signal.SIGKILL)  # our own child, not yet reaped: its PID is still ours
    finally:
        if first.poll() is None:
            first.kill()
        first.wait()
        for stream in (first.stdout, first.stderr):
            if stream is not None:
                stream.close()
        end_probes(started)  # the probes outlive their app: ended by PID and start time
    third = gputui("clean", "--demo", "demo-b:3", "--dry-run", "--log", str(log))
    assert third.returncode == 0, third.stderr
    assert third.stderr.count(f"WARNING: action {action} on demo-a") == 1, third.stderr
    assert reported(log, action) == 1
    fourth = gputui("clean", "--demo", "demo-b:3", "--dry-run", "--log", str(log))
    assert fourth.returncode == 0 and action not in fourth.stderr, fourth.stderr
    assert reported(log, action) == 1


# -- the rule, piece by piece ------------------------------------------------------------------------


class Writer:
    """A child process that wrote a plan and waits: alive until `kill`, reaped by `reap`."""

    def __init__(self, log: Path, action: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(log), action],
            env=ENV,
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line == b"planned\n", self.proc.stderr.read() if self.proc.stderr else line

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)  # our own child, not yet reaped

    def reap(self) -> None:
        self.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def _state(pid: int) -> str:
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    return raw[raw.rindex(b")") + 2 :].split()[0].decode()


def test_every_record_names_the_process_that_wrote_it(tmp_path):
    log = tmp_path / "actions.jsonl"
    with ActionLog(log, operator="t") as audit:
        audit.write_plan(
            plan_for_gpus(sample(), [0], host="h", options=PlanOptions(operator="t", plan_id="p"))
        )
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    for record in read_records(log)[0]:
        assert (record["owner_pid"], record["owner_start"], record["owner_boot"]) == (
            os.getpid(),
            start_time(os.getpid()),
            boot,
        )


def test_a_plan_is_unfinished_once_its_writer_is_gone_a_zombie_included(tmp_path):
    log = tmp_path / "actions.jsonl"
    writer = Writer(log, "live")
    try:
        assert unfinished(log) == []  # still running in its own process
        writer.kill()
        assert wait_until(lambda: _state(writer.proc.pid) == "Z", 30)
        # Killed but not reaped: the PID and start time still name it, but it runs nothing.
        assert [u.action for u in unfinished(log)] == ["live"]
    finally:
        writer.reap()
    assert [u.action for u in unfinished(log)] == ["live"]


def forged(log: Path, action: str, **owner: Any) -> None:
    """A plan and an intent as another process would have written them, with `owner` fields."""
    with log.open("a") as f:
        for kind in ("plan", "intent"):
            record = {"v": 1, "kind": kind, "action": action, "time": 1.0, "host": "h", "pid": 7, **owner}
            f.write(json.dumps(record) + "\n")


def test_a_reused_pid_another_boot_or_an_old_record_does_not_keep_a_plan_running(tmp_path):
    log = tmp_path / "actions.jsonl"
    writer = Writer(tmp_path / "other.jsonl", "x")  # a live process whose PID the records name
    try:
        pid, start = writer.proc.pid, start_time(writer.proc.pid)
        assert start is not None
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        forged(log, "alive", owner_pid=pid, owner_start=start, owner_boot=boot)
        forged(log, "reused", owner_pid=pid, owner_start=start + 1, owner_boot=boot)
        forged(log, "rebooted", owner_pid=pid, owner_start=start, owner_boot="another-boot")
        forged(log, "old")  # written before records named their process: judged as before
        forged(log, "garbled", owner_pid="x", owner_start=[1], owner_boot=3)
        assert [u.action for u in unfinished(log)] == ["reused", "rebooted", "old", "garbled"]
    finally:
        writer.reap()
    assert [u.action for u in unfinished(log)] == ["alive", "reused", "rebooted", "old", "garbled"]


def test_a_still_running_plan_is_neither_reported_nor_acknowledged(tmp_path):
    """What the second run does with what `unfinished` leaves out: nothing, so the plan is reported
    once its process is gone, whenever that is."""
    log = tmp_path / "actions.jsonl"
    writer = Writer(log, "live")
    try:
        dry = gputui("clean", "--demo", "demo-b:3", "--dry-run", "--log", str(log))
        assert dry.returncode == 0 and "live" not in dry.stderr, dry.stderr
        assert reported(log, "live") == 0
    finally:
        writer.reap()
    again = gputui("clean", "--demo", "demo-b:3", "--dry-run", "--log", str(log))
    assert again.returncode == 0 and again.stderr.count("WARNING: action live on h") == 1, again.stderr
    assert reported(log, "live") == 1

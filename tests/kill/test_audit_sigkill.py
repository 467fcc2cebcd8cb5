"""The audit log under SIGKILL: 60 writers killed at random moments, none leaves a lost or glued line.

Each trial starts a real writer process (the real ActionLog and the records a plan writes: the plan,
its intents, events, verdicts, done; each line fsync'd) and SIGKILLs it after a random delay, seeded
so a failure can be replayed. Then: every line but possibly a torn last one parses; an action without
its `done` is reported as unfinished with every intent that has no verdict; the next writer ends the
torn line before its own, so nothing glues to it. The end-to-end version (a real `gputui clean` killed
mid-action) is tests/cli/test_clean.py's SIGKILL test.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputui.kill.auditlog import read_records, unfinished

REPO = Path(__file__).resolve().parents[2]
TRIALS = 60
WRITER = r"""
import sys
from gputui.kill.auditlog import ActionLog
from gputui.model import Event
from gputui.kill.plan import PlanOptions, plan_for_gpus
from tests.support.samples import sample

log = ActionLog(sys.argv[1], operator="t")
plan = plan_for_gpus(sample(), [0, 1], host="h", options=PlanOptions(operator="t", plan_id=sys.argv[2]))
log.write_plan(plan)
print("planned", flush=True)
for round_ in range(40):
    for t in plan.signalled:
        log.write_event("h", Event(plan=plan.id, time=0.0, stage="signal", result="sent", pid=t.pid, signal="SIGTERM",
                             message="SIGTERM -> %d %s" % (t.pid, "x" * 200)))
for t in plan.signalled:
    log.write_event("h", Event(plan=plan.id, time=0.0, stage="verdict", result="exited", pid=t.pid, data={"result": "exited"}))
log.write_event("h", Event(plan=plan.id, time=0.0, stage="done", result="clean", data={"ok": True}))
print("done", flush=True)
"""


@pytest.mark.parametrize("seed", range(TRIALS))
def test_a_writer_killed_at_a_random_moment_loses_nothing_that_was_written(tmp_path, seed):
    rng = random.Random(seed)
    log = tmp_path / "actions.jsonl"
    if seed % 3 == 0:  # a third of the trials start from a log an earlier kill left torn
        log.write_bytes(b'{"v":1,"kind":"event","action":"old","time":1.0}\n{"v":1,"kind":"ev')
    plan_id = f"k{seed}"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(log), plan_id],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"planned\n", proc.stderr.read() if proc.stderr else b""
        time.sleep(rng.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)  # our own child, not yet reaped: its PID is still ours
    finally:
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    raw = log.read_bytes()
    lines = raw.split(b"\n")
    torn = [line for line in lines[:-1] if line and not _parses(line)]
    assert torn == ([b'{"v":1,"kind":"ev'] if seed % 3 == 0 else []), torn  # only the planted one, ended
    records, bad = read_records(log)
    assert bad <= 1 + (seed % 3 == 0)  # at most this kill's torn last line, and the planted one
    mine = [r for r in records if r["action"] == plan_id]
    kinds = [r["kind"] for r in mine]
    assert kinds[0] == "plan" and kinds.count("intent") == 3
    finished = "done" in kinds
    lost = {u.action: u for u in unfinished(log)}
    if finished:
        assert plan_id not in lost
    else:
        settled = {r["pid"] for r in mine if r["kind"] == "verdict"}
        assert {i.pid for i in lost[plan_id].pending} == {
            r["pid"] for r in mine if r["kind"] == "intent"
        } - settled
    # The next writer ends whatever this kill tore before its first line.
    from gputui.kill.auditlog import ActionLog

    with ActionLog(log, operator="t") as again:
        again.acknowledge(list(lost.values()))
    records, bad_after = read_records(log)
    assert bad_after == bad and records[-1]["kind"] in (
        "reported",
        "done",
        "event",
        "verdict",
        "intent",
        "plan",
    )
    assert all(r["action"] != plan_id for r in unfinished(log))


def _parses(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True

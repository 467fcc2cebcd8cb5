"""The audit log (gputui/actionlog.py): write-ahead intents, one fsync'd line per record, torn lines."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from gputui.actionlog import FIELDS, ActionLog, default_log_path, read_records, unfinished
from gputui.model import Event
from gputui.plan import PlanOptions, plan_for_gpus
from tests.test_plan import sample

OPTS = PlanOptions(operator="alice", plan_id="act1")


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def event(stage: str, result: str | None, pid: int | None = None, **data: object) -> Event:
    return Event(plan="act1", time=1.5, stage=stage, result=result, pid=pid, start_time=1100 if pid else None,
                 signal="SIGTERM" if stage == "signal" else None, message=f"{stage} {result}", data=dict(data))  # fmt: skip


def test_the_default_path_is_in_the_user_state_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_log_path() == tmp_path / "gputui" / "actions.jsonl"


def test_intents_are_on_disk_before_anything_is_sent(tmp_path):
    path = tmp_path / "state" / "actions.jsonl"
    plan = plan_for_gpus(sample(), [0], host="gpu-a", options=OPTS)
    with ActionLog(path, operator="alice") as log:
        log.plan(plan)
        # Nothing buffered: a reader sees every line right now (each one is fsync'd).
        records = lines(path)
    assert [r["kind"] for r in records] == ["plan", "intent", "intent"]
    first = records[1]
    assert set(FIELDS) | {"v", "kind", "action", "time", "at"} <= set(first)
    assert first["action"] == "act1" and first["operator"] == "alice" and first["host"] == "gpu-a"
    assert (first["pid"], first["start_time"], first["user"]) == (100, 1100, "alice")
    assert first["command"] == ["python", "job100.py"] and first["signal"] == "SIGTERM"
    assert first["stage"] == "plan" and first["result"] == "intent"
    assert first["memory_before"] == {"0": 10 << 30}
    assert records[0]["plan"]["targets"][0]["pid"] == 100
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert [u.action for u in unfinished(path)] == ["act1"]


def test_events_verdicts_and_done_finish_an_action(tmp_path):
    path = tmp_path / "actions.jsonl"
    plan = plan_for_gpus(sample(), [0], host="gpu-a", options=OPTS)
    log = ActionLog(path, operator="alice")
    log.plan(plan)
    log.event("gpu-a", event("signal", "sent", 100))
    log.event("gpu-a", event("verdict", "exited", 100, exited_ms=12.0))
    [pending] = unfinished(path)
    assert [i.pid for i in pending.pending] == [108]  # 100 has its verdict, 108 not yet
    assert pending.last_stage == "verdict"
    gpus = {"0": {"result": "clean", "memory_before": 10 << 30, "memory_after": 0}}
    log.event(
        "gpu-a", event("done", "clean", ok=True, gpus=gpus, memory_before={"0": 1}, memory_after={"0": 0})
    )
    log.close()
    records = lines(path)
    signal = records[3]
    # The probe's event had no user/command: the plan's are used.
    assert (
        signal["kind"] == "event"
        and signal["user"] == "alice"
        and signal["command"] == ["python", "job100.py"]
    )
    assert signal["signal"] == "SIGTERM" and signal["stage"] == "signal" and signal["result"] == "sent"
    assert records[4]["kind"] == "verdict" and records[4]["data"]["exited_ms"] == 12.0
    done = records[5]
    assert done["kind"] == "done" and done["ok"] is True and done["gpus"] == gpus
    assert done["memory_before"] == {"0": 1} and done["memory_after"] == {"0": 0}
    assert unfinished(path) == []


def test_an_outcome_unknown_is_recorded_and_reported_at_the_next_start(tmp_path):
    """The link broke (or the probe went silent) mid-plan: nobody knows what happened, so the next
    start must say so, once, like an action that never got a `done` line."""
    path = tmp_path / "actions.jsonl"
    with ActionLog(path) as log:
        log.plan(plan_for_gpus(sample(), [0], host="gpu-a", options=OPTS))
        log.event("gpu-a", event("done", "outcome-unknown", ok=False))
    assert lines(path)[-1]["result"] == "outcome-unknown"
    [lost] = unfinished(path)
    assert lost.host == "gpu-a" and lost.last_stage == "done"
    with ActionLog(path) as log:
        log.acknowledge([lost])
    assert unfinished(path) == []


def test_a_torn_last_line_is_tolerated_and_repaired_on_append(tmp_path):
    path = tmp_path / "actions.jsonl"
    with ActionLog(path, operator="alice") as log:
        log.plan(plan_for_gpus(sample(), [0], host="gpu-a", options=OPTS))
    with open(path, "ab") as f:
        f.write(b'{"v":1,"kind":"event","action":"act1","pid":100,"sta')  # a crash mid-write
    records, bad = read_records(path)
    assert len(records) == 3 and bad == 1
    [lost] = unfinished(path)
    assert [i.pid for i in lost.pending] == [100, 108]
    assert "act1" in lost.describe() and "gpu-a" in lost.describe() and "100, 108" in lost.describe()
    # The next writer ends the torn line first, so its own record stays whole.
    with ActionLog(path, operator="bob") as log:
        log.acknowledge([lost])
    records, bad = read_records(path)
    assert bad == 1 and records[-1]["kind"] == "reported" and records[-1]["operator"] == "bob"
    assert unfinished(path) == []  # reported once, not at every start


def test_garbage_and_missing_files(tmp_path):
    assert read_records(tmp_path / "nothing.jsonl") == ([], 0)
    assert unfinished(tmp_path / "nothing.jsonl") == []
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b'not json\n[1,2]\n{"no":"action"}\n\n{"action":"x","kind":"event"}\n')
    records, bad = read_records(path)
    assert bad == 3 and records == [{"action": "x", "kind": "event"}]
    assert unfinished(path) == []  # no intent, nothing to report


def test_untrusted_text_is_stored_escaped(tmp_path):
    path = tmp_path / "actions.jsonl"
    with ActionLog(path) as log:
        log.write("event", "a", message="evil \x1b[2J name\n", command=["\x07bell"])
    raw = path.read_bytes()
    assert b"\x1b" not in raw and b"\x07" not in raw and raw.count(b"\n") == 1
    assert lines(path)[0]["message"] == "evil \x1b[2J name\n"

"""The audit log (gputui/kill/auditlog.py): write-ahead intents, one fsync'd line per record, torn lines."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from gputui.kill import auditlog as actionlog
from gputui.kill.auditlog import (
    FIELDS,
    ActionLog,
    AuditError,
    UnsafeLog,
    default_log_path,
    read_records,
    unfinished,
)
from gputui.kill.plan import PlanOptions, plan_for_gpus
from gputui.model import Event
from tests.support.samples import sample

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
        log.write_plan(plan)
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
    log.write_plan(plan)
    log.write_event("gpu-a", event("signal", "sent", 100))
    log.write_event("gpu-a", event("verdict", "exited", 100, exited_ms=12.0))
    [pending] = unfinished(path)
    assert [i.pid for i in pending.pending] == [108]  # 100 has its verdict, 108 not yet
    assert pending.last_stage == "verdict"
    gpus = {"0": {"result": "clean", "memory_before": 10 << 30, "memory_after": 0}}
    log.write_event(
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
        log.write_plan(plan_for_gpus(sample(), [0], host="gpu-a", options=OPTS))
        log.write_event("gpu-a", event("done", "outcome-unknown", ok=False))
    assert lines(path)[-1]["result"] == "outcome-unknown"
    [lost] = unfinished(path)
    assert lost.host == "gpu-a" and lost.last_stage == "done"
    with ActionLog(path) as log:
        log.acknowledge([lost])
    assert unfinished(path) == []


def test_a_torn_last_line_is_tolerated_and_repaired_on_append(tmp_path):
    path = tmp_path / "actions.jsonl"
    with ActionLog(path, operator="alice") as log:
        log.write_plan(plan_for_gpus(sample(), [0], host="gpu-a", options=OPTS))
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


# -- a bad day ------------------------------------------------------------------------------------


def plan_of(n: int = 1) -> Any:
    return plan_for_gpus(sample(), [0], host="gpu-a", options=OPTS)


def test_a_symlink_where_the_log_should_be_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("")
    link = tmp_path / "actions.jsonl"
    link.symlink_to(target)
    with ActionLog(link) as log, pytest.raises(AuditError, match="is a symbolic link: refused"):
        log.write_plan(plan_of())
    assert target.read_text() == ""


def test_a_directory_or_a_hard_link_is_refused(tmp_path):
    (tmp_path / "dir.jsonl").mkdir()
    with ActionLog(tmp_path / "dir.jsonl") as log, pytest.raises(UnsafeLog, match="is not a regular file"):
        log.write_plan(plan_of())
    first = tmp_path / "a.jsonl"
    first.write_text("")
    os.link(first, tmp_path / "b.jsonl")
    with ActionLog(first) as log, pytest.raises(AuditError, match="has 2 links: refused"):
        log.write_plan(plan_of())


@pytest.mark.skipif(os.geteuid() != 0, reason="the ownership rule is root's")
def test_root_refuses_a_log_that_another_user_owns(tmp_path):
    path = tmp_path / "actions.jsonl"
    path.write_text("")
    os.chown(path, 65534, 65534)
    with ActionLog(path) as log, pytest.raises(AuditError, match="belongs to uid 65534, not root"):
        log.write_plan(plan_of())


def test_not_enough_room_is_refused_before_anything_is_sent(tmp_path, monkeypatch):
    monkeypatch.setattr(actionlog, "ROOM_BASE", 1 << 62)  # more than any disk has
    path = tmp_path / "actions.jsonl"
    with ActionLog(path) as log, pytest.raises(AuditError, match="KiB free"):
        log.write_plan(plan_of())
    assert not path.exists() or path.read_text() == ""


@pytest.mark.parametrize(
    ("where", "says"), [("under-a-file", "plain is not a directory"), ("under-proc", "No such file")]
)
def test_a_log_whose_directory_cannot_be_made_says_so_not_the_free_space(tmp_path, where, says):
    """The room check looked at the free space of the nearest directory that exists (/proc: 0 KiB)
    and blamed it; the log's directory, which cannot be made, is the problem: the check says that.
    Nothing is written under /proc (a directory cannot be made there)."""
    plain = tmp_path / "plain"
    plain.write_text("")
    path = plain / "sub" / "actions.jsonl" if where == "under-a-file" else Path("/proc/no-such-gputui/x/y")
    with ActionLog(path) as log, pytest.raises(AuditError) as caught:
        log.ensure_room(1)
    assert says in str(caught.value) and "KiB free" not in str(caught.value), caught.value
    assert plain.read_text() == ""


def test_a_short_write_is_continued_not_torn(tmp_path, monkeypatch):
    """os.write may write less than asked (a signal, a nearly full disk): the rest follows."""
    real = os.write
    calls = []

    def short(fd: int, data: Any) -> int:
        calls.append(len(data))
        return real(fd, bytes(data[: max(1, len(data) // 3)]))

    path = tmp_path / "actions.jsonl"
    with ActionLog(path) as log:
        monkeypatch.setattr(actionlog.os, "write", short)
        log.write_plan(plan_of())
        monkeypatch.setattr(actionlog.os, "write", real)
    assert len(calls) > 3
    records, bad = read_records(path)
    assert bad == 0 and [r["kind"] for r in records][:2] == ["plan", "intent"]


def test_a_failed_write_is_an_audit_error_and_the_next_line_is_not_glued_to_the_torn_one(
    tmp_path, monkeypatch
):
    real = os.write
    path = tmp_path / "actions.jsonl"
    with ActionLog(path) as log:
        log.write_plan(plan_of())

        def full(fd: int, data: Any) -> int:
            written = real(fd, bytes(data[:10]))  # ten bytes make it, then the disk is full
            monkeypatch.setattr(actionlog.os, "write", enospc)
            return written

        def enospc(fd: int, data: Any) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(actionlog.os, "write", full)
        with pytest.raises(AuditError, match="cannot write: No space left on device"):
            log.write_event("gpu-a", event("signal", "sent", 100))
        monkeypatch.setattr(actionlog.os, "write", real)
        log.write_event("gpu-a", event("done", "clean", ok=True))
    records, bad = read_records(path)
    assert bad == 1  # the torn line, counted, never fatal
    assert records[-1]["kind"] == "done"


def test_records_with_wrong_types_never_hide_the_real_unfinished_actions(tmp_path):
    """Issue 13 #7: one well-formed but wrong record (`"pid": "abc"`) crashed every later start."""
    path = tmp_path / "actions.jsonl"
    with ActionLog(path) as log:
        log.write_plan(plan_of())  # a real action, never finished
    bad_lines = [
        {"v": 1, "kind": "intent", "action": "forged", "pid": "abc", "time": "yesterday"},
        {"v": 1, "kind": ["intent"], "action": "forged2", "pid": [1], "time": None},
        {"v": 1, "kind": "plan", "action": "forged3", "host": {"x": 1}, "time": float("nan")},
        {"v": 1, "kind": "verdict", "action": "act1", "pid": {"a": 1}},
    ]
    with path.open("a") as f:
        for line in bad_lines:
            f.write(json.dumps(line) + "\n")
    lost = {u.action: u for u in unfinished(path)}
    assert "act1" in lost and [i.pid for i in lost["act1"].pending] == [100, 108]
    assert lost["forged3"].host is None and lost["forged3"].time == 0.0

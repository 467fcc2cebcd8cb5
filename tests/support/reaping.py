"""Running a plan on the reaper (gputui/probe/run/reaper.py) in-process, as the probe's loop does, and
reading its events: a target record, a plan around the targets, the events of one stage or one
process, the verdicts, the signals that were sent."""

from __future__ import annotations

import uuid
from typing import Any

from gputui.probe.run.reaper import execute


def target(pid: int, start: int | None, gpus: list[int], reason: str = "test") -> dict[str, Any]:
    return {"pid": pid, "start_time": start, "reason": reason, "gpus": gpus}


def make_plan(targets: list[dict[str, Any]], gpus: list[int], **options: Any) -> dict[str, Any]:
    plan = {
        "type": "plan",
        "v": 1,
        "id": "t-" + uuid.uuid4().hex[:8],
        "operator": "tester",
        "scope": "gpus" if gpus else "processes",
        "targets": targets,
        "sweep": [],
        "gpus": gpus,
        "include_protected": [],
        "signals": ["SIGTERM"],
        "term_timeout": 5.0,
        "verify_timeout": 5.0,
    }
    plan.update(options)
    return plan


def run(probe: Any, targets: list[dict[str, Any]], gpus: list[int], **options: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    execute(probe, make_plan(targets, gpus, **options), events.append)
    return events


def of(events: list[dict[str, Any]], stage: str, pid: int | None = None) -> list[dict[str, Any]]:
    return [e for e in events if e.get("stage") == stage and (pid is None or e.get("pid") == pid)]


def verdict(events: list[dict[str, Any]], pid: int) -> dict[str, Any]:
    [found] = [e for e in of(events, "verdict", pid) if e["gpu"] is None]
    return found


def gpu_verdict(events: list[dict[str, Any]], index: int) -> dict[str, Any]:
    [found] = [e for e in of(events, "verdict") if e["gpu"] == index]
    return found


def done(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert events[-1]["stage"] == "done", events[-1]
    return events[-1]


def signals_to(events: list[dict[str, Any]], pid: int) -> list[str]:
    return [
        e["signal"]
        for e in events
        if e["stage"] in ("signal", "escalate") and e["pid"] == pid and e["result"] == "sent"
    ]

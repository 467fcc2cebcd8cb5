"""Operations, headless, over a real sim host (a probe subprocess with its simulated GPUs, reached
through the local transport): plan, run and verdict with the audit log written ahead; the typed
not-sent verdict when the log cannot take the plan; what an earlier run left unfinished, reported
and acknowledged once. Every sim process ends with its probe when the fleet stops.
"""

from __future__ import annotations

import errno
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gputui import api
from gputui.kill.auditlog import ActionLog, AuditError, UnsafeLog, read_records
from gputui.kill.operate import AUDIT_LOG_ERROR, Operations

HOST = "k"
QUICK = api.KillOptions(term_timeout=1.0, verify_timeout=2.0)  # the demo's GPU 3 holds one that ignores TERM


@pytest.fixture
async def fleet() -> AsyncIterator[api.Fleet]:
    """A fresh demo host, sampled once; stopped (its probe and sims ended) after the test."""
    built = api.fleet([api.HostSpec(name=HOST, reader="sim", sim_scenario="demo", sim_seed=7)], interval=0.5)
    try:
        [view] = await api.sample(built, timeout=60)
        assert view.sample is not None, view.detail
        yield built
    finally:
        await built.stop()


def spy_on_sends(fleet: api.Fleet, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What the fleet is asked to send to a probe (plans, resets), in order."""
    sent: list[dict[str, Any]] = []
    real = fleet.execute

    def execute(host: str, record: dict[str, Any], **kwargs: Any) -> Any:
        sent.append(record)
        return real(host, record, **kwargs)

    monkeypatch.setattr(fleet, "execute", execute)
    return sent


async def test_a_plan_is_written_ahead_run_on_the_sim_host_and_ends_in_its_verdict(
    fleet: api.Fleet, tmp_path: Path
) -> None:
    log = tmp_path / "actions.jsonl"
    ops = api.operations(fleet, log, kill=QUICK, operator="t")
    planned = await ops.plan([api.Request(HOST, "gpus", gpus=(3,))])
    assert planned.problems == []
    [plan] = planned.plans
    assert plan.signalled and plan.gpu_indexes == (3,)
    seen: list[tuple[str, str]] = []
    [verdict] = await ops.run_all(planned.plans, lambda p, e: seen.append((p.id, e.stage)))
    assert isinstance(verdict, api.PlanVerdict)
    assert verdict.ok and verdict.plan == plan.id, verdict
    assert api.status_of(verdict) == ("clean", None)
    assert [g.index for g in verdict.gpus] == [3] and verdict.gpus[0].result == "clean"
    assert seen and seen[-1] == (plan.id, "done") and {i for i, _ in seen} == {plan.id}
    assert ops.running == {}
    # Written ahead: the plan and an intent per process before the first event, the verdict last.
    records, bad = read_records(log)
    assert bad == 0
    kinds = [r["kind"] for r in records if r["action"] == plan.id]
    assert kinds[0] == "plan" and kinds[-1] == "done", kinds
    intents = [r["pid"] for r in records if r["kind"] == "intent"]
    assert intents == [t.pid for t in plan.signalled]
    assert kinds.index("event") > len(intents)
    assert records[-1]["ok"] is True
    assert (await ops.report_unfinished()).actions == ()  # finished: nothing to report


async def test_a_log_that_cannot_take_the_plan_gives_a_not_sent_verdict_and_sends_nothing(
    fleet: api.Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")  # the log's directory is a file: opening it fails, even as root
    log = blocker / "actions.jsonl"
    ops = api.operations(fleet, log, kill=QUICK, operator="t")
    planned = await ops.plan([api.Request(HOST, "gpus", gpus=(3,))])
    [plan] = planned.plans
    sent = spy_on_sends(fleet, monkeypatch)
    events: list[str] = []
    [verdict] = await ops.run_all([plan], lambda p, e: events.append(e.stage))
    assert isinstance(verdict, api.PlanVerdict)  # a verdict, not an exception in the list
    assert (verdict.result, verdict.ok, verdict.error, verdict.plan) == (
        "not-sent",
        False,
        AUDIT_LOG_ERROR,
        plan.id,
    )
    assert verdict.message.startswith(f"audit log {log}: ") and verdict.message.endswith("; nothing was sent")
    assert api.status_of(verdict) == ("not-sent", verdict.message)
    assert sent == [] and events == [] and ops.running == {}
    # The reset ladder is written ahead the same way.
    reset = await ops.reset(HOST, 3)
    assert (reset.result, reset.ok, reset.error) == ("not-sent", False, AUDIT_LOG_ERROR)
    assert reset.message.endswith("; nothing was sent")
    assert sent == []


async def test_a_full_disk_at_the_write_ahead_record_is_said_in_the_verdict(
    fleet: api.Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log's own words (`audit log PATH: cannot write: ...`) are not said twice."""
    log = tmp_path / "actions.jsonl"
    ops = api.operations(fleet, log, kill=QUICK, operator="t")
    [plan] = (await ops.plan([api.Request(HOST, "gpus", gpus=(3,))])).plans
    sent = spy_on_sends(fleet, monkeypatch)

    def full(fd: int, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:  # the log's writes only: no await runs while it is in place
        m.setattr("gputui.kill.auditlog.os.write", full)
        verdict = await ops.run(plan)
    assert verdict.message == f"audit log {log}: cannot write: No space left on device; nothing was sent"
    assert verdict.result == "not-sent" and sent == []


async def test_an_earlier_runs_unfinished_plan_is_reported_and_acknowledged_once(
    fleet: api.Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "actions.jsonl"
    ops = api.operations(fleet, log, kill=QUICK, operator="t")
    [plan] = (await ops.plan([api.Request(HOST, "gpus", gpus=(3,))])).plans
    with ActionLog(log, operator="t") as earlier:
        earlier.write_plan(plan)  # written ahead, then that run "died": no event, no done

    # The acknowledgement cannot be written: the actions are shown, and reported again next time.
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AuditError(errno.ENOSPC, f"audit log {log}: cannot write: No space left on device")

    with monkeypatch.context() as m:
        m.setattr(ops.audit, "write", refuse)
        unwritten = await ops.report_unfinished()
    assert [u.action for u in unwritten.actions] == [plan.id]
    assert unwritten.read_problem is None
    assert (
        unwritten.write_problem
        == f"cannot write the audit log {log}: audit log {log}: cannot write: No space left on device"
    )

    report = await ops.report_unfinished()
    [lost] = report.actions
    assert lost.action == plan.id and lost.host == HOST
    assert [i.pid for i in lost.pending] == [t.pid for t in plan.signalled]
    assert report.read_problem is None and report.write_problem is None
    assert [r["kind"] for r in read_records(log)[0]].count("reported") == 1
    # Once: neither this run nor the next one reports it again.
    assert (await ops.report_unfinished()).actions == ()
    again = Operations.open(fleet, log, operator="t")
    assert (await again.report_unfinished()).actions == ()


async def test_a_log_that_cannot_be_read_is_a_problem_and_an_unsafe_one_refused_by_default(
    tmp_path: Path,
) -> None:
    """No host needed: a start reads the log before it starts the fleet."""
    fleet = api.fleet([])
    elsewhere = tmp_path / "real.jsonl"
    elsewhere.write_text("")
    link = tmp_path / "actions.jsonl"
    link.symlink_to(elsewhere)
    ops = api.operations(fleet, link, operator="t")
    with pytest.raises(UnsafeLog):
        await ops.report_unfinished()  # the CLI's usage error
    report = await ops.report_unfinished(refuse_unsafe=False)  # the dashboard's warning
    assert report.actions == () and report.write_problem is None
    assert report.read_problem is not None
    assert report.read_problem.startswith(f"cannot read the audit log {link}: ")
    assert "symbolic link" in report.read_problem

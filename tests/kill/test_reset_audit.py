"""A reset's audit log on a bad day: a log that fails in the middle of the ladder is a verdict, as
it is for a plan (tests/kill/test_audit_bad_day.py), never an exception out of Operations.reset.
The app cancels the ladder (the probe takes no further step) and the verdict says the log failed.
On the sim's "preflight" host, whose GPU 1 holds memory no process does."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from gputui.api import HostSpec  # the API keeps its name wherever the config moves
from gputui.kill.auditlog import ActionLog, read_records
from gputui.kill.auditpath import audit_error
from gputui.kill.operate import AUDIT_LOG_ERROR, Operations
from gputui.model import Event
from tests.support.commands import fleet_of

HOST = "p"


@pytest.mark.parametrize("fail_at", [1, 2, 3, 4, 5, 6])
async def test_a_log_that_fails_during_a_reset_cancels_it_with_a_verdict(
    tmp_path: Path, fail_at: int
) -> None:
    log = tmp_path / "a.jsonl"
    fleet = fleet_of([HostSpec(name=HOST, reader="sim", sim_scenario="preflight", sim_seed=9)])
    fleet.start()
    audit = ActionLog(log, operator="t")
    real = audit._write_all
    writes = 0
    seen: list[Event] = []

    def write(fd: int, data: bytes) -> None:
        """The log's writes fail from the `fail_at`-th one on, as on a full disk."""
        nonlocal writes
        writes += 1
        if writes >= fail_at:
            raise audit_error(log, OSError(errno.ENOSPC, "No space left on device"), "write")
        real(fd, data)

    try:
        await fleet.wait_first_samples(60)
        ops = Operations(fleet, audit, operator="t")
        audit._write_all = write  # type: ignore[method-assign]
        verdict = await ops.reset(HOST, 1, on_event=seen.append)
    finally:
        audit.close()
        await fleet.stop()
    records, torn = read_records(log)
    assert torn == 0, torn  # a write refused whole leaves no half line
    if fail_at == 1:  # the write-ahead record: nothing was sent
        assert verdict.result == "not-sent" and verdict.error == AUDIT_LOG_ERROR, verdict
        assert seen == []
        return
    assert not verdict.ok, verdict
    assert any("audit log" in p or "No space" in p for p in verdict.problems), verdict.problems
    assert any("cancelled" in p for p in verdict.problems), verdict.problems
    # What reached the log before it failed is whole: the intent, then events in order.
    assert [r["kind"] for r in records][:1] == ["plan"], records
    assert len(records) == fail_at - 1, records

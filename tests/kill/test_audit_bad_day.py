"""The audit log on a bad day, end to end: a real sim probe, real plans, a log that fails.

What is not on disk must not happen. A write that fails before the plan is sent means nothing is sent;
one that fails mid-plan cancels the plan: the app tells the probe, which sends no further signal, and
the verdict says so. Failures are injected at every point of a run (the n-th write of the log fails
with ENOSPC), and, where this machine lets a test mount one, on a real small tmpfs filled to each
level. Every process signalled belongs to the test's own sim probe, which ends them all when the
fleet stops.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.config.file import HostSpec
from gputui.kill import auditlog as actionlog
from gputui.kill.auditlog import ActionLog, read_records
from gputui.kill.auditpath import audit_error
from gputui.kill.operate import AUDIT_LOG_ERROR, Operations, Request
from gputui.kill.plan import KillOptions
from gputui.model import Event, PlanVerdict
from tests.support.commands import fleet_of

HOST = "d"


async def run_once(log: Path, fail_at: int | None) -> tuple[PlanVerdict, list[Event], int | None]:
    """Free GPU 3 of a fresh demo host (a server that ignores SIGTERM, and a zombie's parent), with
    the log's `fail_at`-th write failing (and every one after it). Returns (the verdict: a not-sent
    one when the log could not take the plan, the events as the probe sent them, the index in those
    events of the first event after the failure)."""
    fleet = fleet_of([HostSpec(name=HOST, reader="sim", sim_scenario="demo", sim_seed=5)], interval=0.5)
    fleet.start()
    audit = ActionLog(log, operator="t")
    real = audit._write_all
    writes = 0
    failed_after: list[int] = []
    seen: list[Event] = []

    def write(fd: int, data: bytes) -> None:
        """The log's own writes, and only those, fail from the `fail_at`-th one on (as a full disk)."""
        nonlocal writes
        writes += 1
        if fail_at is not None and writes >= fail_at:
            if not failed_after:
                failed_after.append(len(seen))
            raise audit_error(log, OSError(errno.ENOSPC, "No space left on device"), "write")
        real(fd, data)

    try:
        await fleet.wait_first_samples(60)
        ops = Operations(fleet, audit, kill=KillOptions(term_timeout=1.0, verify_timeout=2.0), operator="t")
        planned = await ops.plan([Request(HOST, "gpus", gpus=(3,))])
        [plan] = planned.plans
        audit._write_all = write  # type: ignore[method-assign]
        verdict = await ops.run(plan, seen.append)
        return verdict, seen, failed_after[0] if failed_after else None
    finally:
        audit.close()
        await fleet.stop()


def not_logged(verdict: PlanVerdict) -> bool:
    """The verdict of a plan the log could not take before anything was sent."""
    return verdict.result == "not-sent" and verdict.error == AUDIT_LOG_ERROR


@pytest.mark.parametrize("fail_at", [1, 2, 3, 4, 6, 9, 14, 20])
async def test_a_log_that_fails_at_any_point_never_lets_a_signal_go_unrecorded(tmp_path, fail_at):
    log = tmp_path / "actions.jsonl"
    verdict, seen, failed_after = await run_once(log, fail_at)
    records, _ = read_records(log)
    intents = {r["pid"] for r in records if r["kind"] == "intent"}
    sent = [
        (i, e.pid) for i, e in enumerate(seen) if e.stage in ("signal", "escalate") and e.result == "sent"
    ]
    if not_logged(verdict):
        # The plan's own records did not all land: nothing was sent.
        assert seen == [] and not verdict.ok and "nothing was sent" in verdict.message
        assert "No space left" in verdict.message
        return
    if failed_after is None:
        assert verdict.ok  # the failure point lies past the run's last write
        return
    assert not verdict.ok and any("the plan was cancelled" in p for p in verdict.problems), verdict
    # Every signal went to a process whose intent is on disk; and after the app's cancel reached
    # the probe, none at all (the cancel is read before every batch of signals).
    assert {pid for _, pid in sent} <= intents
    cancel = next((i for i, e in enumerate(seen) if e.stage == "cancel"), None)
    if cancel is None:
        # The cancel came when the probe had no batch left to start (it was verifying). Between the
        # failed write and the cancel's arrival the probe may finish the one batch it had begun (the
        # app reads its events late on a busy machine): at most that one, each signal's intent on disk.
        late = {seen[i].stage for i, _ in sent if i >= failed_after}
        assert len(late) <= 1, [e.stage for e in seen]
    else:
        assert not [pid for i, pid in sent if i > cancel]
    if failed_after <= next((i for i, e in enumerate(seen) if e.stage == "wait"), len(seen)):
        # It failed before the TERM wait ended: the server that ignores SIGTERM never got the
        # SIGKILL the log could not record.
        assert not any(e.stage == "escalate" and e.result == "sent" for e in seen), [e.message for e in seen]


def test_the_full_run_writes_more_lines_than_the_failure_points_cover(tmp_path):
    """The points above must land before, inside and after the signals: a run writes ~25 lines."""
    import asyncio

    verdict, _, failed = asyncio.run(run_once(tmp_path / "a.jsonl", None))
    assert verdict.ok and failed is None
    lines = len(read_records(tmp_path / "a.jsonl")[0])
    assert lines >= 20, lines


# -- a real small filesystem, filled to each level ------------------------------------------------


@pytest.fixture
def small_tmpfs() -> Iterator[Path]:
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    where = Path(tempfile.mkdtemp(prefix="gputui-tmpfs-"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        where.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)
        where.rmdir()


@pytest.mark.parametrize("room_check", [True, False])
async def test_every_fill_level_of_a_small_disk(small_tmpfs, room_check, monkeypatch):
    """Fill a 1 MiB tmpfs to leave 0, 4, 8, ... KiB free, then run a plan with the log on it. With the
    room check the plan is refused before anything is sent whenever it might not fit; without it
    (the check bypassed, as if another writer filled the disk mid-plan) a real ENOSPC must cancel
    the plan. Either way no line is torn and no signal goes unrecorded."""
    if not room_check:
        monkeypatch.setattr(actionlog, "ROOM_BASE", 0)
        monkeypatch.setattr(actionlog, "ROOM_PER_PROCESS", 0)
    outcomes = []
    for free_kib in (0, 4, 8, 12, 16, 24, 64, 256):
        for item in small_tmpfs.iterdir():
            item.unlink()
        info = os.statvfs(small_tmpfs)
        filler = info.f_bavail * info.f_frsize - free_kib * 1024
        if filler > 0:
            (small_tmpfs / "filler").write_bytes(b"\0" * filler)
        log = small_tmpfs / "actions.jsonl"
        verdict, seen, _ = await run_once(log, None)
        records, bad = read_records(log)
        assert bad <= 1  # at most the one line the full disk cut (it is ended before the next)
        if not_logged(verdict):
            assert seen == []  # refused before anything was sent
            outcomes.append("refused")
            continue
        intents = {r["pid"] for r in records if r["kind"] == "intent"}
        sent = {e.pid for e in seen if e.stage in ("signal", "escalate") and e.result == "sent"}
        assert sent <= intents
        outcomes.append("done" if verdict.ok else "cancelled")
    if room_check:
        assert set(outcomes) <= {"refused", "done"}, outcomes
        assert "refused" in outcomes
    else:
        assert "cancelled" in outcomes or "refused" in outcomes, outcomes

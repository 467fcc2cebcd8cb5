"""Record -> replay -> snapshot round-trips a session of the live demo (issue 22): a real `gputui
record` of both demo hosts while a real `gputui clean` frees demo-a's GPU 0 (its plan is in the
recording, from the audit log they share), ended by Ctrl+C (SIGINT); then `gputui snapshot --replay
--at` names what held GPU 0 before the plan and that nothing of it held it after; then the dashboard
on the recording (Pilot): the plan's events in its action log, and the p, n and + keys moving the
recorded time it shows.

The demo is this test's own (the `live` fixture of tests/cli/conftest.py: a private runtime
directory, `gputui demo stop` and a check that nothing of it is left)."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gputui.recording.format import Entry, RecordingError, RecordingReader, clock_words
from tests.support.livedemo import POLL, TIMEOUT, Live, processes, snapshot
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(600)


def read(path: Path) -> list[Entry]:
    """The entries a recording holds so far (it may still be written: read to its last whole one)."""
    try:
        with RecordingReader(path) as reader:
            return list(reader.entries())
    except (RecordingError, FileNotFoundError):
        return []


def samples(entries: list[Entry], host: str) -> list[Entry]:
    return [e for e in entries if e.host == host and e.kind == "probe" and e.record.get("type") == "sample"]


def holders(doc: dict[str, Any], host: str, gpu: int) -> set[tuple[int, int]]:
    return processes(doc, host, gpu)


async def test_record_replay_snapshot_round_trip(live: Live, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    path = tmp_path / "demo.gz"
    recorder = subprocess.Popen(
        ["gputui", "record", str(path), "--demo", "--interval", "0.5", "--log", str(audit)],
        cwd=live.cwd,
        env=live.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_until(
            lambda: len(samples(read(path), "demo-a")) >= 2 and samples(read(path), "demo-b"),
            TIMEOUT,
            step=POLL,
        )
        before = snapshot(live, "demo-a")
        on_gpu0 = holders(before, "demo-a", 0)
        assert on_gpu0
        cleaned = live.gputui("clean", "--demo", "demo-a:0", "--yes", "--log", str(audit))
        live.record()
        assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr

        def done() -> list[Entry]:
            return [e for e in read(path) if e.kind == "action" and e.record.get("kind") == "done"]

        assert wait_until(lambda: bool(done()), TIMEOUT, step=POLL)
        done_t = done()[0].record["time"]
        # Three seconds of samples after the verdict, then Ctrl+C.
        assert wait_until(lambda: samples(read(path), "demo-a")[-1].t >= done_t + 3, TIMEOUT, step=POLL)
        recorder.send_signal(signal.SIGINT)
        _, err = recorder.communicate(timeout=TIMEOUT)
    finally:
        if recorder.poll() is None:
            recorder.kill()  # only the recorder this test started
            recorder.communicate()
    assert recorder.returncode == 0, err
    assert "Traceback" not in err and "(interrupted)" in err
    with RecordingReader(path) as reader:
        entries = list(reader.entries())
        header = reader.header
        assert reader.ended is not None and reader.ended.record["reason"] == "interrupted"
    assert set(header.hosts) == {"demo-a", "demo-b"}
    actions = [e for e in entries if e.kind == "action"]
    plan_ids = {e.record["action"] for e in actions}
    assert len(plan_ids) == 1 and {e.host for e in actions} == {"demo-a"}
    plan_t = min(e.record["time"] for e in actions)
    assert {"plan", "intent", "done"} <= {e.record["kind"] for e in actions}

    # What held GPU 0 just before the plan, and after its verdict.
    at_before = f"+{plan_t - header.started - 0.05:.3f}"
    r = live.gputui("snapshot", "--replay", str(path), "--at", at_before, "--json")
    assert r.returncode == 0, r.stderr
    replayed = json.loads(r.stdout)
    assert holders(replayed, "demo-a", 0) == on_gpu0
    assert [h["name"] for h in replayed["hosts"]] == ["demo-a", "demo-b"]
    text = live.gputui("snapshot", "--replay", str(path), "--at", at_before, "demo-a")
    assert text.returncode == 0 and text.stdout.startswith("== demo-a")
    for pid, _ in on_gpu0:
        assert f" {pid} " in text.stdout
    after = clock_words(int(done_t) + 2, header, date=False)  # HH:MM:SS, on the recording's clock
    r = live.gputui("snapshot", "--replay", str(path), "--at", after, "--json")
    assert r.returncode == 0, r.stderr
    assert not holders(json.loads(r.stdout), "demo-a", 0) & on_gpu0

    # The dashboard on it.
    from gputui.cli.replay import REPLAY_INTERVAL, open_replay
    from gputui.ui import make_app
    from tests.support.apps import scratch_log
    from tests.support.pilot import wait_for

    opened = open_replay(str(path))
    assert not isinstance(opened, str), opened
    player, fleet = opened
    app = make_app(fleet, interval=REPLAY_INTERVAL, clock=player.now, replay=player, log_path=scratch_log())
    (plan,) = plan_ids
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: fleet.view("demo-a").sample is not None, 60)
        start = player.now()
        await pilot.press("greater_than_sign", "greater_than_sign", "greater_than_sign")  # x8
        assert player.speed == 8.0
        await wait_for(pilot, lambda: player.now() > start + 2, 60)
        await pilot.press("p")
        paused = player.now()
        await pilot.pause(0.5)
        assert player.now() == paused
        await pilot.press("n")
        await wait_for(pilot, lambda: player.now() == paused + header.interval or player.ended)
        await pilot.press("p")
        await wait_for(pilot, lambda: player.ended, 120)
        main = app._main
        assert main is not None
        await wait_for(pilot, lambda: any(e.tag == plan for e in main.action_log.entries))
        await wait_for(pilot, lambda: "■ end" in app.replay_bar._last)  # type: ignore[attr-defined]
        assert clock_words(player.now(), header) in app.replay_bar._last  # type: ignore[attr-defined]

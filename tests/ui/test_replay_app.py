"""The dashboard on a recording (`gputui --replay FILE`, gputui/ui/replay.py): the recorded time on
its line, p pauses, n steps one sample interval, + and - change the speed; read-only; a recorded
plan's events in the action log; a damaged line stops the replay where it is and says so.

The recordings are written by gputui's writer from the sim probe's fixtures (tests/support/recfile.py);
tests/cli/test_record.py opens one the real `gputui record` wrote of the live demo."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from textual.binding import Binding

from gputui.cli.replay import REPLAY_INTERVAL, open_replay
from gputui.kill.auditlog import ActionLog, read_records
from gputui.model import Event, brief_command
from gputui.recording.format import clock_at, offset_words
from gputui.recording.player import ReplayPlayer
from gputui.ui import make_app
from gputui.ui.replay import KEYS, ReplayApp
from gputui.ui.screens.environ import EnvironScreen
from gputui.ui.screens.proc_detail import ProcDetailScreen
from gputui.ui.widgets.action_log import event_entry
from tests.support.apps import scratch_log
from tests.support.paths import REPO
from tests.support.pilot import redrawn, screen_text, wait_for
from tests.support.recfile import START, demo_recording, fixture, gzip_lines, lines_of


def replay_app(path: Path) -> tuple[ReplayApp, ReplayPlayer]:
    opened = open_replay(str(path))
    assert not isinstance(opened, str), opened
    player, fleet = opened
    app = make_app(fleet, interval=REPLAY_INTERVAL, clock=player.now, replay=player, log_path=scratch_log())
    assert isinstance(app, ReplayApp)
    return app, player


def bar(app: ReplayApp) -> str:
    return app.replay_bar._last


def seq(app: ReplayApp, host: str) -> int:
    sample = app.fleet.view(host).sample
    return sample.seq if sample is not None else -1


async def test_pause_step_and_speed_keys_and_the_recorded_time(tmp_path: Path) -> None:
    path = tmp_path / "r.gz"
    demo_recording(path, seconds=30)
    seqs = [r["seq"] for r in fixture("demo-a")[1:31]]
    app, player = replay_app(path)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: seq(app, "demo-a") == seqs[1] and seq(app, "demo-b") >= 0)
        text = screen_text(app)
        assert "REPLAY" in text.splitlines()[0] and "r.gz" in text.splitlines()[0]  # the line on top
        assert "▶ x1" in bar(app)
        await pilot.press("p")
        await redrawn(pilot)
        assert player.paused and "⏸ paused x1" in bar(app)
        paused_at = player.now()
        shown = clock_at(paused_at, player.utc_offset)
        assert shown in bar(app) and offset_words(paused_at - START) in bar(app)
        held = seq(app, "demo-a")
        await pilot.pause(1.5)  # paused: the recorded time stands, no sample comes
        assert player.now() == paused_at and seq(app, "demo-a") == held and shown in bar(app)
        await pilot.press("n")  # one sample interval on: each host's next sample, no more
        await wait_for(pilot, lambda: seq(app, "demo-a") == seqs[seqs.index(held) + 1])
        await wait_for(pilot, lambda: player.now() == paused_at + 1.0)
        assert player.paused
        await wait_for(pilot, lambda: clock_at(paused_at + 1.0, player.utc_offset) in bar(app))
        assert seq(app, "demo-b") == fixture("demo-b")[1 + seqs.index(held) + 1]["seq"]
        await pilot.press("n", "n")
        await wait_for(pilot, lambda: player.now() == paused_at + 3.0)
        assert seq(app, "demo-a") == seqs[seqs.index(held) + 3]
        await pilot.press("greater_than_sign", "greater_than_sign")
        assert player.speed == 4.0 and "⏸ paused x4" in bar(app)  # said at once
        await pilot.press("less_than_sign")
        assert player.speed == 2.0 and "⏸ paused x2" in bar(app)
        await pilot.press("p")  # play on, twice as fast as recorded
        assert "▶ x2" in bar(app)
        await wait_for(pilot, lambda: player.now() >= paused_at + 5.0)
        await wait_for(pilot, lambda: seq(app, "demo-a") >= seqs[seqs.index(held) + 5])
        await pilot.press("greater_than_sign")
        assert player.speed == 4.0
        # Sample ages run on the recorded clock: the app's clock is the player's.
        assert app.clock() == player.now() or not player.paused
        await wait_for(pilot, lambda: player.ended, 60)
        await wait_for(pilot, lambda: "■ end x4" in bar(app))  # the line's next update
        assert clock_at(START + 30.5, player.utc_offset) in bar(app)
        assert seq(app, "demo-a") == seqs[-1]


async def test_a_replay_is_read_only_says_so_and_its_keys_are_in_the_help(tmp_path: Path) -> None:
    path = tmp_path / "r.gz"
    demo_recording(path, seconds=3)
    app, _ = replay_app(path)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: seq(app, "demo-a") >= 0)
        assert app.read_only
        app._main.select_host("demo-a")  # type: ignore[union-attr]
        await redrawn(pilot)
        app.clear_notifications()
        await pilot.press("f")
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        # The replay's reason, not --read-only's: neither was given.
        assert len(messages) == 1 and "a replay shows a recording" in messages[0], messages
        assert "--read-only" not in messages[0]
        await pilot.press("question_mark")
        await pilot.pause()
        help_text = screen_text(app)
        for words in ("pause the replay", "the replay's next sample", "replay faster", "replay slower"):
            assert words in help_text
        # A process's detail and environment say that this is a replay, not that it has exited.
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app._main)
        app._main.proc_table.focus()  # type: ignore[union-attr]
        for key, screen in (("d", ProcDetailScreen), ("e", EnvironScreen)):  # e: from the detail
            await pilot.press(key)
            await wait_for(pilot, lambda screen=screen: isinstance(app.screen, screen))  # type: ignore[misc]
            await wait_for(pilot, lambda: "a replay" in screen_text(app))
            text = " ".join(screen_text(app).split())
            assert "could not be read (a replay: the recorded process cannot be read now)" in text, key
            assert "has exited" not in text and "is gone" not in text, key


def audit_line(action: str, kind: str, t: float, **fields: Any) -> dict[str, Any]:
    """A line as gputui.actionlog writes it (the fields a replay shows)."""
    base: dict[str, Any] = {"v": 1, "kind": kind, "action": action, "time": t, "host": "demo-a"}
    base.update(dict.fromkeys(("pid", "start_time", "signal", "stage", "result", "message", "gpu")))
    base.update(fields)
    return base


async def test_a_recorded_plan_is_in_the_action_log(tmp_path: Path) -> None:
    path = tmp_path / "r.gz"
    writer = demo_recording(path, seconds=3, close=False)
    plan = "f00d4ce"
    lines = [
        audit_line(
            plan, "plan", START + 3.2, stage="plan", result="intent", message="Free GPU 0: 1 to signal"
        ),
        audit_line(plan, "event", START + 3.3, stage="signal", result="sent", signal="SIGTERM", pid=4242),
        audit_line(plan, "done", START + 3.4, stage="done", result="clean", message="GPU 0 clean"),
    ]
    for line in lines:
        writer.write("demo-a", "action", line, t=line["time"])
    writer.close("seconds")
    app, player = replay_app(path)
    async with app.run_test(size=(140, 40)) as pilot:
        main = app._main
        assert main is not None
        await wait_for(pilot, lambda: player.ended)
        await wait_for(pilot, lambda: len([e for e in main.action_log.entries if e.tag == plan]) == 3)
        entries = [e for e in main.action_log.entries if e.tag == plan]
        assert [e.host for e in entries] == ["demo-a"] * 3
        assert any(e.pid == 4242 for e in entries)


async def test_a_damaged_line_stops_the_replay_where_it_is(tmp_path: Path) -> None:
    good = tmp_path / "good.gz"
    demo_recording(good, seconds=6)
    lines = lines_of(good)
    bad = tmp_path / "bad.gz"
    cut = 4 + 2 * 3  # the header, the statuses and hellos, three seconds of samples
    gzip_lines(bad, [*lines[:cut], b'{"t": "soon", "host": "demo-a"}\n', *lines[cut:]])
    app, player = replay_app(bad)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_for(pilot, lambda: player.ended)
        await pilot.pause(0.5)
        assert player.problem is not None and f"line {cut + 1}: no time (t)" in player.problem
        await wait_for(pilot, lambda: "■ stopped" in bar(app))
        assert "no time (t)" in bar(app)
        assert seq(app, "demo-a") == fixture("demo-a")[3]["seq"]  # what came before it is shown
        assert app.fleet.view("demo-a").status == "live"


async def test_the_speed_keys_leave_a_typed_filter_alone(tmp_path: Path) -> None:
    """>  and < are the replay's speed wherever the focus is (the fleet table takes + and - to fold
    its groups), and a filter being typed keeps its `-` (a negation), `+` and `>`: the box takes them."""
    from textual.widgets import Input

    path = tmp_path / "r.gz"
    demo_recording(path, seconds=5)
    app, player = replay_app(path)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: seq(app, "demo-a") >= 0)
        await pilot.press("greater_than_sign")
        assert player.speed == 2.0
        await pilot.press("slash")
        await pilot.press(*"-user:x+>")
        await redrawn(pilot)
        box = app.screen.query_one(Input)
        assert box.value == "-user:x+>" and player.speed == 2.0


async def test_a_replayed_plan_reads_as_the_live_dashboard_wrote_it(tmp_path: Path) -> None:
    """The audit log's lines, replayed, make the same action-log lines as the probe's events did
    live: the GPU column kept (from the plan's line for the process), the PID once, the command in
    its column. The lines are written by gputui's own audit log writer."""
    plan, pid = "be7a11", 8120
    command = ["python3", "train.py", "--lr", "3e-4"]
    label = f"{pid} {brief_command(command)}"
    identity = {"name": "python3", "command": command, "user": "root", "uid": 0, "gpus": [2]}

    def event(stage: str, result: str, message: str, t: float, **more: Any) -> Event:
        return Event.from_wire(
            {"type": "event", "v": 1, "plan": plan, "time": t, "stage": stage, "pid": pid,
             "start_time": 777, "gpu": None, "signal": more.pop("signal", None), "result": result,
             "message": message, "data": {"elapsed_ms": 1.0, **identity, **more}}
        )  # fmt: skip

    live = [
        event("signal", "sent", f"SIGTERM -> {label}", START + 3.3, signal="SIGTERM"),
        event("wait", "exited", f"{label} exited after SIGTERM", START + 3.4, signal="SIGTERM"),
        event("verdict", "exited", f"{label}: exited", START + 3.5),
    ]
    audit = ActionLog(tmp_path / "actions.jsonl", operator="root")
    audit.write(
        "intent", plan, host="demo-a", pid=pid, start_time=777, user="root", command=command,
        signal="SIGTERM", stage="plan", result="intent", message="chosen", gpus=[2],
    )  # fmt: skip
    for e in live:
        audit.write_event("demo-a", e)
    audit.close()
    path = tmp_path / "r.gz"
    writer = demo_recording(path, seconds=3, close=False)
    for i, line in enumerate(read_records(tmp_path / "actions.jsonl")[0]):  # written now: put at 3.2 s on
        writer.write("demo-a", "action", {**line, "time": START + 3.2 + i / 10}, t=START + 3.2 + i / 10)
    writer.close("seconds")
    app, player = replay_app(path)
    async with app.run_test(size=(160, 40)) as pilot:
        main = app._main
        assert main is not None
        await wait_for(pilot, lambda: player.ended)
        await wait_for(pilot, lambda: len([e for e in main.action_log.entries if e.tag == plan]) == 4)
        replayed = [e.plain() for e in main.action_log.entries if e.tag == plan and e.pid == pid][1:]
        assert replayed == [event_entry("demo-a", e).plain() for e in live]
        assert all(line.startswith(f"demo-a GPU 2 {pid} ") for line in replayed), replayed
        assert all(line.count(str(pid)) == 1 for line in replayed), replayed


async def test_seek_back_and_on_and_rewind_at_the_end(tmp_path: Path) -> None:
    """, and . jump 10 s back and on (paused or playing), } to the end, { back to the start: each
    host shows its sample of that moment, and at the end the replay can be played again."""
    path = tmp_path / "r.gz"
    demo_recording(path, seconds=30)
    records = fixture("demo-a")  # the hello, then the sample of second 1, 2, ... after START

    def seq_at(t: float) -> int:
        return int(records[int(t - START)]["seq"]) if t >= START + 1 else -1

    app, player = replay_app(path)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: seq(app, "demo-a") == seq_at(START + 3))
        await pilot.press("p")
        await pilot.press("full_stop")  # 10 s on, paused: the samples up to there are played
        at = player.now()
        assert player.paused and at >= START + 13
        await wait_for(pilot, lambda: seq(app, "demo-a") == seq_at(at))
        assert len(app.fleet.view("demo-a").history[0].times) >= 10  # each sample went through
        await pilot.press("comma")  # 10 s back: the sample of that moment, read from the file again
        assert player.now() == at - 10 and player.paused
        await wait_for(pilot, lambda: seq(app, "demo-a") == seq_at(at - 10))
        assert clock_at(player.now(), player.utc_offset) in bar(app)
        assert all(
            len(h.times) <= 1 for h in app.fleet.view("demo-a").history.values()
        )  # later ones forgotten
        await pilot.press("right_curly_bracket")  # the end
        await wait_for(pilot, lambda: player.ended)
        await wait_for(pilot, lambda: seq(app, "demo-a") == seq_at(START + 30))
        await wait_for(pilot, lambda: "■ end" in bar(app))
        await pilot.press("left_curly_bracket", "p")  # from the start, playing
        assert not player.ended and not player.paused and player.now() < START + 2
        await wait_for(pilot, lambda: seq(app, "demo-a") == seq_at(START + 2))
        assert "▶" in bar(app)


def test_the_replay_keys_are_said_the_same_everywhere() -> None:
    """One set of keys: the line's words, the bindings, `gputui --help` and the README."""
    bound = {b.key_display or b.key for b in ReplayApp.BINDINGS if isinstance(b, Binding)}
    assert bound == {"p", "n", ",", ".", "{", "}", ">", "<"}
    for key in bound - {"p", "n"}:
        assert key in KEYS
    run = subprocess.run(
        [sys.executable, "-m", "gputui", "--help"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    readme = (REPO / "README.md").read_text()
    for text in (" ".join(run.stdout.split()), " ".join(readme.split())):
        assert "+ and - speed" not in text
        for words in ("< and > speed", ", and . 10 s back and on", "{ and } the start and the end"):
            assert words in text

"""The action log reads left to right (issue 12, defect 5): time, host, GPU, PID, what happened, then
the command last; no line runs past the pane (what happened wraps under its column, the command is
cut with an ellipsis); toasts never cover the log's last lines."""

from __future__ import annotations

import re
from typing import Any

import pytest
from textual.widgets._toast import Toast

from gputui.model import Event, brief_command
from gputui.ui.widgets.action_log import what_happened
from tests.support.apps import FROZEN, build_app
from tests.support.pilot import redrawn, settle

PID = 4125299
COMMAND = [
    "/usr/bin/python3",
    "-S",
    "/srv/jobs/train.py",
    "--model",
    "llama-3.1-70b",
    "--config",
    "/mnt/shared/experiments/2025-11-29/llama-3.1-70b/sweep-lr-3e-4/config.yaml",
]
LABEL = f"{PID} {brief_command(COMMAND)}"  # how the probe names a process in its messages
SIZES = [(80, 24), (120, 36), (200, 50)]


def event(
    stage: str, result: str, message: str, *, pid: int | None = PID, gpu: int | None = None, **data: Any
) -> Event:
    fields = {"command": COMMAND, "name": "python3", "gpus": [2]} if pid is not None else {}
    return Event.from_wire(
        {
            "plan": "a1b2c3d4e5f6",
            "time": FROZEN + 0.125,
            "stage": stage,
            "result": result,
            "pid": pid,
            "start_time": 1 if pid is not None else None,
            "gpu": gpu,
            "signal": "SIGTERM" if stage in ("signal", "wait") else None,
            "message": message,
            "data": {**fields, **data},
        }
    )


SENT = event("signal", "sent", f"SIGTERM -> {LABEL}")
EXITED = event("wait", "exited", f"{LABEL} exited after SIGTERM")
IDLE = event("verify", "idle", "GPU 2: memory back at idle, nothing listed", pid=None, gpu=2)


def test_what_happened_comes_from_the_fields() -> None:
    assert what_happened(SENT) == ("SIGTERM sent", brief_command(COMMAND))
    assert what_happened(EXITED) == ("exited after SIGTERM", brief_command(COMMAND))
    vanished = event("signal", "vanished", f"SIGTERM -> {LABEL}: already exited")
    assert what_happened(vanished)[0] == "SIGTERM: already exited"
    checked = event("check", "ok", f"{LABEL}: identity confirmed (pidfd)")
    assert what_happened(checked)[0] == "identity confirmed (pidfd)"
    # No PID: the message, less the GPU the line's GPU column names.
    assert what_happened(IDLE) == ("memory back at idle, nothing listed", "")
    odd = event("check", "ok", "something else entirely")
    assert what_happened(odd) == ("something else entirely", "")  # not the probe's words: kept whole


def test_a_command_with_control_characters_or_over_100_characters_is_named_once() -> None:
    """The probe names the process by its raw command (cut at 100 characters) and the app makes the
    whole message printable on arrival: the log still finds the PID and the command in it, so the line
    says `SIGTERM sent` once beside the command, never the PID twice (`4121 4121 python3 -c \\n...`)."""
    script = ["python3", "-c", "\nimport os, sys, signal\nimport torch\n" + "x = 1\n" * 40]
    long = ["python3", "serve.py", *[f"--option-{i}=value" for i in range(20)]]
    for command in (script, long):
        words = brief_command(command)
        label = f"{PID} {words[:97] + '...' if len(words) > 100 else words}"  # the probe's label
        sent = event("signal", "sent", f"SIGTERM -> {label}", command=command)
        exited = event("wait", "exited", f"{label} exited after SIGTERM", command=command)
        assert what_happened(sent)[0] == "SIGTERM sent", what_happened(sent)
        assert what_happened(exited)[0] == "exited after SIGTERM", what_happened(exited)
        assert str(PID) not in what_happened(exited)[1]


def log_lines(app: Any) -> list[str]:
    return [strip.text for strip in app._main.action_log.query_one("#log-lines").lines]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_a_line_reads_left_to_right_and_fits(size: tuple[int, int]) -> None:
    app = build_app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        main = app._main
        main.show_log()
        await pilot.pause()
        log = main.action_log
        for e in (SENT, EXITED, IDLE):
            log.add_event("demo-a", e)
        verdict = (
            "verdict: NOT clean in 15.0 s · GPU 2 held by 4125300, 4125301 (not in the plan, left alone) · "
            "2 exited, 1 survived"
        )
        log.note("demo-a", verdict, "error")
        await pilot.pause()
        lines = log_lines(app)
        width = log.query_one("#log-lines").scrollable_content_region.width
        assert all(len(line.rstrip()) <= width for line in lines), (width, lines)
        head = re.compile(rf"^\d\d:\d\d:\d\d\.125 demo-a GPU 2 +{PID} ")
        sent = next(line for line in lines if "SIGTERM sent" in line)
        assert head.match(sent), sent
        exited = next(line for line in lines if "exited after SIGTERM" in line)
        assert head.match(exited), exited
        # What happened comes before the command, which comes last (cut, and showing it, if need be).
        assert exited.index("exited after SIGTERM") < exited.index("python")
        assert exited.rstrip().endswith(("…", "config.yaml")), exited
        assert re.match(
            r"^\d\d:\d\d:\d\d\.125 demo-a GPU 2 +memory back at idle",
            next(line for line in lines if "memory back at idle" in line),
        )
        # A long line wraps under its own column, never past the pane; its numbers stay whole.
        start = next(i for i, line in enumerate(lines) if "verdict:" in line)
        column = lines[start].index("verdict:")
        rest = lines[start:]
        text = " ".join(line[column:].strip() for line in rest)
        assert verdict in text
        for line in rest[1:]:
            assert line[:column].strip() == ""  # indented under what happened


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_toasts_never_cover_the_log(size: tuple[int, int]) -> None:
    app = build_app()
    async with app.run_test(size=size, notifications=True) as pilot:  # run_test leaves them out
        await settle(pilot)
        main = app._main
        for i in range(12):
            main.action_log.note("demo-a", f"line {i}")
        await pilot.press("l")
        for i in range(3):
            app.notify(f"toast number {i}: a verdict that takes a few words to say", timeout=30)
        await redrawn(pilot)
        await pilot.pause(0.2)
        log = main.action_log.region
        toasts = [t.region for t in app.screen.query(Toast)]
        assert len(toasts) == 3
        for toast in toasts:
            assert not toast.overlaps(log), (toast, log)
        # The filter row moves the log up a line: the toasts follow.
        await pilot.press("slash")
        await pilot.pause(0.2)
        log = main.action_log.region
        assert not any(t.region.overlaps(log) for t in app.screen.query(Toast))
        await pilot.press("escape")
        await pilot.press("l")  # the log hidden: toasts go back down, inside the process table's pane
        await pilot.pause(0.2)
        inside = main.proc_table.scrollable_content_region
        margin = app.screen.query_one("#textual-toastrack").styles.margin
        assert margin.bottom == app.screen.size.height - inside.bottom > 1

"""Read-only explains itself (issue 12, defect 3): where gputui cannot kill, the footer offers no
kill key, and a kill key pressed anyway (f, F, x, X, enter and space in the process table) says why in
a notification: --read-only, a host marked read-only, a probe that runs read-only, no GPU, not
connected."""

from __future__ import annotations

from typing import Any

import pytest

from gputui.fleet.fleet import Fleet
from gputui.kill.operate import Request
from gputui.recording.player import ReplayLink
from gputui.ui import make_app
from gputui.ui.screens.proc_detail import ProcDetailScreen
from tests.support.apps import FROZEN, QUIET, Unreachable, build_app, recording, scratch_log
from tests.support.pilot import procs_of, redrawn, screen_text, settle, wait_for

KEYS = ("f", "F", "x", "X", "T", "K", "I", "f9")  # f9: the signal menu


def footer(app: Any) -> str:
    return screen_text(app).splitlines()[-1]


async def presses_say(pilot: Any, host: str, reason: str) -> None:
    """Every kill key on `host` posts no request and shows one notification that names `reason`."""
    app = pilot.app
    main = app._main
    main.select_host(host)
    await redrawn(pilot)
    requested: list[Request] = []
    app.request_plans = lambda requests, view=None: requested.extend(requests)
    for widget, keys in ((main.gpu_table, KEYS), (main.proc_table, (*KEYS, "enter", "space"))):
        widget.focus()
        await pilot.pause()
        assert "Free GPU" not in footer(app) and "Free host" not in footer(app)
        assert "Select" not in footer(app) and "Stop job" not in footer(app)
        for key in keys:
            app.clear_notifications()
            await pilot.press(key)
            await pilot.pause()
            messages = [n.message for n in app._notifications]
            assert len(messages) == 1, (key, messages)
            assert reason in messages[0], (key, messages)
    assert requested == []


async def test_read_only_flag() -> None:
    app = build_app(read_only=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await presses_say(pilot, "demo-a", "--read-only")


def fleet_of(**links: Any) -> Fleet:
    fleet = Fleet()
    for name, (make, read_only) in links.items():
        fleet.add(name.replace("_", "-"), make, read_only=read_only, interval=QUIET)
    return fleet


def replay(name: str, hello: dict[str, Any] | None = None) -> Any:
    records = list(recording(name))
    if hello is not None:
        records[0] = hello
    return lambda: ReplayLink(records)


async def test_a_host_marked_read_only_and_one_whose_probe_is() -> None:
    probe_ro = dict(recording("demo-b")[0], read_only=True)
    fleet = fleet_of(demo_a=(replay("demo-a"), True), demo_b=(replay("demo-b", probe_ro), False))
    app = make_app(fleet, interval=QUIET, clock=lambda: FROZEN, log_path=scratch_log())
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: all(v.sample is not None for v in fleet.hosts))
        await redrawn(pilot)
        await presses_say(pilot, "demo-a", "demo-a is marked read-only")
        await presses_say(pilot, "demo-b", "the probe on demo-b runs read-only")


async def test_no_gpu_and_not_connected() -> None:
    hello = dict(recording("demo-a")[0])
    hello["error"] = {"code": "no-driver", "message": "NVML Shared Library Not Found"}
    sample = dict(recording("demo-a")[1], gpus=[])
    fleet = fleet_of(workstation=(lambda: ReplayLink([hello, sample]), False), gpu_9=(Unreachable, False))
    app = make_app(fleet, interval=QUIET, clock=lambda: FROZEN, log_path=scratch_log())
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: fleet.view("workstation").sample is not None)
        await wait_for(pilot, lambda: fleet.view("gpu-9").status == "down")
        await redrawn(pilot)
        await presses_say(pilot, "workstation", "workstation has no GPU to free (no NVIDIA driver)")
        await presses_say(pilot, "gpu-9", "gpu-9 is not connected (down: unreachable)")


@pytest.mark.parametrize("read_only", [False, True])
async def test_help_hides_the_refusals(read_only: bool) -> None:
    app = build_app(read_only=read_only)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        text = app.screen.query_one("#help-body").plain()
        assert "refuse" not in text
        assert ("free the GPU" in text) is not read_only


async def test_the_footer_follows_the_fleet_cursor() -> None:
    fleet = fleet_of(demo_a=(replay("demo-a"), False), gpu_9=(Unreachable, False))
    app = make_app(fleet, interval=QUIET, clock=lambda: FROZEN, log_path=scratch_log())
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: fleet.view("demo-a").sample is not None)
        await wait_for(pilot, lambda: fleet.view("gpu-9").status == "down")
        await redrawn(pilot)
        main = app._main
        table = main.fleet_table
        table.focus()
        table.move_to("0@demo-a")
        await redrawn(pilot)
        assert "Free GPU" in footer(app)
        table.move_to("-@gpu-9")
        await redrawn(pilot)
        assert "Free GPU" not in footer(app) and "Free host" not in footer(app)
        await pilot.press("F")
        await pilot.pause()
        assert any("gpu-9 is not connected" in n.message for n in app._notifications)
        table.move_to("0@demo-a")
        await redrawn(pilot)
        assert "Free GPU" in footer(app)


async def test_read_only_k_in_a_process_detail_says_why() -> None:
    app = build_app(read_only=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await procs_of(pilot)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ProcDetailScreen))
        await pilot.pause()
        assert " k Signal" not in footer(app)
        app.clear_notifications()
        await pilot.press("k")
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert len(messages) == 1 and "--read-only" in messages[0], messages

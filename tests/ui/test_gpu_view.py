"""The GPU view (`i`) and the reset ladder from the dashboard, on a real sim probe.

The "preflight" sim scenario has a GPU of each kind of not-ready: GPU 1 with 2.1 GiB that no process
holds (orphaned), GPU 2 throttling (hw-thermal) and cooling, GPU 3 with persistence off and an
uncorrected ECC error. The GPU table marks them; the GPU view shows where the memory went, the
settings that differ from the siblings, and offers the reset only where it can help: a dry run that
names what blocks it, then a confirmation, then the reset with its events in the action log.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from gputui.config.file import HostSpec
from gputui.ui import GpuTuiApp
from gputui.ui.screens.gpu_detail import GpuDetailScreen
from gputui.ui.screens.reset import ResetScreen
from tests.support.apps import build_app, live_app, recording
from tests.support.pilot import redrawn, screen_text, settle, wait_for
from tests.support.scenes import SCENES

HOST = "p"


def preflight_app(tmp_path: Path, **kwargs: Any) -> GpuTuiApp:
    spec = HostSpec(name=HOST, reader="sim", sim_scenario="preflight", sim_seed=9)
    return live_app(tmp_path, spec, operator="root", **kwargs)


async def ready(pilot: Any) -> GpuTuiApp:
    app: GpuTuiApp = pilot.app
    view = app.fleet.view(HOST)
    await wait_for(pilot, lambda: view.sample is not None and len(view.preflight) == 4, 60)
    await redrawn(pilot)
    return app


def words(app: GpuTuiApp) -> str:
    return " ".join(screen_text(app).split())


async def open_view(pilot: Any, row: int) -> GpuDetailScreen:
    app: GpuTuiApp = pilot.app
    assert app._main is not None
    app._main.gpu_table.focus()
    await pilot.press(*["down"] * row, "i")
    await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
    await pilot.pause(0.3)
    assert isinstance(app.screen, GpuDetailScreen)
    return app.screen


async def test_gpu_table_marks_unaccounted_memory_and_preflight_flags(tmp_path: Path) -> None:
    app = preflight_app(tmp_path)
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        text = words(app)
        assert "◌ 2.1 GiB orphaned" in text  # GPU 1: nothing holds it
        assert "⚑ throttling: hw-thermal" in text  # GPU 2
        assert "⚑ 1 uncorrected ECC error +2" in text  # GPU 3: and persistence off, unlike the others
        assert "◌ 2.1 GiB unaccounted" in text  # the host's row


async def test_gpu_view_shows_the_account_settings_history_and_steps_between_gpus(tmp_path: Path) -> None:
    app = preflight_app(tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        screen = await open_view(pilot, 2)  # "all", GPU 0, GPU 1
        assert screen.gpu == 1
        text = words(app)
        assert "GPU 1 · p" in text
        assert "orphaned 2.1 GiB" in text  # the bar's legend
        assert "! 2.1 GiB orphaned, no process holds it; a reset would free it" in text
        assert "Persistence on" in text and "History, the last" in text
        await wait_for(pilot, lambda: "r Reset GPU" in words(app))  # offered: the memory is orphaned
        await pilot.press("right_square_bracket", "right_square_bracket")
        await pilot.pause(0.3)
        assert screen.gpu == 3
        text = words(app)
        assert "every byte accounted for" in text
        assert "⚑ persistence off" in text and "⚑ 1 uncorrected ECC error" in text
        await wait_for(pilot, lambda: "Reset GPU" not in words(app))  # nothing orphaned: no reset
        await pilot.press("left_square_bracket")
        await pilot.pause(0.3)
        assert screen.gpu == 2 and "throttling: hw-thermal" in words(app)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app._main


async def test_reset_from_the_gpu_view_dry_run_blocked_then_confirmed(tmp_path: Path) -> None:
    app = preflight_app(tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        hello = app.fleet.view(HOST).raw_hello
        assert hello is not None
        device = hello["host"]["device_prefix"] + "1"
        await open_view(pilot, 2)
        # A holder of the GPU's device file (this test) blocks the reset: named, nothing offered.
        held = os.open(device, os.O_RDONLY)
        try:
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, ResetScreen))
            await pilot.pause()
            dialog = app.screen
            assert isinstance(dialog, ResetScreen) and dialog.blocked
            text = words(app)
            assert f"GPU 1 on {HOST}: no reset" in text and f"• {os.getpid()} " in text
            assert not dialog.query("#reset-yes")  # nothing to confirm
            await pilot.press("ctrl+k")  # cannot confirm a blocked reset
            await pilot.pause()
            assert isinstance(app.screen, GpuDetailScreen)
        finally:
            os.close(held)
        # Nothing blocks it now: the dialog names the steps; Cancel first, ctrl+k resets.
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ResetScreen))
        await pilot.pause()
        text = words(app)
        assert "Reset GPU 1 on p?" in text and "turn persistence mode off" in text
        await pilot.press("ctrl+k")
        view = app.fleet.view(HOST)

        def freed() -> bool:
            gpu = next(g for g in view.sample.gpus if g.index == 1) if view.sample else None
            return gpu is not None and gpu.accounting is not None and gpu.accounting.orphaned == 0

        await wait_for(pilot, freed, 60)
        assert app._main is not None
        log = [e.plain() for e in app._main.action_log.entries]
        assert any("reset GPU 1: the ladder starts" in line for line in log), log
        assert any("persistence" in line and "off" in line for line in log), log
        assert any("verdict: GPU 1 reset: memory back at idle" in line for line in log), log
        await pilot.press("escape")
        await redrawn(pilot)
        await wait_for(pilot, lambda: "◌ 2.1 GiB orphaned" not in words(app))
        assert "3 free" in words(app)  # GPU 3's ECC error: never free
        # The audit log has the reset, ahead of it and with its outcome.
        audit = [json.loads(line) for line in (tmp_path / "actions.jsonl").read_text().splitlines()]
        assert [(r.get("stage"), r.get("result")) for r in audit if r.get("stage") in ("reset", "done")] == [
            ("reset", "intent"),
            ("reset", "done"),
            ("done", "reset"),
        ], audit


def mig_lines(app: GpuTuiApp) -> list[str]:
    """The screen's lines without the pane's border, their runs of spaces as one."""
    return [" ".join(line.strip(" │").split()) for line in screen_text(app).splitlines()]


async def test_gpu_view_shows_mig_instances_and_where_processes_run() -> None:
    """On the recorded "mig" scenario (tests/fixtures/mig.jsonl): GPU 0 in MIG mode, three
    instances, jobs in two of them; GPU 1 without MIG shows no MIG section at all."""
    app = SCENES["mig"].build("gputui-dark")
    async with app.run_test(size=(120, 50)) as pilot:  # tall enough for the whole process list
        await settle(pilot)
        screen = await open_view(pilot, 1)  # "all", GPU 0
        assert screen.gpu == 0
        lines = mig_lines(app)
        assert "MIG instances: 3 (profile, memory, who runs in it)" in lines
        # The GPU table's words: the profile, a bar and the GPU instance's memory, who runs in it.
        for label, profile, memory, who in (
            ("1.0", "3g.71gb (sim)", "46.0/71.0 GiB", "2 user"),
            ("2.0", "2g.35gb (sim)", "20.0/35.0 GiB", "1 user"),
            ("5.0", "1g.18gb (sim)", "0/18.0 GiB", "· idle"),
        ):
            assert any(
                line.startswith(f"{label} {profile} ") and line.endswith(f" {memory} {who}") for line in lines
            ), (label, lines)
        # The process list: each job's instance (the process table's `0:1.0`) after its kind.
        assert "On GPU 0: 3 processes (MIG instance, memory, SM/memory utilization)" in lines
        for pid, place in ((13077, "0:1.0"), (13078, "0:1.0"), (13079, "0:2.0")):
            assert any(line.startswith(f"{pid} ■ user {place} ") for line in lines), (pid, lines)
        await pilot.press("m")  # exact MiB: the instances' figures too
        await pilot.pause(0.3)
        assert any(
            line.startswith("1.0 3g.71gb (sim) ") and " 47104/72704 MiB " in line for line in mig_lines(app)
        )
        await pilot.press("m", "right_square_bracket")  # GPU 1: no MIG
        await pilot.pause(0.3)
        assert screen.gpu == 1
        lines = mig_lines(app)
        assert "On GPU 1: 1 process (memory, SM/memory utilization)" in lines
        assert not any("MIG instances" in line for line in lines)  # no section, not even its heading
        assert not any(re.search(r"\b\d+:\d+\.\d+\b", line) for line in lines)  # no instance column


async def test_gpu_view_names_mps_parts_as_the_process_table_does() -> None:
    """The "mps" scenario: the MPS server and its three clients on GPU 0, no MIG."""
    app = SCENES["mps"].build("gputui-dark")
    async with app.run_test(size=(120, 50)) as pilot:
        await settle(pilot)
        await open_view(pilot, 1)
        text = screen_text(app)
        assert text.count("■ mps-cli") == 3 and "○ mps-srv" in text
        assert "MIG instances" not in text


async def test_gpu_view_shows_a_hostile_profile_name_literally() -> None:
    """An instance's name is the host's text: markup in it is shown as written, ESC made visible."""
    records = []
    for record in recording("mig"):
        if record["type"] == "sample":
            gpus = [dict(g) for g in record["gpus"]]
            instances = [dict(i) for i in gpus[0]["mig_instances"]]
            instances[0]["name"] = "NVIDIA H200 MIG [bold red]3g[/] \x1b[2Jx"
            gpus[0]["mig_instances"] = instances
            record = dict(record, gpus=gpus)
        records.append(record)
    app = build_app(("m",), theme="gputui-dark", records={"m": records})
    async with app.run_test(size=(120, 50)) as pilot:
        await settle(pilot)
        await open_view(pilot, 1)
        assert any(line.startswith("1.0 [bold red]3g[/] \\e[2Jx ") for line in mig_lines(app)), mig_lines(app)


async def test_gpu_view_history_charts_have_a_scale_and_a_time_axis(tmp_path: Path) -> None:
    app = preflight_app(tmp_path)
    async with app.run_test(size=(100, 60)) as pilot:
        await ready(pilot)
        view = app.fleet.view(HOST)
        await wait_for(pilot, lambda: len(view.history[0].times) >= 3, 60)
        screen = await open_view(pilot, 1)  # GPU 0
        screen.box.scroll_end(animate=False)
        await pilot.pause(0.3)
        lines = screen_text(app).splitlines()
        util = next(i for i, line in enumerate(lines) if "Util" in line and "100% ┤" in line)
        assert "0% ┤" in lines[util + 1]  # two rows, the scale's ends labelled
        assert any("Memory" in line and "100% ┤" in line for line in lines)
        assert any("Power" in line and "W ┤" in line for line in lines)  # up to the power limit
        assert any("Temp" in line and "° ┤" in line for line in lines)
        axis = next(i for i, line in enumerate(lines) if "└──" in line)
        assert re.search(r"-\d+s\s+now", lines[axis + 1])  # the span the samples cover, to now


async def test_read_only_r_on_orphaned_memory_says_why(tmp_path: Path) -> None:
    app = preflight_app(tmp_path, read_only=True)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        screen = await open_view(pilot, 2)  # GPU 1: orphaned memory, where a reset would help
        assert screen.gpu == 1 and "a reset would free it" in words(app)
        assert "Reset GPU" not in words(app)  # not offered
        app.clear_notifications()
        await pilot.press("r")
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert len(messages) == 1 and "--read-only" in messages[0], messages
        assert not isinstance(app.screen, ResetScreen)

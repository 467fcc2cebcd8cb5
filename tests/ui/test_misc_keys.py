"""Pause (z), exact MiB (m), the config's [columns], gputui's commands in the palette, export.

Processes are found through the app's state (the demo recordings are re-recorded now and then),
never by a fixed PID."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gputui.config.file as config
from gputui.fleet.session import SampleArrived
from gputui.ui import GpuTuiApp
from gputui.ui.screens.gpu_detail import GpuDetailScreen
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.plan import PlanScreen
from gputui.ui.widgets.fleet_table import FleetTable
from gputui.ui.widgets.gpu_table import GpuTable
from gputui.ui.widgets.proc_table import ProcTable, proc_row_key
from tests.support.apps import build_app
from tests.support.pilot import main_of, palette, redrawn, screen_text, settle, wait_for
from tests.support.scenes import HOST_METRICS, metrics_records


def metrics_app(**kwargs: Any) -> GpuTuiApp:
    return build_app(records={name: metrics_records(name) for name in HOST_METRICS}, **kwargs)


async def to_host(pilot: Any, host: str = "demo-a") -> MainScreen:
    app: GpuTuiApp = pilot.app
    await settle(pilot)
    main = main_of(app)
    main.select_host(host)
    await redrawn(pilot)
    return main


def biggest_user(app: GpuTuiApp, host: str = "demo-a") -> Any:
    sample = app.fleet.view(host).sample
    assert sample is not None
    return max((p for p in sample.processes if p.kind == "user"), key=lambda p: p.gpu_bytes)


# -- host metrics ----------------------------------------------------------------------------


async def test_the_host_header_shows_the_hosts_load_and_unknown_figures_are_left_out() -> None:
    records = {name: metrics_records(name) for name in HOST_METRICS}
    bad = dict(HOST_METRICS["demo-b"], cpu_percent=-3, load1="x", memory_used=10**30, uptime=float("nan"))
    records["demo-b"] = [dict(r, host=bad) if r["type"] == "sample" else r for r in records["demo-b"]]
    app = build_app(records=records)
    async with app.run_test(size=(300, 40)) as pilot:  # the load comes last: all of it in view
        await to_host(pilot, "demo-a")
        top = screen_text(app).splitlines()[0]
        assert (
            "CPU 38% of 64 CPUs · load 12.25 10.50 9.75 · RAM 1235/2015 GiB · swap 1.0 GiB · up 3d04h" in top
        )
        main_of(app).select_host("demo-b")
        await redrawn(pilot)
        top = screen_text(app).splitlines()[0]
        # Wrong type, negative, NaN, more used than there is: each one unknown, the rest shown.
        assert "CPU" not in top and "RAM" not in top and " up " not in top
        assert "load - 0.25 0.10 · no swap" in top


async def test_the_fleet_table_has_the_hosts_cpu_and_ram_and_sorts_by_them() -> None:
    app = metrics_app()
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(pilot)
        fleet = app.query_one(FleetTable)
        rows = fleet.rows_data()
        assert {rows[k]["cpu"].plain for k in rows if k.endswith("@demo-b")} == {"2%"}
        assert {rows[k]["ram"].plain for k in rows if k.endswith("@demo-a")} == {"1235/2015 GiB"}
        fleet.sort_by("cpu", reverse=True)
        await pilot.pause()
        assert fleet.cursor_key is not None
        first = fleet.coordinate_to_cell_key((0, 0)).row_key.value
        assert first is not None and first.endswith("@demo-a")


# -- pause ------------------------------------------------------------------------------------


async def test_pause_freezes_the_view_keeps_the_samples_and_catches_up() -> None:
    now = [1764430000.0]
    records = {name: metrics_records(name) for name in HOST_METRICS}
    app = build_app(records=records, clock=lambda: now[0])
    async with app.run_test(size=(120, 36)) as pilot:
        main = await to_host(pilot)
        user = biggest_user(app)
        key = proc_row_key(user)
        before = main.proc_table.rows_data()[key]["mem"].plain
        await pilot.press("z")
        await redrawn(pilot)
        assert main.state.pause.on and "PAUSED 0s" in screen_text(app).splitlines()[0]
        # A new sample: the fleet has it, the screen does not show it.
        view = app.fleet.view("demo-a")
        sample = view.sample
        assert sample is not None
        grown = [
            p
            if p.key != user.key
            else type(p)(**{**_fields(p), "gpu_memory": {i: 2 * b for i, b in p.gpu_memory.items()}})
            for p in sample.processes
        ]
        view.record(type(sample)(**{**_fields(sample), "seq": sample.seq + 1, "processes": tuple(grown)}))
        app._on_fleet(SampleArrived(view, view.sample))
        now[0] += 75
        await pilot.pause(1.2)  # the ages tick
        await redrawn(pilot)
        assert (
            app.fleet.view("demo-a").sample is not None
            and app.fleet.view("demo-a").sample.seq == sample.seq + 1
        )
        assert main.proc_table.rows_data()[key]["mem"].plain == before
        top = screen_text(app).splitlines()[0]
        assert "PAUSED 1m" in top and "sample 1m old" in top
        await pilot.press("z")
        await redrawn(pilot)
        assert not main.state.pause.on and "PAUSED" not in screen_text(app).splitlines()[0]
        assert main.proc_table.rows_data()[key]["mem"].plain != before  # caught up at once


def _fields(record: Any) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__dataclass_fields__}


# -- exact MiB --------------------------------------------------------------------------------


async def test_m_shows_memory_in_exact_mib_everywhere_and_leaves_the_sort_alone() -> None:
    app = metrics_app()
    async with app.run_test(size=(160, 40)) as pilot:
        main = await to_host(pilot)
        user = biggest_user(app)
        key = proc_row_key(user)
        gpu = user.gpus[0]
        order = list(main.proc_table._row_locations)
        assert main.proc_table.rows_data()[key]["mem"].plain.endswith(" GiB")
        await pilot.press("m")
        await redrawn(pilot)
        assert app.exact_memory
        assert main.proc_table.rows_data()[key]["mem"].plain == f"{user.gpu_bytes // 2**20} MiB"
        g = next(g for g in app.fleet.view("demo-a").sample.gpus if g.index == gpu)  # type: ignore[union-attr]
        memory = main.gpu_table.rows_data()[str(gpu)]["memory"].plain
        assert memory.endswith(f" {g.memory_used // 2**20}/{g.memory_total // 2**20} MiB")
        assert "RAM 1264183/2063483 MiB" in main.status_line._text.plain  # the header's end, cut at 160
        assert list(main.proc_table._row_locations) == order  # the same order
        # The GPU view too, and back to GiB there.
        main.gpu_table.focus()
        main.gpu_table.move_to(str(gpu))
        await pilot.press("i")
        await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
        await pilot.pause()
        assert f"{g.memory_used // 2**20}/{g.memory_total // 2**20} MiB" in screen_text(app)
        await pilot.press("m")
        await pilot.pause()
        assert not app.exact_memory and f"{g.memory_used // 2**20}/" not in screen_text(app)
        assert "/140 GiB" in screen_text(app)
        await pilot.press("escape")
        await redrawn(pilot)
        assert main.proc_table.rows_data()[key]["mem"].plain.endswith(" GiB")


# -- [columns] --------------------------------------------------------------------------------


async def test_the_columns_config_hides_columns_at_every_width() -> None:
    cfg = config.parse_config(
        '[columns]\nhide_processes = ["rss", "user"]\nhide_gpus = ["util_hist", "power"]\n'
    )
    app = metrics_app(hidden_columns=cfg.hidden_columns)
    async with app.run_test(size=(200, 40)) as pilot:
        main = await to_host(pilot)
        shown = {c.key for c in main.proc_table._shown}
        assert "rss" not in shown and "user" not in shown and {"pid", "kind", "mem", "command"} <= shown
        gpus = {c.key for c in main.gpu_table._shown}
        assert "util_hist" not in gpus and "power" not in gpus and "mem_hist" in gpus
        header = screen_text(app)
        assert " RSS " not in header and "Util hist" not in header
        # Sorting by a hidden column still works and the title says so.
        main.proc_table.focus()
        main.proc_table.sort_by("rss", reverse=True)
        await redrawn(pilot)
        assert "sorted by RSS ▼ (column hidden)" in screen_text(app)


def test_the_configs_column_names_are_the_tables_keys() -> None:
    tables = {"processes": ProcTable, "gpus": GpuTable, "fleet": FleetTable}
    for name, table in tables.items():
        keys = {c.key for c in table.COLUMNS}
        assert set(config.COLUMNS[name]) | set(config.ALWAYS_SHOWN[name]) == keys, name
        assert not set(config.COLUMNS[name]) & set(config.ALWAYS_SHOWN[name])


# -- the command palette ----------------------------------------------------------------------


async def titles(pilot: Any) -> list[str]:
    """Every gputui entry the palette would list now."""
    from gputui.ui.commands import GpuTuiCommands

    app: GpuTuiApp = pilot.app
    provider = GpuTuiCommands(app.screen)
    return [e.title for e in provider.entries()]


async def test_palette_pause_mib_log_host_and_gpu_view() -> None:
    app = metrics_app()
    async with app.run_test(size=(120, 36)) as pilot:
        main = await to_host(pilot)
        await palette(pilot, "pause the view")
        assert main.state.pause.on
        await palette(pilot, "resume")
        assert not main.state.pause.on
        await palette(pilot, "exact mib")
        assert app.exact_memory
        shown = main.action_log.display
        await palette(pilot, "the action log")
        assert main.action_log.display != shown
        assert "Switch to host demo-a" not in await titles(pilot)
        await palette(pilot, "switch to host demo-b")
        assert main.state.host == "demo-b"
        await palette(pilot, "switch to all hosts")
        assert main.state.host is None
        await palette(pilot, "gpu view")
        await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))


async def test_palette_free_gpu_and_sweep_open_the_same_dialog_as_the_keys() -> None:
    app = metrics_app()
    app.fresh_timeout = 0  # plan on the replayed sample
    async with app.run_test(size=(120, 36)) as pilot:
        main = await to_host(pilot)
        sample = app.fleet.view("demo-a").sample
        assert sample is not None
        gpu = next(g.index for g in sample.gpus if sample.on_gpu(g.index))
        main.gpu_table.focus()
        main.gpu_table.move_to(str(gpu))
        await redrawn(pilot)
        await palette(pilot, f"free gpu {gpu}")
        await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))
        dialog = app.screen
        assert isinstance(dialog, PlanScreen) and [p.gpu_indexes for p in dialog.plans] == [(gpu,)]
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is main)
        if main.kills.sweep_candidates("demo-a"):
            await palette(pilot, "sweep")
            await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))
            assert isinstance(app.screen, PlanScreen) and app.screen.sweep_on
            await pilot.press("escape")


async def test_a_read_only_palette_offers_no_kill() -> None:
    app = metrics_app(read_only=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await to_host(pilot)
        listed = await titles(pilot)
        assert not [t for t in listed if t.startswith(("Free", "Sweep"))]
        assert "Pause the view" in listed and "Export snapshot" in listed
    app = metrics_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await to_host(pilot)
        listed = await titles(pilot)
        assert "Free host demo-a" in listed


async def test_palette_export_writes_the_snapshot_as_json_and_text(tmp_path: Path) -> None:
    app = metrics_app(export_dir=tmp_path / "out")
    async with app.run_test(size=(120, 36)) as pilot:
        await to_host(pilot)
        await palette(pilot, "export snapshot")
        await wait_for(pilot, lambda: app.last_export is not None)
        assert app.last_export is not None
        json_path, text_path = app.last_export
        doc = json.loads(json_path.read_text())
        assert doc["version"] == 1 and [h["name"] for h in doc["hosts"]] == ["demo-a", "demo-b"]
        assert doc["hosts"][0]["metrics"]["cpus"] == 64
        text = text_path.read_text()
        assert "== demo-a" in text and "CPU 38% of 64 CPUs" in text
        # Where it went, in the log (and a notification).
        assert any(str(json_path) in e.text for e in main_of(app).action_log.entries)

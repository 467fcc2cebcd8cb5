"""The process detail (`d`) charts the process's GPU memory, SM, CPU and RSS over time, from the
rings its host keeps (gputui/fleet/history.py), each with its scale and one time axis, and moves on
with each sample."""

from __future__ import annotations

import re
from pathlib import Path

from gputui.ui import GpuTuiApp
from gputui.ui.screens.proc_detail import ProcDetailScreen
from gputui.ui.widgets.proc_table import proc_row_key
from tests.support.apps import build_app, sim_app
from tests.support.pilot import procs_of, redrawn, sample_of, screen_text, wait_for


def chart_lines(app: GpuTuiApp) -> list[str]:
    lines = screen_text(app).splitlines()
    start = next(i for i, line in enumerate(lines) if "History, the last" in line)
    return lines[start:]


async def test_the_process_detail_charts_its_gpu_memory_sm_cpu_and_rss(tmp_path: Path) -> None:
    app = sim_app(tmp_path)
    async with app.run_test(size=(120, 60)) as pilot:
        view = app.fleet.view("demo-a")
        await wait_for(pilot, lambda: view.sample is not None and bool(view.sample.processes), 60)
        assert app._main is not None
        main = app._main
        main.proc_table.focus()
        await redrawn(pilot)
        biggest = max(sample_of(app).processes, key=lambda p: p.gpu_bytes)
        ring = app.fleet.view("demo-a").processes
        await wait_for(pilot, lambda: (r := ring.get(biggest.key)) is not None and r.count >= 3, 60)
        assert main.proc_table.move_to(proc_row_key(biggest))
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ProcDetailScreen))
        screen = app.screen
        assert isinstance(screen, ProcDetailScreen)
        box = screen.query_one("#pdetail-box")
        await wait_for(pilot, lambda: screen.status != "reading")
        await pilot.pause(0.3)
        box.scroll_end(animate=False)
        await pilot.pause(0.3)
        lines = chart_lines(app)
        gpu = next(i for i, line in enumerate(lines) if "GPU memory" in line)
        assert re.search(r" (1|2|2\.5|5|10|20|25|50|100|200|250|500) [GM]iB ┤", lines[gpu])  # a round top
        assert "0 B ┤" in lines[gpu + 1]
        assert any(line.lstrip("│ ").startswith("SM") and "100% ┤" in line for line in lines)
        assert any(line.lstrip("│ ").startswith("CPU") and "% ┤" in line for line in lines)
        assert any(line.lstrip("│ ").startswith("RSS") and "┤" in line for line in lines)
        axis = next(i for i, line in enumerate(lines) if "└──" in line)
        assert re.search(r"-\d+s\s+now", lines[axis + 1])
        # The charts move on with the samples: the span grows.
        before = ring.get(biggest.key).count  # type: ignore[union-attr]
        await wait_for(pilot, lambda: ring.get(biggest.key).count > before + 2, 60)  # type: ignore[union-attr]
        await pilot.pause(0.3)
        box.scroll_end(animate=False)
        await pilot.pause(0.3)
        assert chart_lines(app) != lines


async def test_the_main_screen_shows_the_hosts_cpu_and_ram_over_time_at_80x24(tmp_path: Path) -> None:
    app = sim_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.fleet.view("demo-a")
        await wait_for(pilot, lambda: view.host_history.count >= 3, 60)
        assert app._main is not None
        app._main.select_host("demo-a")
        await redrawn(pilot)
        await pilot.pause(0.3)
        legend = next(line for line in screen_text(app).splitlines() if "CPU " in line and "RAM " in line)
        cpu, ram = view.host_history.cpu[-1], view.host_history.memory[-1]
        assert cpu is not None and ram is not None
        assert re.search(r"CPU [▁▂▃▄▅▆▇█ ]{12} \d+%", legend) and re.search(
            r"RAM [▁▂▃▄▅▆▇█ ]{12} \d+%", legend
        )
        app._main.select_host(None)  # "All hosts": no one host's load
        await redrawn(pilot)
        await pilot.pause(0.3)
        assert not re.search(r"(CPU|RAM) [▁▂▃▄▅▆▇█ ]{12} \d+%", screen_text(app))


async def test_at_sixty_columns_the_heading_counts_the_cells_drawn_and_the_reading_shows_whole() -> None:
    app = build_app()
    async with app.run_test(size=(60, 15)) as pilot:
        main = await procs_of(pilot)
        record = main.proc_table.in_view[0]
        ring = app.fleet.view("demo-a").processes.get(record.key)
        assert ring is not None and ring.count > 20  # more samples than a 60-column chart has cells
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ProcDetailScreen))
        screen = app.screen
        assert isinstance(screen, ProcDetailScreen)
        await wait_for(pilot, lambda: screen.status != "reading")
        screen.query_one("#pdetail-box").scroll_end(animate=False)
        await pilot.pause(0.3)
        lines = chart_lines(app)
        heading = re.search(r"History, the last .* \((\d+) samples, one a cell\)", " ".join(lines))
        assert heading is not None, lines
        axis = next(line for line in lines if "└──" in line)
        cells = axis.count("─") - axis.count("──╯")  # the box's own bottom border is not the axis
        assert int(heading.group(1)) == min(ring.count, cells), (heading.group(0), axis)
        gpu = next(line for line in lines if "GPU memory" in line)
        assert "…" not in gpu and re.search(r"\d(\.\d)? [GM]iB\s*│?$", gpu.rstrip()), gpu
        assert "now" in lines[lines.index(axis) + 1]

"""The truncation rule (issue 12, defect 1), on every table at 80x24, 120x36 and 200x50.

A cell that is cut shows it (an ellipsis), and no number (PID, memory, GPU index) is ever cut: its
column widens, the words before it give way, or it is left out whole. No table is wider than what
it shows, so nothing is cut silently at the right edge either.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from textual.widget import Widget

from gputui.text.units import fmt_bytes
from gputui.ui.widgets.cells import Cell, fit, fit_end
from gputui.ui.widgets.proc_table import ProcTable
from gputui.ui.widgets.table import KeyedTable
from tests.support.apps import build_app
from tests.support.demopids import demo_pid
from tests.support.longdata import HOSTS, long_fleet_records, long_pid
from tests.support.pilot import redrawn, settle

SIZES = [(80, 24), (120, 36), (200, 50)]
# What a cut number looks like: a PID of this data (all of them 41xxxxx) with digits missing, an
# ellipsis before digits, a memory cut in its number or its unit. (A command line is words: its
# "llama-3.1-8…" may be cut.)
CUT_NUMBER = re.compile(r"(?<![\w./-])(41\d{0,4}|\d+\.\d?)…|…\d|\d \w{1,2}…")


def inside(app: Any, widget: Widget) -> list[str]:
    """The lines a widget shows inside its border, as plain text."""
    lines = [strip.text for strip in app.screen._compositor.render_strips()]
    region = widget.region
    return [line[region.x + 1 : region.right - 1] for line in lines[region.y + 1 : region.bottom - 1]]


def check_table(app: Any, table: KeyedTable) -> list[str]:
    """The table's lines, after checking that it is no wider than it shows and cuts no number."""
    assert table.virtual_size.width <= table.scrollable_content_region.width, (
        f"{type(table).__name__} is {table.virtual_size.width} wide in "
        f"{table.scrollable_content_region.width}: the right edge cuts cells silently"
    )
    lines = inside(app, table)
    for line in lines:
        assert not CUT_NUMBER.search(line), f"{type(table).__name__} cut a number: {line!r}"
    return lines


def line_of_pid(lines: list[str], pid: int) -> str:
    """The line whose PID column holds `pid`: its first 7-digit number (every PID here has 7)."""
    for line in lines:
        pids = re.findall(r"(?<!\d)\d{7}(?!\d)", line)
        if pids and pids[0] == str(pid):
            return line
    raise AssertionError(f"no row for PID {pid} in {lines}")


def long_app() -> Any:
    return build_app(tuple(HOSTS.values()), records=long_fleet_records())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_no_table_cuts_a_number(size: tuple[int, int]) -> None:
    app = long_app()
    host = HOSTS["demo-a"]
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        main = app._main
        fleet = check_table(app, main.fleet_table)
        assert any("140 GiB" in line for line in fleet)  # the memory cell names its unit, whole
        main.host_list.display = True  # shown at every width here (b)
        await redrawn(pilot)
        check_table(app, main.host_list)
        main.apply_width()  # back to what the width decides

        main.select_host(host)
        await redrawn(pilot)
        gpus = check_table(app, main.gpu_table)
        assert any("562 GiB" in line for line in gpus)  # the host's total, four H200s
        sample = app.fleet.view(host).sample

        # Every process of the host: each PID shows whole.
        procs = check_table(app, main.proc_table)
        text = "\n".join(procs)
        visible = main.proc_table.scrollable_content_region.height - 1  # the header
        # The table sorts by GPU memory: the processes that hold some come first (those that hold
        # none tie, in an order of the table's own).
        for proc in [
            p for p in sorted(sample.processes, key=lambda p: -p.gpu_bytes)[:visible] if p.gpu_bytes
        ]:
            assert re.search(rf"(?<!\d){proc.pid}(?!\d)", text), f"PID {proc.pid} is not shown whole"

        # GPU 2: a ghost whose memory a 7-digit PID holds; the note keeps that number whole.
        main.gpu_table.move_to("2")
        await redrawn(pilot)
        procs = check_table(app, main.proc_table)
        ghost = next(p for p in sample.processes if p.kind == "ghost")
        holder = long_pid(demo_pid("train.py", "hidden"))  # the ghost's process group
        assert ghost.links == (holder,)
        ghost_line = line_of_pid(procs, ghost.pid)
        assert str(holder) in ghost_line, ghost_line  # "memory held by 4125299"
        assert str(ghost.pid) in line_of_pid(procs, holder)  # "same process group as 4125293"
        user = next(p for p in sample.processes if p.kind == "user" and 2 in p.gpus)
        user_line = line_of_pid(procs, user.pid)
        assert main.proc_table.width_of("mem")  # shown at every size here
        assert fmt_bytes(user.gpu_memory[2]) in user_line


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_a_cut_command_shows_an_ellipsis(size: tuple[int, int]) -> None:
    app = long_app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        main = app._main
        main.select_host(HOSTS["demo-a"])
        await redrawn(pilot)
        procs = check_table(app, main.proc_table)
        # The long --config path never fits, even at 200 columns: every command line ends cut.
        vllm = line_of_pid(procs, long_pid(demo_pid("vllm_serve.py")))
        assert vllm.rstrip().endswith("…"), vllm


def note_cell() -> Cell:
    return Cell.parts(
        ("dead PID; memory held by ", ""), ("7612", "", True), (" (hidden) · python train.py", "")
    )


@pytest.mark.parametrize(
    ("width", "shown"),
    [
        (60, "dead PID; memory held by 7612 (hidden) · python train.py"),
        (40, "dead PID; memory held by 7612 (hidden) …"),
        (31, "dead PID; memory held by 7612 …"),
        (28, "dead PID; memory hel… 7612 …"),  # the words before the number give way
        (8, "… 7612 …"),
        (7, "dead P…"),  # no room for the number: it goes whole, its place shows "…"
        (1, "…"),
    ],
)
def test_fit_keeps_numbers_whole(width: int, shown: str) -> None:
    fitted = fit(note_cell(), width)
    assert fitted.plain == shown
    assert fitted.cell_len <= width


def test_fit_drops_the_last_numbers_whole() -> None:
    cell = Cell.parts(("held by ", ""), ("4125299", "", True), (", ", ""), ("4125300", "", True))
    assert fit(cell, 30).plain == "held by 4125299, 4125300"
    assert fit(cell, 20).plain == "he… 4125299, 4125300"  # the words give way first
    assert fit(cell, 17).plain == "held by 4125299,…"  # then the last number goes, whole
    assert fit(cell, 11).plain == "… 4125299,…"
    assert fit(cell, 10).plain == "held by …"
    for width in range(1, 30):
        plain = fit(cell, width).plain
        assert len(plain) <= width
        assert not re.search(r"(?<!\d)4125\d{0,2}(?!\d)", plain)  # a PID whole or not at all


def test_fit_keeps_styles_and_the_sort_key() -> None:
    cell = Cell.parts(
        ("ghost ", "red"), ("123", "bold", True), (" and a long tail of words", "blue"), sort_key=7
    )
    fitted = fit(cell, 14)
    assert fitted.plain == "ghost 123 and…" and fitted.sort_key == 7
    assert {str(span.style) for span in fitted.spans} == {"red", "bold", "blue"}


async def test_right_and_left_show_the_rest_of_the_command_lines() -> None:
    """The command column is cut to the pane; → and ← move along the command lines while the PID,
    the kind and the memory stay in view (nvitop's way)."""
    app = long_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        main = app._main
        main.select_host(HOSTS["demo-a"])
        await redrawn(pilot)
        table = main.proc_table
        table.focus()
        sample = app.fleet.view(HOSTS["demo-a"]).sample
        vllm = max(sample.processes, key=lambda p: len(" ".join(p.command))).pid  # the longest line
        start = line_of_pid(check_table(app, table), vllm)
        assert "python -S" in start and "config.yaml" not in start
        for _ in range(20):  # past the end: it stops where the longest line ends
            await pilot.press("right")
        await redrawn(pilot)
        moved = line_of_pid(check_table(app, table), vllm)
        assert "config.yaml" in moved and "python -S" not in moved
        assert "…" in moved.split("GiB", 1)[1]  # the command starts cut, and shows it
        assert "commands from character" in table.border_title
        offset = table.command_offset
        await pilot.press("left")
        assert table.command_offset == offset - ProcTable.COMMAND_STEP
        await pilot.press("home")
        await redrawn(pilot)
        assert line_of_pid(check_table(app, table), vllm) == start
        assert "commands from" not in table.border_title


def test_fit_end_cuts_prose_between_words() -> None:
    line = Cell.numbers("driver 580.159.04  ·  CUDA 13.0  ·  4× NVIDIA H200, 0 free")
    assert fit_end(line, 80).plain == line.plain
    assert fit_end(line, 40).plain == "driver 580.159.04  ·  CUDA 13.0  ·  4×…"
    assert fit_end(line, 38).plain == "driver 580.159.04  ·  CUDA 13.0  ·…"
    for width in range(1, len(line.plain)):
        plain = fit_end(line, width).plain
        assert len(plain) <= width and plain.endswith("…")
        assert not re.search(r"(?<![\d.])(5|58|580\.1|580\.15|13\.)…", plain)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_status_line_cuts_between_words(size: tuple[int, int]) -> None:
    app = long_app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        app._main.select_host(HOSTS["demo-a"])
        await redrawn(pilot)
        status = next(strip.text for strip in app.screen._compositor.render_strips()).rstrip()
        assert len(status) <= size[0] and not CUT_NUMBER.search(status)
        assert "580.159.04-sim" in status or "580" not in status  # the driver's version whole, or gone
        if size[0] < 150:
            assert status.endswith("…")

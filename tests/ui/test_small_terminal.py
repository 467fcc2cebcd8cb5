"""A terminal below the smallest useful size (issue 19, item 2).

Some `script` sessions, `docker exec -t` and serial consoles report 0x0. The dashboard then laid
itself out again and again (Textual took 80x25 from Rich and 80x24 from shutil for the same screen):
95-100 % CPU and ~1.3 MB/s of redraws. Below 60x15 gputui now shows one line that says so, draws
nothing else and redraws nothing, and the dashboard comes back when the terminal grows.

The pty test runs `gputui --demo` as a person does (tests/support/ptyapp.py) and asserts on bytes written,
which load cannot change: a redraw loop writes megabytes where one line is a few hundred bytes.
"""

from __future__ import annotations

import fcntl
import re
import struct
import termios
from pathlib import Path
from typing import Any

import pytest

from gputui.ui.app import MIN_SIZE
from gputui.ui.panels.kill import KILL_ACTIONS
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.too_small import TooSmallScreen
from tests.support.apps import build_app
from tests.support.pilot import redrawn, screen_text, settle
from tests.support.ptyapp import PtyApp

QUIET_BYTES = 64 * 1024  # what a 0x0 terminal may receive in 3 s once up: a loop writes megabytes


def words(width: int, height: int) -> str:
    return f"gputui needs at least {MIN_SIZE[0]}x{MIN_SIZE[1]}; this terminal is {width}x{height}"


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def set_size(app: PtyApp, columns: int, rows: int) -> None:
    """Resize the pty, as a terminal window does (the app gets SIGWINCH)."""
    assert app.master is not None
    fcntl.ioctl(app.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


async def test_a_tiny_terminal_shows_one_line_and_nothing_else() -> None:
    app = build_app()
    async with app.run_test(size=(10, 5)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, TooSmallScreen)
        shown = flat(screen_text(app))  # wrapped to the 10 columns, as much as 5 rows hold
        assert shown.startswith("gputui needs at least") and words(10, 5).startswith(shown), shown
        await pilot.resize_terminal(59, 40)  # one column short
        await pilot.pause()
        assert flat(screen_text(app)) == words(59, 40)
        await pilot.resize_terminal(120, 36)
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        assert "All GPUs" in screen_text(app)
        await pilot.resize_terminal(80, 14)  # and back
        await pilot.pause()
        assert isinstance(app.screen, TooSmallScreen)
        assert flat(screen_text(app)) == words(80, 14)
        await pilot.press("q")  # the one key that does something here
        await pilot.pause()
    assert app.return_code == 0


async def test_the_smallest_size_is_a_dashboard() -> None:
    app = build_app()
    async with app.run_test(size=MIN_SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        await pilot.press("right_square_bracket")
        await redrawn(pilot)
        text = screen_text(app)
        assert "GPUs · demo-a" in text and "Processes" in text


@pytest.mark.timeout(300)  # generous deadlines for a busy machine: the demo's probes start first
def test_a_0x0_terminal_gets_one_line_and_no_redraw_loop(tmp_path: Path) -> None:
    app = PtyApp(tmp_path, size=(0, 0))
    try:
        app.wait_for(lambda: app.shows(words(0, 0)), 60, "the line that says the terminal is too small")
        app.up()  # the probes run, samples arrive: nothing of them is drawn
        app.pause(1.0)
        mark = app.mark()
        app.pause(3.0)
        written = len(app.output) - mark
        assert written < QUIET_BYTES, f"{written} bytes in 3 s to a 0x0 terminal: a redraw loop"
        for drawn in (b"Processes", b"All GPUs", b"Hosts"):
            assert drawn not in app.output, f"{drawn!r} drawn on a 0x0 terminal"

        set_size(app, 120, 36)
        mark = app.mark()
        app.wait_for(lambda: app.shows("All GPUs", since=mark), 60, "the dashboard at 120x36")
        assert app.proc.poll() is None
    finally:
        app.close()


def test_the_footer_may_ask_what_is_offered_before_the_screen_has_its_widgets() -> None:
    """A terminal that was 0x0 and grows makes the footer compose again, and ask the screen which
    keys to offer, before the screen's on_mount has cached its widgets: that ended the app with an
    AttributeError (once in a CI run of the test above). Until then nothing is judged."""
    screen = MainScreen()
    for action in (*KILL_ACTIONS, "free_only", "refuse", "quit"):
        assert screen.check_action(action, ()) is None


def _cursor_in_sight(table: Any) -> bool:
    """Whether the table's cursor row is among the rows its frame shows (rows are one line high)."""
    rows = table.scrollable_content_region.height - (table.header_height if table.show_header else 0)
    return table.row_count > 0 and table.scroll_y <= table.cursor_row < table.scroll_y + rows


@pytest.mark.parametrize("size", [MIN_SIZE, (80, 18), (130, 15)])
async def test_the_action_log_leaves_the_tables_rows_their_keys_act_on(size: tuple[int, int]) -> None:
    """With the action log open on a short terminal the log once took ten rows, the GPU table kept
    its frame and no row, and the footer still offered f and F on a row no one could see. The log
    now yields; wherever kill keys are offered, the row they act on is in sight."""
    app = build_app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        main = app.screen
        assert isinstance(main, MainScreen)
        for keys in (["l"], ["right_square_bracket"], ["tab"], ["slash"]):
            await pilot.press(*keys)
            await redrawn(pilot)
            table = app.focused if keys != ["slash"] else main.proc_table
            offered = [a for a in KILL_ACTIONS if main.check_action(a, ())]
            assert offered, (size, keys)
            assert table is not None and _cursor_in_sight(table), (size, keys, table, table.region)

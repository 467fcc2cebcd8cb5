"""`gputui wait`'s live line on a real terminal (issue 19, item 7): it fits the terminal's width and
is redrawn in place, so the screen shows one line however many samples come.

It was cut at 200 characters whatever the width: at 160 columns, 4 busy GPUs made a line that
wrapped, and the carriage return of each redraw went back only to the start of its last row, leaving
a stale copy of the first row every 0.25 s. A real pty of 80 and 160 columns (TIOCSWINSZ and
COLUMNS), `gputui wait --demo demo-a` on its busy GPUs, and tests/support/vt.py to see what is left.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from tests.support.ttyrun import on_pty
from tests.support.vt import Screen

REPO = Path(__file__).resolve().parents[2]
REPORT = b"gputui wait: not ready"


def run_on_pty(columns: int, *args: str, lines: int = 50) -> tuple[int, bytes]:
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS=str(columns), LINES=str(lines), TERM="xterm")
    return on_pty([sys.executable, "-m", "gputui", *args], env=env, cwd=REPO, size=(columns, lines))


@pytest.mark.parametrize("columns", [80, 160])
def test_the_live_line_fits_the_width_and_leaves_no_stale_copies(columns):
    code, out = run_on_pty(columns, "wait", "--demo", "demo-a", "--timeout", "6")
    assert code == 1, out.decode(errors="replace")  # demo-a's GPUs are busy: a timeout
    live, report = out.split(REPORT, 1) if REPORT in out else (out, b"")
    assert report, out.decode(errors="replace")
    assert b"\r\x1b[K" in live, "no live line was drawn"
    screen = Screen(columns)
    screen.feed(live)
    # Nothing the live line wrote was wider than the terminal...
    assert screen.wraps == 0, screen.text()
    # ...and every redraw replaced the last: one line on the screen, none left behind.
    assert len([row for row in screen.text() if row]) <= 1, screen.text()
    # What it said: the GPUs waited for, each with what it waits for (cut, not dropped).
    for frame in live.split(b"\r\x1b[K")[1:]:
        text = frame.decode()
        if text:
            assert "demo-a" in text and all(f"GPU {i}" in text for i in range(4)), text


# The condition names the live line once shortened (`procs,mem,unacc,u…`): a reader had to guess them.
ABBREVIATIONS = re.compile(r"\b(procs|mem|unacc|util|temp|persist)\b|,u…")


@pytest.mark.parametrize("columns", [80, 160])
def test_the_live_line_says_how_long_it_has_waited_and_abbreviates_nothing(columns):
    """Each redraw says the seconds waited of the --timeout; what a GPU waits for is whole words
    (cut with an ellipsis only where enough of them is left to read), never abbreviations."""
    code, out = run_on_pty(columns, "wait", "--demo", "demo-a", "--timeout", "6")
    live = out.split(REPORT, 1)[0]
    frames = [f.decode() for f in live.split(b"\r\x1b[K")[1:] if f.strip()]
    assert code == 1 and frames, out.decode(errors="replace")
    for text in frames:
        assert re.search(r"ready, \d+ s of 6 s \| ", text), text
        assert not ABBREVIATIONS.search(text), text

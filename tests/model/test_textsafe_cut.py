"""textsafe.cut, the one way the CLI and the reports shorten text: at most the width in terminal
cells, whole where it fits, and marked wherever it cut (`…`, or `...` where the output cannot take
`…`); pad and fit, the table columns and rows built on it."""

from __future__ import annotations

import os
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from gputui.model.textsafe import (
    ASCII_ELLIPSIS,
    ELLIPSIS,
    cells,
    cut,
    ellipsis_for,
    fit,
    pad,
    printable,
    shortened,
)
from tests.support.fuzzing import FUZZ
from tests.support.paths import REPO

# Text as hosts send it: wide (CJK, emoji), combining and enclosing marks, control characters.
TEXT = st.text(
    st.one_of(
        st.characters(),
        st.sampled_from("日本語テキスト🚀\u0301\u0308\u20dd\x1b\x07\n\u202e…/ "),
    ),
    max_size=80,
)
MARKS = st.sampled_from([ELLIPSIS, ASCII_ELLIPSIS])


@FUZZ
@given(TEXT, st.integers(min_value=0, max_value=90), MARKS)
def test_a_cut_fits_is_whole_when_it_can_and_is_marked_when_it_is_not(
    text: str, width: int, mark: str
) -> None:
    shown = printable(text)
    out = cut(text, width, mark)
    assert cells(out) <= width
    if cells(shown) <= width:
        assert out == shown  # cut iff longer: what fits is never touched
    elif width >= cells(mark):
        assert out != shown and out.endswith(mark)  # every cut is marked
        assert shown.startswith(out[: -len(mark)])  # and keeps the start, escaped as shown whole
    elif width >= 1:
        assert out == mark[:width]  # no room but for (part of) the mark: still a mark


@FUZZ
@given(TEXT, st.integers(min_value=0, max_value=90))
def test_a_column_is_exactly_its_width_in_cells(text: str, width: int) -> None:
    for right in (False, True):
        column = pad(text, width, right)
        assert cells(column) == width
        assert column.strip(" ") == cut(text, width).strip(" ")


@FUZZ
@given(TEXT, TEXT, st.integers(min_value=0, max_value=120), st.integers(min_value=1, max_value=40))
def test_a_row_keeps_its_head_and_tail_and_cuts_the_text(
    text: str, note: str, width: int, least: int
) -> None:
    head, tail = "   4121  root  ", f"  ({printable(note)})"
    row = fit(head, text, tail, width, least)
    assert row.startswith(head) and row.endswith(tail)
    middle = row[len(head) : len(row) - len(tail)]
    room = max(width - cells(head) - cells(tail), least)
    assert middle == cut(text, room)
    if cells(printable(text)) > room:
        assert cells(row) <= max(width, cells(head) + least + cells(tail))


def test_wide_and_combining_characters_are_counted_by_their_cells() -> None:
    assert cut("日本語のテキスト", 5, ELLIPSIS) == "日本…"  # 2 + 2 + 1: a third wide one would not fit
    assert cut("日本語のテキスト", 6, ELLIPSIS) == "日本…"  # still: the mark takes the last cell
    accents = "e\u0301" * 10  # ten cells: each accent takes none
    assert cells(accents) == 10 and cut(accents, 10, ELLIPSIS) == accents
    assert cut(accents, 5, ELLIPSIS) == "e\u0301" * 4 + ELLIPSIS
    assert cells("a\u20dd") == 1  # an enclosing mark (class 0) is drawn on the letter
    assert cut("\x1b[31mred", 4, ELLIPSIS) == "\\e[…"  # escaped first, then cut: never a raw ESC


def test_the_mark_is_ascii_only_where_the_output_cannot_take_the_ellipsis() -> None:
    assert ellipsis_for("utf-8") == ELLIPSIS
    assert ellipsis_for("cp1252") == ELLIPSIS  # Windows' code page has `…`
    assert ellipsis_for("ascii") == ASCII_ELLIPSIS
    assert ellipsis_for("latin-1") == ASCII_ELLIPSIS
    assert ellipsis_for(None) == ELLIPSIS
    assert ellipsis_for("no-such-codec") == ELLIPSIS


def test_a_process_whose_output_is_ascii_cuts_with_three_dots() -> None:
    code = "from gputui.model.textsafe import cut; print(cut('x' * 50, 10))"
    for encoding, expected in (("utf-8", "x" * 9 + ELLIPSIS), ("ascii", "x" * 7 + ASCII_ELLIPSIS)):
        env = dict(os.environ, PYTHONIOENCODING=encoding, PYTHONPATH=str(REPO))
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, check=False, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.decode(encoding).rstrip("\n") == expected


def test_shortened_marks_the_cut_and_keeps_the_text_as_it_was() -> None:
    """Stored text (a host's last problem, a recorded status's detail) is escaped where it is shown:
    shortened, it keeps its backslashes and escapes as they were, and a cut ends in the mark."""
    assert shortened("short", 10) == "short"
    assert shortened("x" * 10, 10) == "x" * 10
    long = "a\\b\x1b[2J" + "y" * 50
    assert shortened(long, 12) == long[:11] + "\u2026" and len(shortened(long, 12)) == 12

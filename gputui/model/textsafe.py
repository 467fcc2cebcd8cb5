"""Untrusted text (process names, command lines, anything from a remote host) made safe to show.

Control characters are replaced by visible escapes, so an ESC or BEL from a process name can neither
drive the terminal nor end up raw in an SVG screenshot; markup is never interpreted by callers, who
wrap the result in rich.text.Text (the UI) or print it plainly (the CLI).

Text cut to a width is marked where it was cut (`cut`): a command line that looks whole but is not
would be a lie in a kill plan. The CLI and the reports shorten every text through `cut`, `pad` and
`fit`, as the dashboard's cells cut with an ellipsis.
"""

from __future__ import annotations

import functools
import sys
import unicodedata

from gputui.probe.wire import printable

# The one escaping rule is the wire's (the probe escapes its own messages with it too).
__all__ = [
    "ASCII_ELLIPSIS",
    "ELLIPSIS",
    "ascii_only",
    "cells",
    "cut",
    "ellipsis_for",
    "encodable",
    "fit",
    "output_ellipsis",
    "pad",
    "printable",
    "set_ascii_only",
]


# -- text cut to a width, marked where it was cut ---------------------------------------------


def cells(text: str) -> int:
    """How many terminal cells `text` takes (wide characters two, combining ones none)."""
    if text.isascii():
        return len(text)
    return sum(_cell(ch) for ch in text)


def _cell(ch: str) -> int:
    # Marks drawn on the character before them take no cell of their own: combining classes, and
    # the enclosing and non-spacing marks of class 0 (U+20DD) alike.
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


ELLIPSIS = "…"
ASCII_ELLIPSIS = "..."  # where the output cannot take the one-cell ellipsis (an ASCII or Latin-1 locale)


@functools.lru_cache(maxsize=16)
def ellipsis_for(encoding: str | None) -> str:
    """The mark of a cut in output of `encoding`: `…`, or `...` where that encoding has no `…`
    (None, unknown to Python: `…`, as Python then writes UTF-8)."""
    if not encoding:
        return ELLIPSIS
    try:
        ELLIPSIS.encode(encoding)
    except UnicodeEncodeError:
        return ASCII_ELLIPSIS
    except LookupError:
        return ELLIPSIS
    return ELLIPSIS


# Whether this process writes ASCII only: the CLI's ASCII mode (`--ascii`, or a locale that is not
# UTF-8: gputui/cli/streams.py), which writes each glyph as one ASCII character as it goes out. A cut
# must know it before: its mark is then `...`, three cells, not a `…` that would become one `~`.
_ASCII_ONLY = [False]


def ascii_only() -> bool:
    """Whether this process's output is ASCII only (set_ascii_only)."""
    return _ASCII_ONLY[0]


def set_ascii_only(on: bool) -> bool:
    """Say whether this process's output is ASCII only from now on; what it was before."""
    before, _ASCII_ONLY[0] = _ASCII_ONLY[0], on
    return before


def output_ellipsis() -> str:
    """The mark of a cut in this process's output: `...` in ASCII mode or where its stdout or stderr
    cannot take `…` (both are read: `wait` draws on stderr, `clean --json` prints its plan there)."""
    if ascii_only():
        return ASCII_ELLIPSIS
    for stream in (sys.__stdout__, sys.__stderr__):
        if ellipsis_for(getattr(stream, "encoding", None)) != ELLIPSIS:
            return ASCII_ELLIPSIS
    return ELLIPSIS


def encodable(text: str, encoding: str | None) -> str:
    """`text` as output in `encoding` can take it: unchanged where it can (UTF-8; None or an encoding
    unknown to Python, which then writes UTF-8), else `...` for each `…` where it has none, and any
    other character it has not as an escape (`\\xe9`, `\\u2026`), as `printable` writes the
    invisible ones: a name from a host never makes a whole plan's output fail on an ASCII terminal."""
    if not encoding:
        return text
    try:
        text.encode(encoding)
        return text
    except UnicodeEncodeError:
        pass
    except LookupError:
        return text
    if ellipsis_for(encoding) != ELLIPSIS:
        text = text.replace(ELLIPSIS, ASCII_ELLIPSIS)
    return text.encode(encoding, "backslashreplace").decode(encoding)


def shortened(text: str, limit: int) -> str:
    """`text` kept at most `limit` characters, its last a "…" where it was cut: for text that is
    stored (a host's last problem, a recorded status's detail) and escaped where it is shown, so
    not escaped here (`cut` escapes: shown, it would be escaped twice)."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + ELLIPSIS


def cut(text: str, width: int, mark: str | None = None) -> str:
    """`text` made printable (escaped) in at most `width` cells: whole where it fits, else its start
    and a mark where it was cut (`mark`, by default `…`, or `...` where the output cannot take it:
    output_ellipsis). Never a silent slice: every shortened command, name or note goes through here.
    Empty for a width below 1; a mark wider than `width` is itself cut (`..` in 2 cells)."""
    text = printable(text)
    if cells(text) <= width:
        return text
    if width < 1:
        return ""
    mark = output_ellipsis() if mark is None else mark
    room = width - cells(mark)
    if room < 0:
        return mark[:width]
    out, used = [], 0
    for ch in text:
        w = _cell(ch)
        if used + w > room:
            break
        out.append(ch)
        used += w
    return "".join(out) + mark


def pad(text: str, width: int, right: bool = False) -> str:
    """`text` cut to `width` cells (cut) and padded with spaces to exactly `width`: a table's column,
    aligned by the cells it takes (a wide character is two), not by its length in characters.
    `right`: aligned right, as numbers are."""
    shown = cut(text, width)
    fill = " " * max(width - cells(shown), 0)
    return fill + shown if right else shown + fill


def fit(head: str, text: str, tail: str, width: int, least: int) -> str:
    """`head`, then `text`, then `tail` on a line of `width` cells: head and tail whole, the text
    giving way (cut with a mark) to what they leave, but never to fewer than `least` cells (then the
    line is longer than `width`, and the terminal wraps it: nothing is lost)."""
    room = max(width - cells(head) - cells(tail), least)
    return head + cut(text, room) + tail

"""ASCII mode: the glyphs gputui draws (blocks, braille, box lines, marks), each as one ASCII
character, for a terminal that cannot show them (`--ascii`, or a locale that is not UTF-8).

The dashboard's output is translated as it is written (gputui/ui/terminal.py), so every glyph is
caught, Textual's own (borders, scroll bars) included. Each becomes exactly as many cells as it
took, so nothing on the screen moves: a one-cell glyph one character, a wide one (CJK in a process
name) two `?`, a combining mark nothing. Sparkline levels keep their order (`_.-:=+*#`), so a chart
still reads as one.

Whether the terminal shows them is the locale's word, as for any terminal program: LC_ALL, else
LC_CTYPE, else LANG, naming UTF-8. Python itself writes UTF-8 in the C locale (its UTF-8 mode and
locale coercion, PEP 538 and 540), which says nothing of the terminal; and the LC_CTYPE=C.UTF-8
Python sets when it coerces a C locale is not the user's: over LANG=C (or none) it counts as C.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping

from gputui.model.textsafe import cells

__all__ = ["ASCII", "SPARK_ASCII", "shows_unicode", "to_ascii"]

SPARK_ASCII = "_.-:=+*#"  # the eight sparkline levels, lowest first

_PAIRS = {
    # Sparklines and vertical eighths, lowest first; the upper half and eighth blocks.
    **dict(zip("▁▂▃▄▅▆▇█", SPARK_ASCII, strict=True)),
    "▀": "-",
    "▔": "-",
    "▐": "#",
    "▕": "|",
    # A meter's partial cell: a sliver as a bar, half or more as a full block.
    "▏": "|",
    "▎": "|",
    "▍": "|",
    "▌": "#",
    "▋": "#",
    "▊": "#",
    "▉": "#",
    "░": ".",
    "▒": ":",
    "▓": "#",
    "■": "#",
    # Box drawing (Textual's borders and gputui's tree).
    **dict.fromkeys("─━═╌╍┄┅┈┉╴╶╸╺", "-"),
    **dict.fromkeys("│┃║╎╏┆┇┊┋╵╷╹╻", "|"),
    **dict.fromkeys("┌┐└┘╭╮╰╯├┤┬┴┼┏┓┗┛┣┫┳┻╋╔╗╚╝╠╣╦╩╬╒╓╕╖╘╙╛╜╞╟╡╢╤╥╧╨╪╫┍┎┑┒┕┖┙┚┝┞┟┠┡┢┥┦┧┨┩┪", "+"),
    # Marks and symbols.
    "·": ".",
    "•": "*",
    "●": "*",
    "◉": "*",
    "○": "o",
    "◌": "o",
    "◯": "o",
    "◆": "*",
    "◇": "o",
    "✓": "+",
    "✔": "+",
    "✗": "x",
    "✘": "x",
    "×": "x",
    "⚑": "!",
    "⚠": "!",
    "…": "~",
    "→": ">",
    "←": "<",
    "↑": "^",
    "↓": "v",
    "▲": "^",
    "▼": "v",
    "▶": ">",
    "◀": "<",
    "▸": ">",
    "▾": "v",
    "⏎": "<",
    "≤": "<",
    "≥": ">",
    "±": "+",
    "°": " ",
    "µ": "u",
    "—": "-",
    "–": "-",
    "‘": "'",
    "’": "'",
    "“": '"',
    "”": '"',
    "\u00a0": " ",
}
ASCII: Mapping[int, str] = {ord(glyph): plain for glyph, plain in _PAIRS.items()}
_NOT_ASCII = re.compile(r"[^\x00-\x7f]")


def _stand_in(match: re.Match[str]) -> str:
    ch = match.group()
    if "\u2800" <= ch <= "\u28ff":  # braille: blank, or as many dots as a cell can show
        return " " if ch == "\u2800" else ":"
    return "?" * cells(ch)


def to_ascii(text: str) -> str:
    """`text` with every glyph as its ASCII stand-in, each as many cells wide as it was."""
    if text.isascii():
        return text
    text = text.translate(ASCII)
    return text if text.isascii() else _NOT_ASCII.sub(_stand_in, text)


def _utf8(name: str) -> bool:
    return name.replace("-", "").lower().split("@")[0].endswith("utf8")


def shows_unicode(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the terminal takes UTF-8, as the locale says (the module's docstring)."""
    env = os.environ if environ is None else environ
    if env.get("LC_ALL"):
        return _utf8(env["LC_ALL"])
    ctype, lang = env.get("LC_CTYPE"), env.get("LANG", "")
    if ctype and not _coerced(ctype, lang):
        return _utf8(ctype)
    return _utf8(lang)


def _coerced(ctype: str, lang: str) -> bool:
    """Whether LC_CTYPE is what Python's coercion of the C locale set (PEP 538), here or in a Python
    that ran this one (a launcher that execs): C.UTF-8 over a C locale; plain UTF-8 (where there is
    no C.UTF-8) only with the UTF-8 mode that coercion turns on."""
    if ctype in ("C.UTF-8", "C.utf8"):
        return lang in ("", "C", "POSIX")
    return ctype == "UTF-8" and bool(sys.flags.utf8_mode) and not os.environ.get("PYTHONUTF8")

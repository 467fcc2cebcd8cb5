"""Untrusted text (process names, command lines, anything from a remote host) made safe to show.

Control characters are replaced by visible escapes, so an ESC or BEL from a process name can neither
drive the terminal nor end up raw in an SVG screenshot; markup is never interpreted by callers, who
wrap the result in rich.text.Text (the UI) or print it plainly (the CLI).
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Invisible format characters that reorder or hide text (bidi overrides and isolates, zero-width
# characters, BOM): escaped too, so that a name cannot disguise itself or what follows it.
_INVISIBLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2028\u2029\u2060-\u2069\ufeff]")
_EITHER = re.compile(_CONTROL.pattern[:-1] + _INVISIBLE.pattern[1:])


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ord(ch) > 0xFF:
        return f"\\u{ord(ch):04x}"
    return {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\x1b": "\\e"}.get(ch, f"\\x{ord(ch):02x}")


def printable(text: str) -> str:
    """`text` with every control character shown as an escape (\\e, \\x07, \\n) and every
    invisible reordering or zero-width character as \\u202e. The one escaping function: every
    string that came from a host goes through it before any output (gputui.model applies it when a
    record is parsed; the UI's fmt.safe and the CLI's printing apply it again, harmlessly)."""
    return _EITHER.sub(_escape, text) if _EITHER.search(text) else text

"""Untrusted text (process names, command lines, anything from a remote host) made safe to show.

Control characters are replaced by visible escapes, so an ESC or BEL from a process name can neither
drive the terminal nor end up raw in an SVG screenshot; markup is never interpreted by callers, who
wrap the result in rich.text.Text (the UI) or print it plainly (the CLI).
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    return {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\x1b": "\\e"}.get(ch, f"\\x{ord(ch):02x}")


def printable(text: str) -> str:
    """`text` with every control character shown as an escape (\\e, \\x07, \\n)."""
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text

"""A small terminal for tests: what a program's output leaves on a screen of `columns` x `lines`.

Enough of a VT100/xterm to judge line-based output: printable characters (wide ones take two
cells) with xterm's deferred auto-wrap at the right margin, CR, LF (scrolling into an unbounded
scroll-back), BS, ESC [ K (erase in line), ESC [ J / 2J (erase in display), ESC [ H (home, or a
row and column); every other escape sequence is skipped. `wraps` counts the lines the terminal had
to wrap: output that fits the width never makes one.
"""

from __future__ import annotations

import re
import unicodedata

_CSI = re.compile(r"\x1b\[([0-9;?]*)([@-~])")
_OTHER_ESC = re.compile(r"\x1b[()][0-9A-Za-z]|\x1b[=>78c]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def cell_width(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


class Screen:
    def __init__(self, columns: int, lines: int = 50) -> None:
        self.columns = columns
        self.lines = lines
        self.rows: list[list[str]] = [[] for _ in range(lines)]
        self.row = 0
        self.col = 0
        self.pending_wrap = False
        self.wraps = 0

    @property
    def top(self) -> int:
        return len(self.rows) - self.lines

    def feed(self, data: bytes | str) -> None:
        text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
        i = 0
        while i < len(text):
            ch = text[i]
            if ch == "\x1b":
                match = _CSI.match(text, i) or _OTHER_ESC.match(text, i)
                if match is None:
                    i += 1
                    continue
                if match.re is _CSI:
                    self._csi(match.group(1), match.group(2))
                i = match.end()
                continue
            if ch == "\r":
                self.col, self.pending_wrap = 0, False
            elif ch == "\n":
                self._down()
            elif ch == "\b":
                self.col, self.pending_wrap = max(0, self.col - 1), False
            elif ch >= " ":
                self._put(ch)
            i += 1

    def _down(self) -> None:
        self.pending_wrap = False
        self.row += 1
        if self.row >= len(self.rows):
            self.rows.append([])

    def _put(self, ch: str) -> None:
        width = cell_width(ch)
        if width == 0:
            return
        if self.pending_wrap or self.col + width > self.columns:
            self.wraps += 1
            self.col = 0
            self._down()
        line = self.rows[self.row]
        while len(line) < self.col + width:
            line.append(" ")
        line[self.col] = ch
        if width == 2:
            line[self.col + 1] = ""
        self.col += width
        if self.col >= self.columns:
            self.col, self.pending_wrap = self.columns - 1, True

    def _csi(self, params: str, final: str) -> None:
        args = [int(p) if p.isdigit() else 0 for p in params.split(";")] if params else []
        first = args[0] if args else 0
        if final == "K":
            line = self.rows[self.row]
            if first == 0:
                del line[self.col :]
            elif first == 1:
                line[: self.col + 1] = [" "] * min(len(line), self.col + 1)
            else:
                line.clear()
        elif final == "J":
            start = self.top
            if first == 0:
                del self.rows[self.row][self.col :]
                start = self.row + 1
            for r in range(max(start, self.top), len(self.rows)):
                self.rows[r] = []
        elif final in "Hf":
            row = (args[0] if args else 1) or 1
            col = (args[1] if len(args) > 1 else 1) or 1
            self.row = self.top + min(row, self.lines) - 1
            self.col, self.pending_wrap = min(col, self.columns) - 1, False
        self.pending_wrap = self.pending_wrap and final not in "KJ"

    def text(self) -> list[str]:
        """Every row, scroll-back included, trailing blanks and empty rows at the end dropped."""
        out = ["".join(r).rstrip() for r in self.rows]
        while out and not out[-1]:
            out.pop()
        return out

    def visible(self) -> list[str]:
        return ["".join(r).rstrip() for r in self.rows[self.top :]]

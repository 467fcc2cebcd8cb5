"""Where `gputui clean` (and its `--reset-gpu`) writes and asks: the plan and the stages for people,
one JSON document (versions.CLEAN_JSON) for scripts, the confirmation prompt.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
from dataclasses import dataclass
from typing import Any, TextIO

from ..model.textsafe import printable
from ..text.words import columns
from . import streams


@dataclass
class Console:
    """Where `gputui clean` writes: the plan and stages for people, the JSON for scripts.

    Both streams are guarded (gputui/cli/streams.py): a closed or full stdout or stderr, or a pipe whose
    reader left (`| head -2`), never raises into a plan; the log has it all, and `report` says once
    what happened to the output."""

    out: TextIO
    err: TextIO
    stdin: TextIO
    json: bool

    def __post_init__(self) -> None:
        self.out_guard = streams.guarded(self.out, "stdout")
        self.err_guard = streams.guarded(self.err, "stderr")
        self.out, self.err = streams.as_text(self.out_guard), streams.as_text(self.err_guard)

    @property
    def human(self) -> TextIO:
        """Where the plan and the stages go: stdout, or stderr when stdout carries the JSON."""
        return self.err if self.json else self.out

    @property
    def width(self) -> int:
        """How many cells wide the lines for people may be: the terminal's (or $COLUMNS), 80 where
        neither says (a pipe, a file): the width a plan's and a verdict's commands are cut to."""
        return columns(self.human)

    def _write(self, stream: TextIO, text: str) -> None:
        # Through the guard, which writes what the stream's encoding takes (an ASCII locale).
        print(text, file=stream, flush=True)

    def say(self, text: str = "") -> None:
        # Every line may carry text from a host: escape once more as a last guard (idempotent).
        self._write(self.human, printable(text))

    def warn(self, text: str) -> None:
        self._write(self.err, f"gputui: {printable(text)}")

    def document(self, doc: dict[str, Any]) -> None:
        self._write(self.out, json.dumps(doc, indent=2, ensure_ascii=True))

    def report(self, log: os.PathLike[str] | str) -> None:
        """Say once (on stderr, if it works) that stdout failed, and where the whole story is."""
        self.out_guard.flush()
        problem = self.out_guard.problem()
        if problem is not None and not self.out_guard.reported:
            self.out_guard.reported = True
            self.warn(f"{problem}: output lost there; every plan, signal and verdict is in {log}")

    async def confirm(self) -> bool | None:
        """True or False from the operator; None when there is no terminal to ask on. A Ctrl+C at the
        prompt is said (nothing was sent) and goes on up."""
        isatty = getattr(self.stdin, "isatty", None)
        if not (isatty and isatty()):
            return None
        print("Proceed? [y/N] ", end="", file=self.human, flush=True)
        try:
            line = await read_line(self.stdin)
        except asyncio.CancelledError:
            self.say()
            self.warn("interrupted (Ctrl+C) at the prompt: nothing was sent")
            raise
        return line.strip().lower() in ("y", "yes")


async def read_line(stream: TextIO) -> str:
    """A line from `stream`, read on a daemon thread of its own. Not asyncio.to_thread: the event
    loop's executor is joined when asyncio.run ends, so a Ctrl+C at the prompt waited for Enter; a
    read left blocked on a daemon thread holds nothing up (the line, if any, is never used)."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str] = loop.create_future()

    def give(line: str) -> None:
        if not answer.done():
            answer.set_result(line)

    def read() -> None:
        try:
            line = stream.readline()
        except (OSError, ValueError):
            line = ""
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is asking any more
            loop.call_soon_threadsafe(give, line)

    threading.Thread(target=read, name="gputui-confirm", daemon=True).start()
    return await answer

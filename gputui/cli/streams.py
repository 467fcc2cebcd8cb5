"""Output that cannot stop a command: stdout and stderr whose trouble is recorded, never raised.

`gputui clean` is for scripts, and a script's stdout may be closed (`>&-`), a full disk (`> /dev/full`,
a small tmpfs that fills mid-plan) or a pipe whose reader left (`| head -2`). None of that may stop a
plan, lose its verdict or change the exit code: a plan is bounded in time and logged before and after
each signal (gputui/kill/auditlog.py) whatever its printing does. So the commands write through `Guarded`
streams: the first failure is kept, later writes are dropped, and the command says once, on stderr if
stderr works, what happened to its output (docs/RELIABILITY.md "Output trouble").

Every command's output also follows ASCII mode (`output_mode`): `--ascii`, or a locale that is not
UTF-8, as the dashboard's (gputui/text/glyphs.py), so each glyph goes out as the dashboard's one-cell
stand-in and nothing in a column moves.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any, TextIO, cast

from ..model.textsafe import ascii_only, encodable, printable, set_ascii_only
from ..text.glyphs import shows_unicode, to_ascii
from .exits import Exit

ASCII_OPTION = "--ascii"


def for_output(text: str) -> str:
    """`text` as this process writes it: in ASCII mode each glyph as its stand-in (text/glyphs.py)."""
    return to_ascii(text) if ascii_only() else text


class Guarded(io.TextIOBase):
    """A text stream over `stream` (None: closed at start) that never raises on write or flush."""

    def __init__(self, stream: TextIO | None, name: str) -> None:
        super().__init__()
        self.stream = stream
        self.name = name  # "stdout", "stderr"
        self.trouble: str | None = None if stream is not None else "is closed"
        self.broken_pipe = False  # the reader left (`| head`): the usual end of a pipe, said by nobody
        self.reported = False  # the command has said what happened (once)

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.trouble is None and self.stream is not None:
            try:
                self._write(self.stream, text)
            except (OSError, ValueError) as exc:
                self._failed(exc)
        return len(text)

    @staticmethod
    def _write(stream: TextIO, text: str) -> None:
        """`text` as the stream's encoding takes it (`...` for `…`, an escape for any other character
        it has not): a name or a mark it cannot take is no reason to call the stream closed. A text
        stream encodes the whole text before it writes any of it, so nothing is written twice."""
        text = for_output(text)
        try:
            stream.write(text)
        except UnicodeEncodeError:
            stream.write(encodable(text, getattr(stream, "encoding", None)))

    def flush(self) -> None:
        if self.trouble is None and self.stream is not None:
            try:
                self.stream.flush()
            except (OSError, ValueError) as exc:
                self._failed(exc)

    def isatty(self) -> bool:
        try:
            return self.trouble is None and self.stream is not None and self.stream.isatty()
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:
        if self.stream is None:
            raise io.UnsupportedOperation("closed at start")
        return self.stream.fileno()

    def close(self) -> None:
        """Closing the guard leaves the stream it guards open (it is the process's own)."""
        self.flush()

    def _failed(self, exc: OSError | ValueError) -> None:
        self.broken_pipe = isinstance(exc, BrokenPipeError)
        if isinstance(exc, OSError):
            self.trouble = exc.strerror or os.strerror(exc.errno or errno.EIO)
        else:
            self.trouble = "is closed"  # "I/O operation on closed file"
        _to_devnull(self.stream)

    def problem(self) -> str | None:
        """What to say about this stream, once, or None (fine, or a pipe whose reader left)."""
        if self.trouble is None or self.broken_pipe:
            return None
        if self.trouble == "is closed":
            return f"{self.name} is closed"
        return f"cannot write to {self.name} ({self.trouble})"


def _to_devnull(stream: TextIO | None) -> None:
    """Point a failed stream's file descriptor at /dev/null, so that what is still buffered (the
    interpreter flushes it at exit) goes nowhere instead of raising there."""
    with contextlib.suppress(OSError, ValueError, AttributeError, io.UnsupportedOperation):
        assert stream is not None
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)


class AsciiWhenAsked:
    """A text stream over `stream` that writes `for_output` of what it is given: unchanged but in
    ASCII mode. Everything else (its encoding, fileno, isatty, the binary `buffer` that data goes
    to) is the stream's own, failures included."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(for_output(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextlib.contextmanager
def output_mode(args: Sequence[str]) -> Iterator[bool]:
    """ASCII mode for one command, whose words are `args`; after it, the mode as it was. On where the
    locale is not UTF-8 (shows_unicode, the dashboard's rule) or the words hold --ascii before any
    `--` (its action turns the mode on too, abbreviated, but only once argparse reaches it: a bad
    value before it would be quoted first). Meanwhile sys.stdout and sys.stderr write through
    `AsciiWhenAsked`. Yields whether the mode is on at start."""
    words = args[: list(args).index("--")] if "--" in args else args
    on = not shows_unicode() or ASCII_OPTION in words
    before = set_ascii_only(on)
    real = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (None if s is None else cast(TextIO, AsciiWhenAsked(s)) for s in real)
    try:
        yield on
    finally:
        sys.stdout, sys.stderr = real
        set_ascii_only(before)


def use_ascii() -> None:
    """ASCII mode on from now on (the --ascii option's action)."""
    set_ascii_only(True)


def guarded(stream: TextIO | Guarded | None, name: str) -> Guarded:
    """`stream` guarded (itself when it is already)."""
    if isinstance(stream, Guarded):
        return stream
    return Guarded(stream, name)


def as_text(stream: Guarded) -> TextIO:
    """A Guarded where a TextIO is expected (print's file=, the commands' parameters)."""
    return cast(TextIO, stream)


@contextlib.contextmanager
def guard_std() -> Iterator[tuple[Guarded, Guarded]]:
    """sys.stdout and sys.stderr guarded while the body runs (flushed, then restored)."""
    real = sys.stdout, sys.stderr
    out, err = guarded(sys.stdout, "stdout"), guarded(sys.stderr, "stderr")
    sys.stdout, sys.stderr = as_text(out), as_text(err)
    try:
        yield out, err
    finally:
        out.flush()
        err.flush()
        sys.stdout, sys.stderr = real


def for_a_person(stream: object, json_output: bool) -> bool:
    """Whether a hint for a person (`try --demo`) belongs in what goes to `stream`: a terminal, and
    no JSON asked for. A Slurm prolog, a cron job or a script on a real node reads the output as
    data: a suggestion to try the simulated cluster there is noise, and misleads in a log."""
    return not json_output and bool(getattr(stream, "isatty", lambda: False)())


def say(text: str) -> None:
    """One line on stderr, if stderr works (never on stdout: print(file=None) would go there)."""
    err = guarded(sys.stderr, "stderr")
    print(text, file=as_text(err), flush=True)


def warn(text: str) -> None:
    """`gputui: TEXT` on stderr, if stderr works (TEXT escaped by its maker)."""
    say(f"gputui: {text}")


def fail(message: str, code: int = Exit.USAGE, who: str = "gputui") -> int:
    """Say what went wrong on one line of stderr, `who: MESSAGE` (a command that names itself, as
    `gputui serve` does, passes its name); `code`, the command's exit status. Messages quote the
    user's words and what sources said: escaped here, whoever made them."""
    say(f"{who}: {printable(message)}")
    return code

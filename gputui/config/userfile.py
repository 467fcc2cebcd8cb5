"""A file the user names for gputui to read (the config, a host list, an ssh config, a recording, a
hub's tokens, its TLS certificate and key, a hub token): a regular file, read within a bound.

Looked at before it is opened (opening a device can be an act in itself), opened without blocking (a
FIFO would wait for a writer, and Ctrl+C does not end a wait in open()), and looked at again once
open (what is at the path may have been replaced between the two). The one place that decides it:
every reader of a named file goes through here and words the refusal in its own context.
"""

from __future__ import annotations

import os
import stat
from typing import Literal

OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
NOT_REGULAR = "is not a regular file"
# Bytes of a named file that lists hosts or settings (a host file, the config) read at most: past
# this it is no such list, and it is refused by its size, never read into memory.
LIST_BYTES = 16 << 20
_CHUNK = 1 << 20

Kind = Literal["open", "type", "size"]


class FileRefused(Exception):
    """Why a named file is not read. `kind`: "open" (it cannot be opened or read: `reason` is the
    system's words, "No such file or directory"), "type" (it is no regular file: `reason` is
    NOT_REGULAR) or "size" (it holds more than the bound: `reason` is "is over 16 MiB"). `reason`
    has no path in it: the caller says which file, and where it was named ("--tokens PATH: ...")."""

    def __init__(self, kind: Kind, reason: str) -> None:
        super().__init__(reason)
        self.kind: Kind = kind
        self.reason = reason


def bound_words(limit: int) -> str:
    """A byte bound as a message says it: "16 MiB", "4,096 bytes"."""
    return f"{limit >> 20} MiB" if limit >= 1 << 20 and limit % (1 << 20) == 0 else f"{limit:,} bytes"


def open_regular(path: str | os.PathLike[str]) -> int:
    """A descriptor (read-only, close-on-exec) on the regular file at `path` (a symlink followed), or
    FileRefused: it cannot be opened, or it is a FIFO, a device, a directory or a socket."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise FileRefused("type", NOT_REGULAR)
        fd = os.open(path, OPEN_FLAGS)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise FileRefused("open", _words(exc)) from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError as exc:
        os.close(fd)
        raise FileRefused("open", _words(exc)) from None
    if not regular:  # replaced between the look and the open
        os.close(fd)
        raise FileRefused("type", NOT_REGULAR)
    return fd


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file at `path`, or FileRefused (open_regular's, or "size" when it
    holds more than `limit` bytes: at most `limit` + 1 are ever read, whatever its size says)."""
    fd = open_regular(path)
    try:
        return read_bounded(fd, limit)
    finally:
        os.close(fd)


def read_bounded(fd: int, limit: int) -> bytes:
    """What is left to read of the open file `fd` (not closed here), or FileRefused: "open" when a
    read fails, "size" past `limit` bytes (at most `limit` + 1 are read: a sparse file of a TiB
    costs no more than one at the bound)."""
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise FileRefused("open", _words(exc)) from None
    if size > limit:
        raise FileRefused("size", f"is over {bound_words(limit)}")
    return b"".join(chunks)


def _words(exc: OSError | ValueError) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)

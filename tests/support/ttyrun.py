"""A command on a real terminal, as a person runs it: some of its streams on a fresh pty of a given
size, the rest wherever the caller says; its exit status and everything it wrote on the pty. The
process is the test's own and is the only one ended here (if it outlives the read)."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
from collections.abc import Sequence
from pathlib import Path
from typing import Any

STREAMS = ("stdout", "stderr")  # what is on the pty unless the caller says


def on_pty(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    cwd: Path | str | None = None,
    size: tuple[int, int] = (80, 24),
    streams: Sequence[str] = STREAMS,
    timeout: float = 60,
) -> tuple[int, bytes]:
    """Run `argv` with each of `streams` ("stdin", "stdout", "stderr") on a pty of `size` (columns,
    lines), the others on /dev/null; read the pty until every writer has closed it."""
    master, slave = pty.openpty()
    columns, lines = size
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    where: dict[str, Any] = {name: slave if name in streams else subprocess.DEVNULL for name in STREAMS}
    proc = subprocess.Popen(
        list(argv), stdin=slave if "stdin" in streams else subprocess.DEVNULL, env=env, cwd=cwd, **where
    )
    os.close(slave)
    out = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer has closed the pty
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        return proc.wait(timeout=timeout), out
    finally:
        if proc.poll() is None:  # only the process this test started
            proc.kill()
            proc.wait()
        os.close(master)

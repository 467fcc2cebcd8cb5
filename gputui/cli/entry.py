"""The `gputui` command's first module (pyproject.toml's script, `python -m gputui`): it imports almost
nothing, so that a quick command on this machine (`clean`, `wait`, `snapshot`: cli/quick.py) starts
its probe before the CLI imports its parsers and the config (cli/main.py), then the command's own
modules (asyncio, the fleet, the plan). The probe's start (an interpreter, pynvml, NVML's init) runs
beside all of that (transport/headstart.py).

What is decided here is a guess, wrong in one direction only: without the parsers it cannot know
which options take a value, so it takes any word after an option for that option's value
(`clean --all gpu-a` looks like a command for this machine). cli/main.py then decides exactly: a
probe started here that the command does not need is told to end at once, and reaped at exit; one
that the guess missed is started there.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import NoReturn

from ..config.location import may_have_config
from ..transport import headstart
from .quick import INTERVALS, NO_HEAD_START, QUICK_EXIT


def guess_head_start(args: Sequence[str], environ: Mapping[str, str] = os.environ) -> list[str] | None:
    """Start this machine's probe now when `args` looks like a quick command for this machine (no
    HOST, no demo, no config, the default interval); returns its argv, or None."""
    if not args or args[0] not in INTERVALS:
        return None
    after_option = False
    for word in args[1:]:
        if word == "--" or word.partition("=")[0] in NO_HEAD_START:
            return None
        if word.startswith("-"):
            after_option = "=" not in word
        elif after_option:
            after_option = False  # taken for the option's value
        else:
            return None  # surely a HOST
    if may_have_config(environ):
        return None
    argv = headstart.default_local_argv(args[0] == "wait", INTERVALS[args[0]])
    headstart.begin(argv)
    return argv


def entry() -> NoReturn:
    """The `gputui` command: the guess, `main`, then the exit. After `clean`, `wait` and `snapshot`
    it skips the interpreter's own teardown (every module and object freed one by one: 20-60 ms, a
    tenth of a `clean`), once what that teardown is for has been done here: the exit handlers run
    (an unused head-start probe is ended and reaped), stdout and stderr flushed. Every file these
    commands write (the audit log) is closed before `main` returns; with a thread still running, the
    interpreter exits as usual and waits for it."""
    sanitise_std_fds()  # before the probe's pipes are made: none of them may become our stdout
    guess_head_start(sys.argv[1:])
    # The CLI itself, imported only now, so that the probe above starts before it loads: on the lent
    # H100 the probe was spawned 7 ms after the interpreter was up, 48 ms when it waited for these
    # imports (docs/BENCHMARKS.md section 19); on the dev VM 20 ms from the start against 60-70 ms.
    from .main import main

    code = main()
    command = sys.argv[1] if len(sys.argv) > 1 else None
    if command in QUICK_EXIT and not any(
        t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()
    ):
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:  # None: closed when the process started (`>&-`)
                    stream.flush()
            except (OSError, ValueError):
                pass  # a closed pipe (`| head`): nothing more can be said there
        os._exit(code)
    sys.exit(code)


def sanitise_std_fds() -> None:
    """Open /dev/null on any of fds 0, 1 and 2 that is closed, as OpenSSH does at start: else the
    next file opened (the audit log) takes its number and whatever is written "to stdout" by a child
    lands in it. Python has already seen them closed (sys.stdout is None) and keeps it so."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            with contextlib.suppress(OSError):
                null = os.open(os.devnull, os.O_RDWR)
                if null != fd:  # the lowest free number: fd itself, when lower ones are open
                    os.dup2(null, fd)
                    os.close(null)


if __name__ == "__main__":
    entry()

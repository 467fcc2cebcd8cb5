"""Every exit status a gputui command returns, defined once (scripts branch on these: README, "Exit
codes"). One number may carry a different word per command: the enum's aliases say which.

    0  OK         snapshot: every host sampled; clean: every chosen GPU/process verified (CLEAN);
                  wait: ready (READY); pick: GPUs picked (PICKED)
    1  FAILED     clean: something not verified (NOT_CLEAN); wait: timed out (TIMEOUT);
                  snapshot: a host down (DOWN); demo status: not running (NOT_RUNNING);
                  record: stopped early, at its size cap or by a write error (STOPPED);
                  pick: fewer GPUs ready than asked on every host, after --wait (TOO_FEW)
    2  USAGE      bad arguments, config or spec: one line on stderr, nothing done
    3  NO_GPU     a host has no usable driver or GPU: nothing to do there
    4  REFUSED    clean/reset/demo: refused by a safety rule (protected process, another user's
                  demo directory, a blocker of a reset); clean of zombies alone (nothing to signal)
    5  DECLINED   clean: the operator said no at the prompt
    128+N         ended by signal N: 130 Ctrl+C (INTERRUPTED), 129 hang-up (HANGUP), 143 SIGTERM
                  (TERMINATED)
"""

from __future__ import annotations

import contextlib
import enum
import signal
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only for the annotation: the quick commands that import exits start no loop
    import asyncio


def killed_by(signum: int) -> int:
    """The status of a command ended by `signum`, as a shell reports it."""
    return 128 + signum


class Exit(enum.IntEnum):
    """An exit status. An int: `sys.exit`, JSON and comparisons take it as its number."""

    def __str__(self) -> str:
        return str(self.value)  # its number, in messages (Python 3.10's IntEnum says its name)

    OK = 0
    READY = 0
    CLEAN = 0
    PICKED = 0
    FAILED = 1
    NOT_CLEAN = 1
    TIMEOUT = 1
    DOWN = 1
    NOT_RUNNING = 1
    STOPPED = 1
    TOO_FEW = 1
    USAGE = 2
    NO_GPU = 3
    REFUSED = 4
    DECLINED = 5
    HANGUP = killed_by(signal.SIGHUP)
    INTERRUPTED = killed_by(signal.SIGINT)
    TERMINATED = killed_by(signal.SIGTERM)


# The commands that run until stopped (snapshot --watch, record): Ctrl+C is how they are meant to
# end (OK); another signal ends them with the status a shell reports for it.
STOPS = {signal.SIGINT: Exit.OK, signal.SIGTERM: Exit.TERMINATED, signal.SIGHUP: Exit.HANGUP}


@contextlib.contextmanager
def stop_signals(
    loop: asyncio.AbstractEventLoop, on_stop: Callable[[signal.Signals], object]
) -> Iterator[None]:
    """`on_stop(sig)` for each of STOPS' signals that comes while inside, the handlers removed after.
    Off the main thread (a command run by a test's thread) a loop takes no signal handler: none is
    set there, and the command ends another way."""
    handled: list[signal.Signals] = []
    for sig in STOPS:
        with contextlib.suppress(ValueError, RuntimeError, OSError):
            loop.add_signal_handler(sig, on_stop, sig)
            handled.append(sig)
    try:
        yield
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)

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
                  demo directory, a blocker of a reset)
    5  DECLINED   clean: the operator said no at the prompt
    128+N         ended by signal N: 130 Ctrl+C (INTERRUPTED), 129 hang-up (HANGUP), 143 SIGTERM
                  (TERMINATED)
"""

import enum
import signal


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

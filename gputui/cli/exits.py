"""Every exit status a gputui command returns, defined once (scripts branch on these: README, "Exit
codes"). One number may carry a different word per command; the names say which.

    0  OK         snapshot: every host sampled; clean: every chosen GPU/process verified; wait: ready
    1  FAILED     clean: something not verified (NOT_CLEAN); wait: timed out (TIMEOUT);
                  snapshot: a host down (DOWN); demo status: not running (NOT_RUNNING);
                  record: stopped early, at its size cap or by a write error (STOPPED)
    2  USAGE      bad arguments, config or spec: one line on stderr, nothing done
    3  NO_GPU     a host has no usable driver or GPU: nothing to do there
    4  REFUSED    clean/reset/demo: refused by a safety rule (protected process, another user's
                  demo directory, a blocker of a reset)
    5  DECLINED   clean: the operator said no at the prompt
    128+N         ended by signal N: 130 Ctrl+C (INTERRUPTED), 129 hang-up, 143 SIGTERM
"""

import signal

EXIT_OK = 0
EXIT_READY = EXIT_OK
EXIT_CLEAN = EXIT_OK
EXIT_FAILED = 1
EXIT_NOT_CLEAN = EXIT_FAILED
EXIT_TIMEOUT = EXIT_FAILED
EXIT_DOWN = EXIT_FAILED
EXIT_NOT_RUNNING = EXIT_FAILED
EXIT_STOPPED = EXIT_FAILED
EXIT_USAGE = 2
EXIT_NO_GPU = 3
EXIT_REFUSED = 4
EXIT_DECLINED = 5


def killed_by(signum: int) -> int:
    """The status of a command ended by `signum`, as a shell reports it."""
    return 128 + signum


EXIT_INTERRUPTED = killed_by(signal.SIGINT)
EXIT_HANGUP = killed_by(signal.SIGHUP)
EXIT_TERMINATED = killed_by(signal.SIGTERM)

# The commands that run until stopped (snapshot --watch, record): Ctrl+C is how they are meant to
# end (OK); another signal ends them with the status a shell reports for it.
STOPS = {signal.SIGINT: EXIT_OK, signal.SIGTERM: EXIT_TERMINATED, signal.SIGHUP: EXIT_HANGUP}

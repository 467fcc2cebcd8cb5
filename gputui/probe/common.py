"""What the probe and the app agree on besides the line format (wire.py): the numbers of the staged
kill-and-verify, the idle rule, and how a command line is written for people.

Each constant has this one owner: the app imports it from here (through gputui.model and
gputui.kill.plan), the probe uses it directly. Stdlib only, Python >= 3.8 syntax: this runs on monitored
hosts.
"""

import os
from typing import Optional, Sequence  # noqa: F401  (type comments)

# -- kill-and-verify ---------------------------------------------------------------------------

TERM_TIMEOUT = 5.0  # seconds a soft signal (SIGINT, SIGTERM) is given before the next stage
VERIFY_TIMEOUT = 10.0  # seconds to prove the outcome (memory back, targets gone) before giving up
POLL_S = 0.02  # NVML polling while verifying: memory comes back 0.10-0.18 s after the kill
# ...but faster at first: a plan's targets have just ended when it verifies, and the driver gives their
# memory back within ms of their exit; a poll a few ms after that sees it (not up to 20 ms after).
POLL_FAST_S = 0.005
POLL_FAST_FOR_S = 0.5


def verify_poll(elapsed):
    # type: (float) -> float
    """Seconds to the next NVML poll of a verification `elapsed` seconds old."""
    return POLL_FAST_S if elapsed < POLL_FAST_FOR_S else POLL_S


KILL_WAIT_S = 2.0  # after SIGKILL, exit takes ms; longer means the process sits in the driver (D)
MAX_ROUNDS = 3  # rescans that may find new holders to stop (children of children)
MAX_TIMEOUT = 3600.0  # the longest timeout a plan may ask for
SCAN_ALLOWANCE_S = 10.0  # a full holder scan on a very busy host, with room to spare
JOB_GRACE_S = 1.0  # at most this long a job's members are left to exit on their root's signal


# A plan record's scope (docs/PROTOCOL.md "Plans"), and a signal record's; the model types them.
SCOPE_PROCESSES, SCOPE_GPUS, SCOPE_HOST, SCOPE_SIGNAL = "processes", "gpus", "host", "signal"
SCOPES = (SCOPE_PROCESSES, SCOPE_GPUS, SCOPE_HOST)
# The results of a `done` event (docs/PROTOCOL.md "Verdicts"): a plan of GPUs, of processes, a
# signal, a reset; ERROR when a bug ended it inside the probe. The model types them (DoneResult),
# with the app's own for a verdict that never came.
CLEAN, NOT_CLEAN, STOPPED, NOT_STOPPED = "clean", "not-clean", "stopped", "not-stopped"
SIGNALLED, NOT_SIGNALLED = "signalled", "not-signalled"
RESET, NOT_RESET, REFUSED, DRY_RUN, ERROR = "reset", "not-reset", "refused", "dry-run", "error"
DONE_RESULTS = (CLEAN, NOT_CLEAN, STOPPED, NOT_STOPPED, SIGNALLED, NOT_SIGNALLED, RESET, NOT_RESET, REFUSED,
                DRY_RUN, ERROR)  # fmt: skip


def job_grace(term_timeout):
    # type: (float) -> float
    """Seconds after a job root's soft signal before the members still running get it too: a
    launcher (torchrun, mpirun, a supervisor) forwards it to its ranks at once, and a rank signalled
    twice may cut its own shutdown short. Half the TERM timeout, at most JOB_GRACE_S; the wait for
    the whole job still ends at the TERM timeout, so a job plan takes no longer than another."""
    return min(JOB_GRACE_S, term_timeout / 2.0)


# The soft signals a plan may send before SIGKILL, in the order they may be sent. A plan names a
# sequence of them ([] is SIGKILL at once); SIGKILL always ends the sequence.
SOFT_SIGNALS = ("SIGHUP", "SIGUSR1", "SIGINT", "SIGTERM")
SIGNAL_PLANS = {
    "term": ("SIGTERM",),  # SIGTERM, then SIGKILL for what ignores it: the default
    "int": ("SIGINT", "SIGTERM"),  # SIGINT first (Ctrl-C: a clean shutdown for many servers)
    "kill": (),  # SIGKILL at once
    # A server whose clean shutdown (or drain and exit) is SIGHUP or SIGUSR1: that first, then as
    # "term". One that reloads on it instead stays up for the wait, then gets SIGTERM: the plan
    # still proves the targets gone.
    "hup": ("SIGHUP", "SIGTERM"),
    "usr1": ("SIGUSR1", "SIGTERM"),
}
DEFAULT_SIGNALS = "term"
# What a `signal` plan may send: one signal, once, to one process (the detail screen's `k`), with
# no ladder and no verification. Not SIGKILL's ladder: SIGSTOP and SIGCONT are the reason for it.
SIGNAL_CHOICES = (
    "SIGTERM",
    "SIGINT",
    "SIGHUP",
    "SIGUSR1",
    "SIGUSR2",
    "SIGQUIT",
    "SIGSTOP",
    "SIGCONT",
    "SIGKILL",
)
SIGNAL_LOOK_S = 1.0  # after a signal plan's signal: at most this long to see it take (stopped, exited)


def signal_deadline():
    # type: () -> float
    """The longest a `signal` plan takes on a healthy probe: a look at the host, the check, the
    signal and SIGNAL_LOOK_S to see what it did. Past it, the app calls the outcome unknown."""
    return SCAN_ALLOWANCE_S + KILL_WAIT_S + SIGNAL_LOOK_S


# How close two GPUs of a host are (a GPU record's `topology`, docs/PROTOCOL.md), closest first:
# an NVLink between them, one board, one PCIe switch, several switches, one host bridge, one NUMA
# node, across the CPUs' interconnect (nvidia-smi topo -m: NV#, -, PIX, PXB, PHB, NODE, SYS).
TOPOLOGY_LEVELS = ("nvlink", "board", "switch", "switches", "bridge", "node", "system")


# Memory within this of the idle baseline counts as idle: the driver's own bookkeeping moves a little.
IDLE_SLACK = 32 << 20


def plan_deadline(soft_signals, term_timeout, verify_timeout):
    # type: (int, float, float) -> float
    """The longest a plan can run on a healthy probe, in seconds: every round of stages at its
    timeouts, the verification, and a full holder scan per step. Past it, the app calls the outcome
    unknown (a probe stopped by SIGSTOP, or stuck inside the driver, sends nothing)."""
    stages = soft_signals * term_timeout + KILL_WAIT_S
    return (1 + MAX_ROUNDS) * (stages + SCAN_ALLOWANCE_S) + verify_timeout + SCAN_ALLOWANCE_S


def plan_silence_limit(term_timeout, verify_timeout):
    # type: (float, float) -> float
    """The longest a running plan can be silent on a healthy probe: the longest single wait (a soft
    signal's, SIGKILL's or the verification's) plus a full scan. The probe reports every stage."""
    return max(term_timeout, KILL_WAIT_S, verify_timeout) + SCAN_ALLOWANCE_S


# -- words -------------------------------------------------------------------------------------


def count(n, one, many=None):
    # type: (int, str, Optional[str]) -> str
    """`1 process`, `2 processes`, `0 targets`: one way to write a number of things."""
    return "%d %s" % (n, one if n == 1 else (many or one + "s"))


def took(ms):
    # type: (float) -> str
    """A duration as people read it: `180 ms` under a second, `15.0 s` above."""
    return "%.0f ms" % ms if ms < 1000 else "%.1f s" % (ms / 1000)


def brief_command(command):
    # type: (Sequence[str]) -> str
    """A command line as people say it: the program's base name, long absolute paths cut to
    ".../name" (`/opt/venv/bin/python -S /tmp/x/bin/train.py` -> `python -S .../train.py`)."""
    if not command:
        return ""
    words = [os.path.basename(command[0]) or command[0]]
    for arg in command[1:]:
        if arg.startswith("/") and len(arg) > 32 and os.path.basename(arg):
            arg = ".../" + os.path.basename(arg)
        words.append(arg)
    return " ".join(words)

"""A `signal` record's run: one signal, sent once, to one process, and a look at what it did.

docs/PROTOCOL.md "Signal" (the detail screen's `k`): the target is checked as any plan's is (its
identity by pidfd and start time, its protection: never a monitor, an init or a person's session;
it need not hold a GPU), then gets the signal the operator chose, as is: no SIGCONT after it, no
ladder, no SIGKILL, no rescan, no verification. What it did (stopped, running again, exited) is
read for at most SIGNAL_LOOK_S, on its pidfd. Apart from the staged plan (reaper.py), which it
shares only the checks, the delivery and the process verdict with.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import os
import signal
import time
from typing import Any, Callable, Dict, Optional  # noqa: F401  (type comments)

from ..common import NOT_SIGNALLED, SIGNAL_LOOK_S, SIGNALLED
from ..procfs import read_stat_strict
from .checks import Checks
from .orders import SignalSettings, parse_or_refuse
from .signals import METHOD_NOTE, Proc  # noqa: F401  (type comments)
from .state import FALLBACK_POLL_S, INCREMENTAL, run_to_the_end

QUICK_LOOK = ("SIGHUP", "SIGUSR1", "SIGUSR2")  # signals a process handles and lives on: one look
STATE_WORDS = {"R": "running", "S": "sleeping", "D": "uninterruptible", "T": "stopped", "t": "stopped by a debugger",
               "Z": "zombie", "I": "idle"}  # fmt: skip


def execute_signal(probe, record, emit):
    # type: (Any, Dict[str, Any], Callable[[Dict[str, Any]], None]) -> Optional[Dict[str, Any]]
    """Send one signal to one process (a `signal` record), emitting `accepted`, `check`, `signal`,
    `verdict` and `done` events; return the `done` event (None if refused)."""
    settings = parse_or_refuse(probe, record, emit, "signal", SignalSettings)
    if settings is None:
        return None
    run = SignalRun(probe, settings, emit)
    return run_to_the_end(run, "signal", run.run_signal, "ok")


class SignalRun(Checks):
    """One `signal` record, from its check to its `done` event."""

    VANISHED_WHY = "exited before the signal"

    def run_signal(self):
        # type: () -> Dict[str, Any]
        """A `signal` plan: check the one target as any plan's, send its signal once, see what it
        did (stopped, continued, exited) for at most SIGNAL_LOOK_S, and say so."""
        plan = self.plan
        name = getattr(plan, "signal", "?")
        pid, start, why, gpus = plan.targets[0]
        view = self.look(INCREMENTAL)
        self.event(
            "accepted",
            "accepted",
            "signal %s: %s to %d, once; %s" % (plan.id, name, pid, METHOD_NOTE[self.killer.method]),
            data={
                "method": self.killer.method,
                "scope": plan.scope,
                "signal": name,
                "targets": [pid],
                "operator": plan.operator,
                "probe_uid": os.geteuid(),
            },
        )
        proc = self.admit(pid, start, why, gpus, "plan", view)
        try:
            if proc.pending:
                self.signal_once(proc, name)
            verdict = self.process_verdict(proc)
        finally:
            self.close(proc)
        sent = name in proc.signals
        if sent:
            words = "%s sent to %s: %s" % (name, proc.label(), proc.why)
        else:
            words = "%s NOT sent to %s: %s" % (name, proc.label(), proc.why or proc.verdict)
        return self.event(
            "done",
            SIGNALLED if sent else NOT_SIGNALLED,
            "signal %s: %s" % (plan.id, words),
            data={
                "ok": sent,
                "scope": plan.scope,
                "signal": name,
                "gpus": {},
                "processes": [verdict],
                "refused": [verdict["pid"]]
                if verdict["result"] in ("permission-denied", "protected")
                else [],
                "method": self.killer.method,
                "link_lost": self.link_lost,
                "cancelled": None,
                "restarts": [],
                "taken_again": [],
            },
        )

    def signal_once(self, proc, name):
        # type: (Proc, str) -> None
        """`name` to `proc`, once, through its pidfd; then a look at what it did. SIGSTOP is not
        followed by SIGCONT here, nor anything by SIGKILL: it is what the operator asked, as is."""
        if not self.deliver(proc, getattr(signal, name), "signal"):
            return
        proc.signals.append(name)
        self.event("signal", "sent", "%s -> %s" % (name, proc.label()), proc, sig=name)
        state = self.look_after(proc, name)
        if proc.exited_ms is not None:
            proc.verdict, proc.why = "exited", "after %s" % name
        else:
            proc.verdict, proc.state = "signalled", state
            proc.why = (
                "now %s, state %s" % (STATE_WORDS.get(state or "", "?"), state)
                if state
                else "its state unknown"
            )

    def look_after(self, proc, name):
        # type: (Proc, str) -> Optional[str]
        """Its state once the signal took: stopped after SIGSTOP, running again after SIGCONT,
        gone after a signal that ends it (each within SIGNAL_LOOK_S); after a signal a handler
        may take any way (SIGHUP, SIGUSR1, SIGUSR2), a look 50 ms on. Waits on the pidfd: an exit
        ends it at once. None: gone, or it could not be read."""
        now = time.monotonic()
        deadline = now + (0.05 if name in QUICK_LOOK else SIGNAL_LOOK_S)
        state = None  # type: Optional[str]
        while True:
            try:
                stat = read_stat_strict(proc.pid)
            except OSError:
                return state  # cannot look just now: what it did is not known
            if stat is None or stat.start_time != proc.start_time or stat.state == "Z":
                if proc.exited_ms is None:
                    self.exited(proc)
                return None
            state = stat.state
            stopped = state in ("T", "t")
            if (name == "SIGSTOP" and stopped) or (name == "SIGCONT" and not stopped):
                return state
            left = deadline - time.monotonic()
            if left <= 0 or not proc.pending:
                return state
            self.pause([proc], min(left, FALLBACK_POLL_S))

"""Executing a kill plan on this host: staged signals, then proof that the GPUs are free.

docs/ARCHITECTURE.md "Staged kill-and-verify", grounded in docs/GPU_FACTS.md:
1. check each target: not protected, and the process the operator saw. The probe pinned a pidfd
   when a scan first listed it (pidfd.py): readable means it has exited, whatever holds the PID now
   (a PID reused within one clock tick has the same start time); else signals go through it, to
   that process only. Without a pin, a pidfd is opened now and the start time re-read after it (a
   mismatch: the PID was reused). Either way it must still hold a GPU device file or be listed by
   NVML: one that let go of its GPU is not signalled, and its verdict says it runs on;
2. SIGTERM (SIGINT first when asked), each soft signal followed by SIGCONT (a stopped job acts on
   it only once continued, as systemd knows), then wait on the pidfds (readable when the process
   exits) up to the TERM timeout; 3. SIGKILL the survivors;
4. rescan: hidden holders now attributed to a targeted GPU (a ghost's data-loader child) and holders
   tied to a target get the same stages; so do, when the plan sweeps, the listed unattributed holders;
5. verify: read NVML every 20 ms until each targeted GPU is back at its idle memory with no listed
   process, then confirm with a holder scan; give up at the verify timeout;
6. verdicts per process and per GPU, then `done`: a plan of processes is `stopped` only when every
   target is gone (a target not signalled, left running, makes it `not-stopped`).
Nothing sleeps for a fixed time: every wait is a poll() on the pidfds with the next deadline as its
timeout (the NVML polling interval while verifying), so it ends the moment a process exits.

What the rescans and the confirmation read (Run.around; gputui/probe/holders.py, "The targeted
scan"), all of it every link, no rule trusted:
- the plan's own PIDs (targets, named ghosts, what it took on or sweeps) and the targets'
  descendants taken before any signal (a killed parent's children are re-parented at once);
- every process new since the last scan;
- every process in the process group or session of, or below, a PID NVML lists on a GPU the plan
  cleans or reports on, or lists of the plan's own (a dead target NVML still lists holds memory
  through a child or a group member). That needs every process's stat: skipped when no such PID is
  listed, the usual case at the confirmation.
Why nothing else can matter: classify.py links a hidden holder only to a PID NVML lists, through its
process group, session or ancestry, and attributes it to that PID's GPUs. A holder outside the set
is linked to no listed PID on a GPU the plan touches and to nothing of the plan's: scope.py never
takes it on (not attributed to a plan GPU, not tied to a target: not a descendant taken before the
signals, no link), it is on no GPU a verdict reports, and no ghost of the plan's names it. Were it to
keep memory of a plan GPU (a ghost's child that left its session), NVML would still list that
memory's owner there: no confirmation, and the full scan at the timeout names it among the
suspects, as before. tests/probe/test_rescan.py proves the rule on generated process trees and on
real processes. A full scan (every link of every process: 0.8 s with 2,000 processes) only where the
scope needs one: the first rescan of a plan that sweeps the unattributed holders (the later looks
re-read every holder it knows), and the final look of a verification that timed out (its verdict
names every possible holder of the memory still used).

Without pidfds (Python 3.8 on an architecture whose syscall numbers are unknown, or a kernel before
5.3) the engine says so in the `accepted` event and falls back to a start-time check right before
os.kill, and to reading /proc every 10 ms while waiting.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import errno
import os
import select
import signal
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple  # noqa: F401  (type comments)

from . import scope
from .accounting import account
from .classify import GHOST, HIDDEN, MONITOR, MONITOR_NAMES, USER
from .common import (
    KILL_WAIT_S,
    MAX_ROUNDS,
    MAX_TIMEOUT,
    POLL_S,
    SIGNAL_CHOICES,
    SIGNAL_LOOK_S,
    SIGNAL_PLANS,
    SOFT_SIGNALS,
    TERM_TIMEOUT,
    VERIFY_TIMEOUT,
    brief_command,
    job_grace,
    took,
)
from .core import Probe
from .holders import descendants
from .jobs import INIT_COMMS, SESSION_COMMS, boundary, interactive_shell, read_node
from .pidfd import EXITED, PINNED, Syscalls, best_method
from .procfs import (
    PF_KTHREAD,
    holds_device,
    read_cmdline,
    read_stat,
    read_stat_strict,
    read_status,
    user_name,
)
from .wire import VERSION, error

FALLBACK_POLL_S = 0.01  # /proc polling when there is no pidfd to wait on
# What a look reads (Run.look): the steady-state scan, what can hold the plan's memory, everything.
INCREMENTAL, TARGETED, FULL = "incremental", "targeted", "full"
# Set by benchmarks to FULL to time the way before issue 11 (every rescan and confirmation a full scan).
RESCAN_LOOK = TARGETED
FD_RESERVE = 64  # descriptors a plan leaves free for /proc reads, scans and NVML
MAX_TARGETS = 100000
SCOPES = ("processes", "gpus", "host")
# A target's part in a job (docs/PROTOCOL.md "Plans"): a root is signalled first and may hold no
# GPU (a launcher); a process between a root and its members needs none either; members are GPU
# processes, signalled once the root has had JOB_GRACE to pass the signal on.
ROLES = ("root", "between", "member")
MAX_RESTARTS = 16  # parents a verdict names as able to restart what the plan stopped

# Set by tests to force a kill method ("pidfd", "pidfd-syscall" or "kill"); None picks the best.
FORCE_METHOD = None  # type: Optional[str]

# Process verdicts that mean the process no longer holds anything.
GONE = scope.GONE


# -- kill primitives ---------------------------------------------------------------------------


class Killer(object):
    """Opens process handles and sends signals by the best method this host has."""

    def __init__(self, method=None):
        # type: (Optional[str]) -> None
        self.method = method or FORCE_METHOD or best_method()
        self._sys = Syscalls() if self.method == "pidfd-syscall" else None

    @property
    def uses_pidfd(self):
        # type: () -> bool
        return self.method != "kill"

    def open(self, pid):
        # type: (int) -> Optional[int]
        """A pidfd for `pid` (raises ProcessLookupError when it is gone); None without pidfds."""
        if self.method == "pidfd":
            return os.pidfd_open(pid)  # type: ignore[attr-defined]  # novermin (3.9+, checked)
        if self._sys is not None:
            return self._sys.pidfd_open(pid)
        return None

    def send(self, proc, sig):
        # type: (Proc, int) -> None
        if proc.fd is not None:
            if self._sys is not None:
                self._sys.pidfd_send_signal(proc.fd, sig)
            else:
                signal.pidfd_send_signal(proc.fd, sig)  # type: ignore[attr-defined]  # novermin (3.9+, checked)
            return
        # No pidfd: the start time is re-read right before kill(); the window left is a few us.
        stat = read_stat_strict(proc.pid)  # OSError (no descriptor left, say) is not "gone"
        if stat is None or stat.start_time != proc.start_time:
            raise ProcessLookupError(proc.pid)
        os.kill(proc.pid, sig)


METHOD_NOTE = {
    "pidfd": "pidfd: signals cannot reach a reused PID",
    "pidfd-syscall": "pidfd through syscall() (this Python has no os.pidfd_open)",
    "kill": "no pidfd on this host (kernel < 5.3 or unknown architecture): start time re-checked "
    "right before kill(); waiting polls /proc every 10 ms",
}


def _signal_name(sig):
    # type: (int) -> str
    try:
        return signal.Signals(sig).name
    except ValueError:
        return str(sig)


# -- records -----------------------------------------------------------------------------------


class Proc(object):
    """One process the plan may signal, and everything that happened to it."""

    __slots__ = (
        "allow",
        "command",
        "exit_signal",
        "exited_ms",
        "fd",
        "gpus",
        "lent",
        "name",
        "origin",
        "parent",
        "pid",
        "ppid",
        "reason",
        "role",
        "signals",
        "start_time",
        "state",
        "uid",
        "user",
        "verdict",
        "why",
    )

    def __init__(self, pid, start_time, reason, gpus, origin):
        # type: (int, int, str, List[int], str) -> None
        self.pid = pid
        self.start_time = start_time
        self.reason = reason  # why the plan (or the rescan) targets it
        self.gpus = gpus
        self.origin = origin  # "plan", "rescan" or "sweep"
        self.role = None  # type: Optional[str]  # its part in a job (ROLES), or None
        # Its parent when checked, if that parent is part of the same work (a supervisor, a
        # launcher): (pid, start time). A verdict names it when it outlives the plan (restarts).
        self.parent = None  # type: Optional[Tuple[int, int]]
        self.fd = None  # type: Optional[int]
        self.lent = False  # fd is the probe's pin (pidfd.Pins), lent for the plan: given back, not closed
        self.name = None  # type: Optional[str]
        self.command = []  # type: List[str]
        self.user = None  # type: Optional[str]
        self.uid = None  # type: Optional[int]
        self.ppid = None  # type: Optional[int]
        self.state = None  # type: Optional[str]
        self.verdict = None  # type: Optional[str]  # set once final
        self.why = None  # type: Optional[str]  # words for the verdict
        self.allow = None  # type: Optional[str]  # what would allow a refused signal
        self.signals = []  # type: List[str]
        self.exited_ms = None  # type: Optional[float]
        self.exit_signal = None  # type: Optional[str]

    @property
    def pending(self):
        # type: () -> bool
        """Signalled or to be signalled, and not known to have exited."""
        return self.verdict is None and self.exited_ms is None

    def label(self):
        # type: () -> str
        """ "4121 python train.py --lr 3e-4" for messages (the full command is in `data.command`)."""
        words = brief_command(self.command) if self.command else (self.name or "?")
        if len(words) > 100:
            words = words[:97] + "..."
        return "%d %s" % (self.pid, words)

    def identity(self):
        # type: () -> Dict[str, Any]
        return {
            "name": self.name,
            "command": self.command,
            "user": self.user,
            "uid": self.uid,
            "gpus": self.gpus,
            "origin": self.origin,
            "reason": self.reason,
            "role": self.role,
        }


class View(object):
    """One full look at the host: GPU records, NVML's lists, and every GPU process classified."""

    __slots__ = ("gpus", "listed", "records", "time")

    def __init__(self, gpus, listed, records):
        # type: (List[Dict[str, Any]], Dict[int, Dict[int, Optional[int]]], Dict[int, Dict[str, Any]]) -> None
        self.gpus = {g["index"]: g for g in gpus}  # type: Dict[int, Dict[str, Any]]
        self.listed = listed
        self.records = records
        self.time = time.monotonic()

    def on_gpu(self, index):
        # type: (int) -> List[Dict[str, Any]]
        return [r for r in self.records.values() if index in r["gpus"]]


class PlanError(Exception):
    pass


def _int_list(value, what):
    # type: (Any, str) -> List[int]
    if value is None:
        return []
    if not isinstance(value, list) or not all(_is_int(v) for v in value):
        raise PlanError("%s must be a list of integers" % what)
    return list(value)


def _is_int(value):
    # type: (Any) -> bool
    return isinstance(value, int) and not isinstance(value, bool)


def _timeout(plan, key, default):
    # type: (Dict[str, Any], str, float) -> float
    value = plan.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_TIMEOUT:
        raise PlanError("%s must be a number of seconds in (0, %d]" % (key, MAX_TIMEOUT))
    return float(value)


def _entries(plan, key):
    # type: (Dict[str, Any], str) -> List[Tuple[int, int, str, List[int]]]
    raw = plan.get(key) or []
    if not isinstance(raw, list) or len(raw) > MAX_TARGETS:
        raise PlanError("%s must be a list of at most %d entries" % (key, MAX_TARGETS))
    out = []
    seen = set()  # type: Set[int]
    for entry in raw:
        if not isinstance(entry, dict):
            raise PlanError("every entry of %s must be an object" % key)
        pid, start = entry.get("pid"), entry.get("start_time")
        # A target is a process, not a PID: without its start time it cannot be told from a reuse.
        if not (isinstance(pid, int) and _is_int(pid) and isinstance(start, int) and _is_int(start)):
            raise PlanError("every entry of %s needs an integer pid and start_time" % key)
        if pid <= 0 or start < 0:
            raise PlanError("every entry of %s needs an integer pid and start_time" % key)
        reason = entry.get("reason")
        gpus = _int_list(entry.get("gpus"), "%s[].gpus" % key)
        if pid not in seen:
            seen.add(pid)
            out.append((pid, start, reason if isinstance(reason, str) else "", gpus))
    return out


def _roles(plan):
    # type: (Dict[str, Any]) -> Dict[int, str]
    """{pid: role} of the targets that have one (a job's root, the processes between, members)."""
    out = {}  # type: Dict[int, str]
    for entry in plan.get("targets") or []:
        role = entry.get("role") if isinstance(entry, dict) else None
        if role is None:
            continue
        if role not in ROLES:
            raise PlanError("a target's role must be one of %s" % ", ".join(ROLES))
        out.setdefault(entry["pid"], role)
    return out


def _signals(plan):
    # type: (Dict[str, Any]) -> List[str]
    """The soft signals to send before SIGKILL, from the plan's `signals` (a list of names)."""
    value = plan.get("signals")
    if value is None:
        return list(SIGNAL_PLANS["term"])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PlanError("signals must be a list of signal names")
    order = [s for s in SOFT_SIGNALS if s in value]
    if len(order) != len(value) or order != value:
        raise PlanError(
            "signals must be %s in that order, or empty (SIGKILL at once)" % ", ".join(SOFT_SIGNALS)
        )
    return order


class Settings(object):
    """A validated plan record (docs/PROTOCOL.md "Plans")."""

    def __init__(self, plan):
        # type: (Dict[str, Any]) -> None
        plan_id = plan.get("id")
        if not isinstance(plan_id, str) or not 0 < len(plan_id) <= 64:
            raise PlanError("a plan needs an 'id' string of 1 to 64 characters")
        self.id = plan_id
        self.operator = plan.get("operator") if isinstance(plan.get("operator"), str) else None
        scope_name = plan.get("scope", "gpus")
        if scope_name not in SCOPES:
            raise PlanError("scope must be one of %s" % ", ".join(SCOPES))
        self.scope = scope_name  # type: str
        self.targets = _entries(plan, "targets")
        self.roles = _roles(plan)  # type: Dict[int, str]
        self.sweep = _entries(plan, "sweep")
        # The GPUs to prove clean; a plan of processes proves its targets gone instead.
        self.gpus = sorted(set(_int_list(plan.get("gpus"), "gpus")))
        self.ghosts = sorted(set(_int_list(plan.get("ghosts"), "ghosts")))
        self.include_protected = set(_int_list(plan.get("include_protected"), "include_protected"))
        self.signals = _signals(plan)
        self.term_timeout = _timeout(plan, "term_timeout", TERM_TIMEOUT)
        self.verify_timeout = _timeout(plan, "verify_timeout", VERIFY_TIMEOUT)
        if self.scope != "processes" and not self.gpus:
            raise PlanError("a %s plan names the GPUs it frees" % self.scope)


class SignalSettings(Settings):
    """A validated `signal` record (docs/PROTOCOL.md "Signal"): one signal, sent once, to one process
    named by PID and start time; no ladder, no rescan, no verification. Checked as a plan's targets
    are (identity, protection: never a monitor, an init or a person's session)."""

    def __init__(self, record):  # not Settings.__init__: another record, other checks
        # type: (Dict[str, Any]) -> None
        self.scope = "signal"
        plan_id = record.get("id")
        if not isinstance(plan_id, str) or not 0 < len(plan_id) <= 64:
            raise PlanError("a signal needs an 'id' string of 1 to 64 characters")
        self.id = plan_id
        self.operator = record.get("operator") if isinstance(record.get("operator"), str) else None
        name = record.get("signal")
        if name not in SIGNAL_CHOICES:
            raise PlanError("'signal' must be one of %s" % ", ".join(SIGNAL_CHOICES))
        self.signal = name  # type: str
        self.targets = _entries(record, "targets")
        if len(self.targets) != 1:
            raise PlanError("a signal names exactly one target")
        self.roles = {}  # type: Dict[int, str]
        self.sweep = []  # type: List[Tuple[int, int, str, List[int]]]
        self.gpus = []  # type: List[int]
        self.ghosts = []  # type: List[int]
        self.include_protected = set()  # type: Set[int]  # a monitor is never signalled this way
        self.signals = [name]
        self.term_timeout = SIGNAL_LOOK_S
        self.verify_timeout = SIGNAL_LOOK_S


def execute_signal(probe, record, emit):
    # type: (Any, Dict[str, Any], Callable[[Dict[str, Any]], None]) -> Optional[Dict[str, Any]]
    """Send one signal to one process (a `signal` record), emitting `accepted`, `check`, `signal`,
    `verdict` and `done` events; return the `done` event (None if refused)."""
    settings = _accepted(probe, record, emit, "signal", SignalSettings)
    if settings is None:
        return None
    run = Run(probe, settings, emit)
    return _to_the_end(run, "signal", run.go_signal, "ok")


# -- the run -----------------------------------------------------------------------------------


def execute(probe, plan, emit, stop_requested=None):
    # type: (Any, Dict[str, Any], Callable[[Dict[str, Any]], None], Optional[Callable[[], Optional[str]]]) -> Optional[Dict[str, Any]]
    """Run one plan to its end, emitting protocol events; return the `done` event (None if refused).

    A plan that has started runs to its end even if the app goes away: the operator confirmed it, and
    half of it (SIGTERM sent, no SIGKILL, nothing verified) would be the worst outcome. Only the app
    can stop its further signals (`stop_requested` returns why, once its audit log has failed: what
    it cannot record must not happen); the verification and the verdicts still come."""
    settings = _accepted(probe, plan, emit, "plan", Settings)
    if settings is None:
        return None
    run = Run(probe, settings, emit, stop_requested)
    return _to_the_end(run, "plan", run.go, "clean")


def _accepted(probe, record, emit, what, parse):
    # type: (Any, Dict[str, Any], Callable[[Dict[str, Any]], None], str, Callable[[Dict[str, Any]], Settings]) -> Optional[Settings]
    """A plan or signal record's settings, or None once an error event has said why it is refused
    (a read-only probe, a bad record). `what` names the record in the message: plan, signal."""
    plan_id = record.get("id") if isinstance(record.get("id"), str) else None
    if probe.read_only:
        emit(error("read-only", "this probe runs read-only: %ss are refused" % what, plan_id))
        return None
    try:
        return parse(record)
    except PlanError as exc:
        emit(error("bad-message", "bad %s: %s" % (what, exc), plan_id))
        return None


def _to_the_end(run, what, go, ok_key):
    # type: (Run, str, Callable[[], Optional[Dict[str, Any]]], str) -> Optional[Dict[str, Any]]
    """`go()`'s `done` event; a bug inside it ends the run with a `done` error event (its outcome
    under `ok_key` false) rather than killing the probe."""
    try:
        return go()
    except Exception as exc:  # a bug must end the plan visibly, not kill the probe
        failure = "%s: %s" % (type(exc).__name__, exc)
        return run.event(
            "done",
            "error",
            "%s %s failed inside the probe: %s" % (what, run.plan.id, failure),
            data={ok_key: False, "gpus": {}, "processes": [], "error": failure},
        )


class Run(object):
    def __init__(self, probe, settings, emit, stop_requested=None):
        # type: (Any, Settings, Callable[[Dict[str, Any]], None], Optional[Callable[[], Optional[str]]]) -> None
        self.probe = probe
        self.plan = settings
        self._emit = emit
        self._stop_requested = stop_requested
        self.cancelled = None  # type: Optional[str]  # why the app stopped the further signals
        self.link_lost = False
        self.killer = Killer()
        self.t0 = time.monotonic()
        self.procs = {}  # type: Dict[int, Proc]
        self.before = {}  # type: Dict[int, Optional[int]]
        self.idle_ms = {}  # type: Dict[int, float]
        self.touched = set()  # type: Set[int]  # GPUs the plan cleans or its targets use
        self.pidfds_left = _pidfd_budget()  # pidfds this plan may hold open at once
        self.scan_cost = 0.0
        self.scan_kind = INCREMENTAL  # what the last look read
        self.rule = scope.Rule(
            settings.gpus,
            [t[0] for t in settings.targets],
            settings.ghosts,
            sweep=[(t[0], t[1]) for t in settings.sweep],
        )

    # -- output --------------------------------------------------------------------------------

    def ms(self):
        # type: () -> float
        return round((time.monotonic() - self.t0) * 1e3, 1)

    def event(self, stage, result, message, proc=None, gpu=None, sig=None, data=None):
        # type: (str, Optional[str], str, Optional[Proc], Optional[int], Optional[str], Optional[Dict[str, Any]]) -> Dict[str, Any]
        body = {"elapsed_ms": self.ms()}  # type: Dict[str, Any]
        if proc is not None:
            body.update(proc.identity())
        body.update(data or {})
        record = {
            "type": "event",
            "v": VERSION,
            "plan": self.plan.id,
            "time": time.time(),
            "stage": stage,
            "pid": proc.pid if proc is not None else None,
            "start_time": proc.start_time if proc is not None else None,
            "gpu": gpu,
            "signal": sig,
            "result": result,
            "message": message,
            "data": body,
        }
        self.send(record)
        return record

    def send(self, record):
        # type: (Dict[str, Any]) -> None
        if not self.link_lost:
            try:
                self._emit(record)
            except (OSError, ValueError):
                # The app went away (broken pipe): finish the plan regardless, silently.
                self.link_lost = True

    # -- looking -------------------------------------------------------------------------------

    def look(self, how=TARGETED):
        # type: (str) -> View
        """NVML, a holder scan and classification. TARGETED for the rescans and the confirmation: it
        reads in full what can hold the memory of what NVML lists and of the plan's processes (module
        docstring); FULL reads everything (a sweep's first rescan, a verification that timed out);
        the accept stage only needs names and kinds, which the INCREMENTAL scan has (a full scan of
        2,000 processes costs 0.4 s or more)."""
        t = time.monotonic()
        gpus, listed = self.probe.read_gpus()
        scanner = self.probe.scanner
        if how == TARGETED:
            how = RESCAN_LOOK
        if how == FULL:
            scan = scanner.scan(full=True)
        elif how == TARGETED:
            around, also = self.around(listed)
            scan = scanner.scan(around=around, also=also, holders=bool(self.plan.sweep))
        else:
            scan = scanner.scan(watch=listed)
        records = self.probe.describe(listed, scan)
        view = View(gpus, listed, {r["pid"]: r for r in records})
        self.scan_cost = time.monotonic() - t
        self.scan_kind = how
        return view

    def around(self, listed):
        # type: (Dict[int, Dict[int, Optional[int]]]) -> Tuple[Set[int], Set[int]]
        """What a targeted look reads: (the PIDs whose process groups, sessions and subtrees it reads,
        the PIDs it reads themselves). The first: what NVML lists on a GPU the plan cleans or
        reports on (`touched`), and what it lists of the plan's own (targets, named ghosts, what the
        plan took on or sweeps). classify.py links a hidden holder only to a PID NVML lists, through
        its process group, session or ancestry: one tied to none of these is attributed to no GPU
        of the plan's and linked to nothing of the plan's (module docstring). The second: the
        plan's own PIDs, listed or not, and the targets' descendants taken before any signal."""
        mine = self.rule.targets | self.rule.ghosts | set(self.procs)
        mine.update(pid for pid, _ in self.rule.sweep)
        roots = set(pid for pid, mem in listed.items() if pid in mine or self.touched.intersection(mem))
        return roots, mine | set(self.rule.descendants)

    # -- the stages ----------------------------------------------------------------------------

    def go(self):
        # type: () -> Optional[Dict[str, Any]]
        plan = self.plan
        view = self.look(INCREMENTAL)
        unknown = [i for i in plan.gpus if i not in view.gpus]
        if unknown:
            have = _gpu_list(sorted(view.gpus))
            self.send(
                error(
                    "bad-message",
                    "bad plan: no %s here (its GPUs: %s)" % (_gpus_words(unknown), have),
                    plan.id,
                )
            )
            return None
        self.touched = self.touched_gpus(view)
        self.before = {i: g.get("memory_used") for i, g in view.gpus.items() if i in self.touched}
        self.event(
            "accepted",
            "accepted",
            "plan %s: %s; %s" % (plan.id, self.goal_words(), METHOD_NOTE[self.killer.method]),
            data={
                "method": self.killer.method,
                "scope": plan.scope,
                "gpus": plan.gpus,
                "touched": sorted(self.touched),
                "ghosts": plan.ghosts,
                "targets": [t[0] for t in plan.targets],
                "roots": sorted(pid for pid, role in plan.roles.items() if role == "root"),
                "sweep": [t[0] for t in plan.sweep],
                "signals": plan.signals,
                "term_timeout": plan.term_timeout,
                "verify_timeout": plan.verify_timeout,
                "memory_before": _by_key(self.before),
                "operator": plan.operator,
                "probe_uid": os.geteuid(),
            },
        )
        try:
            first = [self.admit(pid, st, why, gpus, "plan", view) for pid, st, why, gpus in plan.targets]
            self.remember_descendants(first)
            first += self.job_members(first, view)
            self.stages(first)
            for round_no in range(MAX_ROUNDS):
                if self.stopped():
                    break
                # The sweep needs every unattributed holder: one full scan, on the first round.
                sweeping = round_no == 0 and bool(plan.sweep)
                found = self.rescan(self.look(FULL if sweeping else TARGETED), sweep=round_no == 0)
                if not found:
                    break
                self.stages(found)
                if all(p.origin == "sweep" for p in found):
                    break  # unattributed holders: stopping them attributes nothing new to a GPU
            final = self.verify()
            return self.finish(final)
        finally:
            for proc in self.procs.values():
                self.close(proc)

    def go_signal(self):
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
            "signalled" if sent else "not-signalled",
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
        try:
            self.killer.send(proc, getattr(signal, name))
        except ProcessLookupError:
            proc.verdict, proc.why = "vanished", "exited before the signal"
            self.event(
                "signal", "vanished", "%s -> %s: already exited" % (name, proc.label()), proc, sig=name
            )
            return
        except PermissionError:
            proc.verdict, proc.why = "permission-denied", "the kernel refused %s (EPERM)" % name
            proc.allow = self.what_would_allow(proc)
            self.event(
                "signal",
                "permission-denied",
                "%s -> %s: permission denied; %s" % (name, proc.label(), proc.allow),
                proc,
                sig=name,
                data={"allow": proc.allow},
            )
            return
        except OSError as exc:
            proc.verdict, proc.why = "not-checked", "%s could not be sent (%s)" % (name, exc.strerror or exc)
            self.event("signal", "error", "%s -> %s: %s" % (name, proc.label(), proc.why), proc, sig=name)
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

    def goal_words(self):
        # type: () -> str
        """What this plan will prove, in words (the dialog said the same before it was confirmed)."""
        plan = self.plan
        n = len(plan.targets)
        what = "%d target%s" % (n, "" if n == 1 else "s")
        roots = sorted(pid for pid, role in plan.roles.items() if role == "root")
        if roots:
            what += " (job root%s %s first)" % ("" if len(roots) == 1 else "s", _pid_list(roots))
        if plan.sweep:
            what += ", %d to sweep" % len(plan.sweep)
        if plan.gpus:
            return "%s; prove %s clean" % (what, _gpus_words(plan.gpus))
        return "%s; prove them gone and their memory released" % what

    def touched_gpus(self, view):
        # type: (View) -> Set[int]
        """The GPUs whose memory the plan reports: those it cleans, those its targets use (by the
        plan and by NVML now) and those holding the memory of the ghosts it names."""
        out = set(self.plan.gpus)
        for pid, _, _, gpus in self.plan.targets:
            out.update(g for g in gpus if g in view.gpus)
            out.update(view.listed.get(pid, {}))
        for pid in self.plan.ghosts:
            out.update(view.listed.get(pid, {}))
        return out

    def remember_descendants(self, procs):
        # type: (List[Proc]) -> None
        """The processes under these targets, taken before any signal: a killed parent's children
        are re-parented at once, and the rescan must still know they were its children."""
        roots = [p.pid for p in procs if p.pending]
        if roots:
            for pid, start in descendants(roots).items():
                self.rule.descendants.setdefault(pid, start)
        self.rule.targets.update(p.pid for p in procs)

    def job_members(self, procs, view):
        # type: (List[Proc], View) -> List[Proc]
        """The GPU processes below the job roots of the plan that it does not name (started since
        the app's scan), taken right before the first signal: a job is stopped whole. They join
        as members (origin "rescan": the app did not list them), checked like every target."""
        roots = [p.pid for p in procs if p.role == "root" and p.pending]
        if not roots:
            return []
        prefix = self.probe.scanner.prefix
        out = []  # type: List[Proc]
        for pid, start in sorted(descendants(roots).items()):
            if pid in self.procs:
                continue
            record = view.records.get(pid)
            if record is not None and record.get("start_time") == start:
                if record.get("kind") not in (USER, HIDDEN) or record.get("state") == "Z":
                    continue
            elif pid not in view.listed and holds_device(pid, prefix) is not True:
                continue
            gpus = list(view.listed.get(pid, {})) or list((record or {}).get("gpus") or [])
            proc = self.admit(
                pid,
                start,
                "member of a job root of the plan, found before the first signal",
                gpus,
                "rescan",
                view,
            )
            proc.role = "member"
            out.append(proc)
        if out:
            self.remember_descendants(out)
        return [p for p in out if p.pending]

    def admit(self, pid, start_time, reason, gpus, origin, view):
        # type: (int, int, str, List[int], str, View) -> Proc
        """The `check` stage: is this still the process the operator confirmed, and may it be signalled?"""
        proc = Proc(pid, start_time, reason, gpus, origin)
        if origin == "plan":
            proc.role = self.plan.roles.get(pid)
        self.procs[pid] = proc
        record = view.records.get(pid)
        self.fill(proc, record)
        refusal = self.protection(proc, record)
        if refusal is not None:
            proc.verdict, proc.why = "protected", refusal
            self.event(
                "check", "protected", "%s: protected (%s), not signalled" % (proc.label(), refusal), proc
            )
            return proc
        try:
            return self.identify(proc, view)
        except OSError as exc:
            # Out of file descriptors, /proc unreadable...: what cannot be looked at is not signalled,
            # and it is not "gone" either.
            return self.checked(proc, "not-checked", "could not be checked (%s)" % (exc.strerror or exc))

    def identify(self, proc, view):
        # type: (Proc, View) -> Proc
        """Confirm the target's identity and that it still holds a GPU. The pidfd the probe pinned
        when a scan first listed the process is proof (pidfd.py); without one, a pidfd is opened
        now and the start time re-read after it."""
        pid, start_time = proc.pid, proc.start_time
        pins = getattr(self.probe, "pins", None) if self.killer.uses_pidfd else None
        if pins is not None:
            pinned, fd = pins.lend(pid, start_time)
            if pinned == EXITED:
                return self.exited_since_scan(proc)
            if pinned == PINNED:
                proc.fd, proc.lent = fd, True
        stat = read_stat_strict(pid)
        if stat is None:
            return self.checked(proc, "vanished", "exited before any signal")
        if stat.start_time != start_time:
            return self.checked(proc, "pid-reused", _reused(start_time, stat.start_time))
        note = "identity confirmed (start time)"
        if proc.lent:
            note = "identity pinned (pidfd held since the scan that listed it)"
        elif self.killer.uses_pidfd and self.pidfds_left <= 0:
            # Descriptors kept for reading /proc: without them a live process could not be told
            # from a gone one. The start time is re-checked right before kill() instead.
            note = "identity confirmed (start time; pidfds kept within the descriptor limit)"
        elif self.killer.uses_pidfd:
            try:
                proc.fd = self.killer.open(pid)
            except ProcessLookupError:
                return self.checked(proc, "vanished", "exited before any signal")
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE):
                    raise
                # No descriptor left for a pidfd: fall back to the start-time check right before
                # kill(), as on a kernel without pidfds.
                self.pidfds_left = 0
                note = "no file descriptor left for a pidfd: start time re-checked before each signal"
            if proc.fd is not None:
                self.pidfds_left -= 1
                note = "identity confirmed (pidfd)"
                # The pidfd pins this process: a start time that still matches now is proof of
                # identity, but for a PID reused within one clock tick (same start time) since the
                # scan; the check below, and the pins where there are some, cover that.
                stat = read_stat_strict(pid)
                if stat is None:
                    return self.checked(proc, "vanished", "exited before any signal")
                if stat.start_time != start_time:
                    return self.checked(proc, "pid-reused", _reused(start_time, stat.start_time))
        proc.state, proc.ppid = stat.state, stat.ppid
        if stat.state == "Z":
            return self.checked(proc, "zombie", _zombie_words(stat.ppid))
        # What made it a target (a GPU device file, or NVML's list) must still be true: a process
        # that let go of its GPU is not signalled (and is left running: its verdict says so), and
        # without a pin, a PID reused within one clock tick by a process holding no GPU is caught.
        # A job's root and the processes between need no GPU: a launcher holds none; nor does the
        # one process a signal plan names (identified by its pidfd and start time above).
        if proc.role not in ("root", "between") and self.plan.scope != "signal":
            holds = holds_device(pid, self.probe.scanner.prefix)
            if holds is False and pid not in view.listed and pid not in self.probe.read_gpus()[1]:
                return self.checked(proc, "no-gpu", NO_GPU_WORDS)
        proc.parent = self.supervisor_of(proc)
        self.event("check", "ok", "%s: %s" % (proc.label(), note), proc, data={"state": stat.state})
        return proc

    def supervisor_of(self, proc):
        # type: (Proc) -> Optional[Tuple[int, int]]
        """The target's parent, when it is part of the same work (jobs.boundary: not an init, a
        session, a unit's, Slurm job's or container's edge): one that outlives the plan may start
        the target again (a supervisor, an elastic launcher, a `bash run.sh` loop)."""
        if proc.ppid is None or proc.ppid <= 2:
            return None
        finder = getattr(self.probe, "jobs", None)
        stop = finder.stop if finder is not None else set()  # type: Set[int]
        child, parent = read_node(proc.pid), read_node(proc.ppid)
        if child is None or parent is None or child.start != proc.start_time or child.ppid != parent.pid:
            return None
        if boundary(child, parent, stop | self.probe.protected_pids()) is not None:
            return None
        return (parent.pid, parent.start)

    def exited_since_scan(self, proc):
        # type: (Proc) -> Proc
        """The pidfd pinned when a scan listed the target says it has exited: whatever holds its PID
        now is another process, even one with the same start time (started in the same tick)."""
        stat = read_stat_strict(proc.pid)
        if stat is None:
            return self.checked(proc, "vanished", "exited before any signal")
        if stat.start_time != proc.start_time:
            return self.checked(proc, "pid-reused", _reused(proc.start_time, stat.start_time))
        if stat.state == "Z":  # a zombie keeps its PID: this is the process itself
            proc.ppid = stat.ppid
            return self.checked(proc, "zombie", _zombie_words(stat.ppid))
        return self.checked(
            proc,
            "pid-reused",
            "exited before any signal (its pidfd, held since the scan that listed it, says so); PID "
            "%d now names another process, started in the same clock tick" % proc.pid,
        )

    def checked(self, proc, verdict, why):
        # type: (Proc, str, str) -> Proc
        """A target that will not be signalled, and why."""
        self.close(proc)
        proc.verdict, proc.why = verdict, why
        data = {"ppid": proc.ppid} if verdict == "zombie" else {}
        words = why if "not signalled" in why else "%s, not signalled" % why
        self.event("check", verdict, "%s: %s" % (proc.label(), words), proc, data=data)
        return proc

    def fill(self, proc, record):
        # type: (Proc, Optional[Dict[str, Any]]) -> None
        """Name, command and owner for the log and the operator, from the scan or from /proc."""
        if record is not None and record.get("start_time") == proc.start_time:
            proc.name, proc.command = record.get("name"), _short(record.get("command") or [])
            proc.user, proc.uid = record.get("user"), record.get("uid")
            if not proc.gpus:
                proc.gpus = list(record.get("gpus") or [])
            return
        stat = read_stat(proc.pid)
        if stat is None or stat.start_time != proc.start_time:
            return
        proc.name = stat.comm
        proc.command = _short(read_cmdline(proc.pid))
        status = read_status(proc.pid)
        proc.uid = status.uid if status else None
        proc.user = user_name(proc.uid)

    def protection(self, proc, record):
        # type: (Proc, Optional[Dict[str, Any]]) -> Optional[str]
        """Why `proc` must not be signalled, or None. PID 1, the probe, its ancestors and kernel
        threads are never signalled; a monitor only when the operator included it explicitly."""
        pid = proc.pid
        if pid == 1:
            return "pid-1"
        if pid == self.probe.pid:
            return "probe"
        if pid in self.probe.protected_pids():
            return "probe-ancestor"
        stat = read_stat(pid)
        if stat is not None and stat.flags & PF_KTHREAD:
            return "kernel-thread"
        if record is not None and record.get("protected") and record.get("protected") != "monitor":
            return record["protected"]
        # A monitor by the scan's classification or by name (one that holds no device file just now).
        monitor = (record is not None and record.get("kind") == MONITOR) or (
            stat is not None and stat.comm in MONITOR_NAMES
        )
        if monitor and pid not in self.plan.include_protected:
            return "monitor"
        if (proc.role in ("root", "between") or self.plan.scope == "signal") and stat is not None:
            return self.head_protection(proc, stat)  # a signal plan's target needs no GPU: as a root
        return None

    def head_protection(self, proc, stat):
        # type: (Proc, Any) -> Optional[str]
        """A job's root (or a process between it and its members) is never an init or a person's
        session, whatever the plan says: the app finds roots below them, and this is the check
        that does not trust it. The processes that act as init here (the probe's ancestors, a
        reader's subreaper such as the sim's session) are never a root either."""
        finder = getattr(self.probe, "jobs", None)
        stop = finder.stop if finder is not None else set()  # type: Set[int]
        if proc.pid in stop or proc.pid <= 2 or stat.comm in INIT_COMMS:
            return "init"
        if stat.comm in SESSION_COMMS:
            return "session"
        node = read_node(proc.pid)
        if node is not None and node.start == proc.start_time and interactive_shell(node):
            return "session"
        return None

    def stages(self, procs):
        # type: (List[Proc]) -> None
        """The plan's soft signals (SIGTERM; SIGINT first if asked) with a wait after each; then
        SIGKILL the survivors and wait."""
        live = [p for p in procs if p.pending]
        if not live:
            return
        soft = [getattr(signal, name) for name in self.plan.signals]
        for sig in soft:
            roots = [p for p in live if p.role == "root"]
            if roots:
                sent = self.job_signal(roots, [p for p in live if p.role != "root"], sig)
            else:
                sent = self.send_all(live, sig, "signal")
            self.wait(sent, self.plan.term_timeout - (self.grace if roots else 0.0), _signal_name(sig))
            live = [p for p in live if p.pending]
            if not live:
                return
        # SIGKILL for every survivor at once, the job roots first (the list keeps the plan's order).
        live.sort(key=lambda p: 0 if p.role == "root" else 1)
        sent = self.send_all(live, signal.SIGKILL, "escalate")
        self.wait(sent, KILL_WAIT_S, "SIGKILL")
        for proc in sent:
            if proc.pending:
                stat = read_stat(proc.pid)
                proc.state = stat.state if stat is not None else proc.state

    @property
    def grace(self):
        # type: () -> float
        return job_grace(self.plan.term_timeout)

    def job_signal(self, roots, rest, sig):
        # type: (List[Proc], List[Proc], int) -> List[Proc]
        """A soft signal to a job: its roots first (a launcher, a supervisor passes it on to its
        ranks, which then shut down as they were written to), then, after the grace (common.
        job_grace) or as soon as every process of the job has exited, the same signal to each member
        (and process between) still running: a root that forwards nothing, or is gone already,
        leaves none behind. Returns every process signalled; the caller waits out the TERM timeout."""
        name = _signal_name(sig)
        sent = self.send_all(roots, sig, "signal")
        waiting = [p for p in rest if p.pending]
        if sent and waiting:
            self.wait(sent + waiting, self.grace, name, quiet=True)
        left = [p for p in rest if p.pending]
        if left:
            self.event(
                "signal",
                "members",
                "%d of the job still running %.1f s after the root's %s: %s to %s"
                % (len(left), self.grace, name, name, _pid_list([p.pid for p in left])),
                sig=name,
                data={"pids": [p.pid for p in left], "grace_s": self.grace},
            )
            sent += self.send_all(left, sig, "signal")
        return sent + [p for p in rest if p not in sent and p.pending]

    def stopped(self):
        # type: () -> bool
        """Has the app cancelled the plan's further signals? Says so once, in a `cancel` event."""
        if self.cancelled is None and self._stop_requested is not None:
            reason = self._stop_requested()
            if reason:
                self.cancelled = reason
                self.event(
                    "cancel", "cancelled", "plan cancelled by the app (%s): no further signal" % reason
                )
        return self.cancelled is not None

    def send_all(self, procs, sig, stage):
        # type: (List[Proc], int, str) -> List[Proc]
        name = _signal_name(sig)
        sent = []  # type: List[Proc]
        if self.stopped():
            for proc in procs:
                if proc.pending and not proc.signals:
                    proc.verdict, proc.why = "not-signalled", "the plan was cancelled before its signal"
                    self.close(proc)
            return sent
        for proc in procs:
            if not proc.pending:
                continue
            try:
                self.killer.send(proc, sig)
            except ProcessLookupError:
                # Exited since the last look: before any signal it vanished, else our signal worked.
                if not proc.signals:
                    proc.verdict, proc.why = "vanished", "exited before any signal"
                    self.close(proc)
                else:
                    self.exited(proc)
                self.event(
                    stage, "vanished", "%s -> %s: already exited" % (name, proc.label()), proc, sig=name
                )
                continue
            except PermissionError:
                proc.verdict, proc.why = "permission-denied", "the kernel refused %s (EPERM)" % name
                proc.allow = self.what_would_allow(proc)
                self.close(proc)
                self.event(
                    stage,
                    "permission-denied",
                    "%s -> %s: permission denied; %s" % (name, proc.label(), proc.allow),
                    proc,
                    sig=name,
                    data={"allow": proc.allow},
                )
                continue
            except OSError as exc:
                # Not "no such process": the signal may not have been sent. Never read as gone.
                proc.verdict = "not-checked"
                proc.why = "%s could not be sent (%s)" % (name, exc.strerror or exc)
                self.close(proc)
                self.event(stage, "error", "%s -> %s: %s" % (name, proc.label(), proc.why), proc, sig=name)
                continue
            proc.signals.append(name)
            sent.append(proc)
            if sig == signal.SIGKILL:
                self.event(stage, "sent", "%s -> %s" % (name, proc.label()), proc, sig=name)
                continue
            continued = self.resume(proc)
            stopped = (
                " (it was stopped: SIGCONT after it, so it can act on it)" if proc.state in ("T", "t") else ""
            )
            self.event(
                stage,
                "sent",
                "%s -> %s%s" % (name, proc.label(), stopped if continued else ""),
                proc,
                sig=name,
                data={"continued": continued},
            )
        return sent

    def resume(self, proc):
        # type: (Proc) -> bool
        """SIGCONT right after a soft signal, as systemd does: a stopped process (a forgotten
        Ctrl-Z, SIGSTOP) acts on a signal only once continued; left stopped, it would sit out the
        whole wait and die of SIGKILL, without the clean shutdown the soft signal asks for. Harmless
        to a running one. Whether it was sent; a failure changes nothing (the soft signal went)."""
        try:
            self.killer.send(proc, signal.SIGCONT)
        except OSError:
            return False  # exited since (ESRCH), or refused: the wait and SIGKILL still follow
        return True

    def what_would_allow(self, proc):
        # type: (Proc) -> str
        if os.geteuid() != 0:
            owner = proc.user or (str(proc.uid) if proc.uid is not None else "its owner")
            return "run the probe as root or as user %s (sudo = true in the host config)" % owner
        return (
            "the probe runs as root and the kernel still refused: the process is in another user or "
            "PID namespace, or a security module (SELinux, AppArmor) forbids it; run the probe there"
        )

    def wait(self, procs, timeout, sig_name, quiet=False):
        # type: (List[Proc], float, str, bool) -> None
        """Until every process in `procs` has exited or `timeout` passes; ends at the last exit.
        `quiet`: no `timeout` event (a job's grace: what follows says what is still running)."""
        pending = [p for p in procs if p.pending]
        if not pending:
            return
        deadline = time.monotonic() + timeout
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.pause(pending, left)
            pending = [p for p in pending if p.pending]
        if pending and not quiet:
            self.event(
                "wait",
                "timeout",
                "%d still running %.1f s after %s: %s"
                % (len(pending), timeout, sig_name, ", ".join(str(p.pid) for p in pending)),
                data={"pids": [p.pid for p in pending], "after": sig_name},
            )

    def pause(self, procs, timeout):
        # type: (List[Proc], float) -> None
        """Block until one of `procs` exits or `timeout` passes; record the exits."""
        with_fd = [p for p in procs if p.fd is not None and p.pending]
        without = [p for p in procs if p.fd is None and p.pending]
        if without:
            timeout = min(timeout, FALLBACK_POLL_S)  # no pidfd: /proc must be polled
        if with_fd:
            poller = select.poll()
            by_fd = {}
            for proc in with_fd:
                assert proc.fd is not None
                poller.register(proc.fd, select.POLLIN)
                by_fd[proc.fd] = proc
            for fd, _ in poller.poll(max(0.0, timeout) * 1e3):
                self.exited(by_fd[fd])
        elif timeout > 0:
            # Nothing to wait on but time: the verify loop's NVML interval or the fallback poll.
            select.select([], [], [], timeout)
        for proc in without:
            try:
                stat = read_stat_strict(proc.pid)
            except OSError:
                continue  # cannot look just now: still running as far as anyone knows
            if stat is None or stat.start_time != proc.start_time or stat.state == "Z":
                self.exited(proc)

    def exited(self, proc):
        # type: (Proc) -> None
        proc.exited_ms = self.ms()
        proc.exit_signal = proc.signals[-1] if proc.signals else None
        self.reap(proc)
        self.close(proc)
        after = " after %s" % proc.exit_signal if proc.exit_signal else ""
        self.event(
            "wait",
            "exited",
            "%s exited%s" % (proc.label(), after),
            proc,
            sig=proc.exit_signal,
            data={"exited_ms": proc.exited_ms},
        )

    def reap(self, proc):
        # type: (Proc) -> None
        """A killed child of the probe itself stays a zombie until the probe reaps it."""
        try:
            if proc.fd is not None and hasattr(os, "P_PIDFD"):
                os.waitid(os.P_PIDFD, proc.fd, os.WEXITED | os.WNOHANG)  # type: ignore[attr-defined]  # novermin (3.9+, checked)
            elif proc.ppid == os.getpid():
                os.waitpid(proc.pid, os.WNOHANG)
        except OSError:
            pass  # ECHILD: not our child (the usual case), or already reaped

    def close(self, proc):
        # type: (Proc) -> None
        if proc.fd is not None and proc.lent:
            self.probe.pins.give_back(proc.pid, proc.fd)  # the probe's pin: it keeps it
            proc.fd, proc.lent = None, False
        elif proc.fd is not None:
            try:
                os.close(proc.fd)
            except OSError:
                pass
            proc.fd = None
            self.pidfds_left += 1

    def rescan(self, view, sweep):
        # type: (View, bool) -> List[Proc]
        """Holders the kills uncovered that the plan's scope covers (gputui/probe/scope.py): hidden
        holders now attributed to a GPU the plan cleans, holders tied to a target and, on the first
        round of a sweeping plan, the listed unattributed holders. Others on the same GPUs are
        reported, never signalled."""
        done = set(self.procs)
        found = scope.admissible(view.records, self.rule, done)
        swept = scope.sweepable(view.records, self.rule, done) if sweep else []
        added = set(c.pid for c in found) | set(c.pid for c in swept)
        left = scope.untouched(view.records, self.rule, self.touched, done | added)
        remaining = self.blockers(view)
        words = "rescan: %d more to stop" % len(added)
        if left:
            words += "; not in the plan, left alone: %s" % _pid_list(left)
        if remaining:
            words += "; still in the way: %s" % _pid_list(remaining)
        self.event(
            "rescan",
            "found" if added else "none",
            words,
            data={
                "attributed": [c.pid for c in found if c.origin == "attributed"],
                "tied": [c.pid for c in found if c.origin == "tied"],
                "sweep": [c.pid for c in swept],
                "untouched": left,
                "remaining": remaining,
                "scan_ms": round(self.scan_cost * 1e3, 1),
                "scan": self.scan_kind,
            },
        )
        procs = [
            self.admit(c.pid, c.start_time, c.why, c.gpus, "sweep" if c.origin == "sweep" else "rescan", view)
            for c in found + swept
        ]
        self.remember_descendants(procs)
        return [p for p in procs if p.pending]

    def blockers(self, view):
        # type: (View) -> List[int]
        """PIDs that keep the plan from its goal in `view`: live processes on a GPU it cleans, swept
        holders still there, its own targets still alive, and holders tied to them not yet stopped."""
        out = set()  # type: Set[int]
        for index in self.plan.gpus:
            for record in view.on_gpu(index):
                if record["kind"] in (USER, HIDDEN, MONITOR):
                    out.add(record["pid"])
        for record in self.sweep_blockers(view):
            out.add(record["pid"])
        for proc in self.procs.values():
            seen = view.records.get(proc.pid)
            if seen is None or seen.get("start_time") != proc.start_time:
                continue
            if seen["kind"] != GHOST and proc.exited_ms is None and proc.verdict not in scope.MOOT:
                out.add(proc.pid)
        out.update(c.pid for c in scope.admissible(view.records, self.rule, set(self.procs)))
        return sorted(out)

    def sweep_blockers(self, view):
        # type: (View) -> List[Dict[str, Any]]
        """A sweeping plan asked for every unattributed holder to go: those still there."""
        if not self.plan.sweep:
            return []
        return [
            r for r in view.records.values() if r["kind"] == HIDDEN and not r["gpus"] and not r["protected"]
        ]

    def mine(self):
        # type: () -> Set[int]
        """PIDs whose GPU memory the plan must see released: every process it took on, and the
        ghosts the operator named."""
        return set(self.procs) | set(self.plan.ghosts)

    # -- verification --------------------------------------------------------------------------

    def verify(self):
        # type: () -> View
        """Poll NVML until the plan's goal holds (each GPU it cleans idle with nothing listed; none
        of its processes or named ghosts listed anywhere), then confirm with a targeted holder scan
        (what can hold the memory of the plan's processes and of what NVML lists: look()); at most
        the verify timeout, after which a full scan names every possible holder. Returns the last
        view."""
        plan = self.plan
        deadline = time.monotonic() + plan.verify_timeout
        what = "%s clean" % _gpus_words(plan.gpus) if plan.gpus else "the targets gone, their memory released"
        self.event(
            "verify",
            "polling",
            "verifying %s: NVML every %d ms, up to %.1f s" % (what, POLL_S * 1e3, plan.verify_timeout),
            data={"poll_ms": POLL_S * 1e3, "gpus": plan.gpus},
        )
        next_scan = 0.0
        polls = 0
        while True:
            gpus, listed = self.probe.read_gpus()
            polls += 1
            now = time.monotonic()
            ready = self.nvml_idle(gpus, listed) and self.released(listed)
            if ready and now >= next_scan:
                view = self.look(TARGETED)
                if not self.blockers(view) and self.all_idle(view) and self.released(view.listed):
                    self.event(
                        "verify",
                        "confirmed",
                        "%s: verified (holder scan) after %d poll%s"
                        % (what[0].upper() + what[1:], polls, "" if polls == 1 else "s"),
                        data={
                            "polls": polls,
                            "scan": self.scan_kind,
                            "scan_ms": round(self.scan_cost * 1e3, 1),
                        },
                    )
                    return view
                # On a big host even a targeted scan costs tens of ms: not back to back.
                next_scan = time.monotonic() + max(0.1, 2 * self.scan_cost)
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.pause([p for p in self.procs.values() if p.pending], min(POLL_S, left))
        view = self.look(FULL)
        self.event(
            "verify",
            "timeout",
            "not verified after %.1f s: %s" % (plan.verify_timeout, what),
            data={"polls": polls, "blockers": self.blockers(view)},
        )
        return view

    def nvml_idle(self, gpus, listed):
        # type: (List[Dict[str, Any]], Dict[int, Dict[int, Optional[int]]]) -> bool
        """NVML's side for the GPUs the plan cleans: each at its idle memory with no process listed."""
        busy = set()  # type: Set[int]
        for mem in listed.values():
            busy.update(mem)
        ok = True
        for gpu in gpus:
            index = gpu["index"]
            if index not in self.plan.gpus:
                continue
            if index not in busy and Probe.gpu_is_idle(gpu):
                if index not in self.idle_ms:
                    self.idle_ms[index] = self.ms()
                    self.event(
                        "verify", "idle", "GPU %d: memory back at idle, nothing listed" % index, gpu=index
                    )
            else:
                ok = False
        return ok

    def released(self, listed):
        # type: (Dict[int, Dict[int, Optional[int]]]) -> bool
        """NVML's side for the plan's processes: none of them (nor a named ghost) is listed, so the
        memory each held is back (the driver lists a PID until its memory is released)."""
        return not (self.mine() & set(listed))

    def all_idle(self, view):
        # type: (View) -> bool
        busy = set()  # type: Set[int]
        for mem in view.listed.values():
            busy.update(mem)
        return all(
            i in view.gpus and i not in busy and Probe.gpu_is_idle(view.gpus[i]) for i in self.plan.gpus
        )

    # -- verdicts ------------------------------------------------------------------------------

    def finish(self, view):
        # type: (View) -> Dict[str, Any]
        plan = self.plan
        processes = [self.process_verdict(p) for p in self.procs.values()]
        restarts = self.restarts(view)
        # A GPU verified clean that a surviving parent has already put a new process on (seen
        # before this verdict) is not clean any more: the run that follows would share it.
        again = {}  # type: Dict[int, List[Tuple[int, int]]]
        for r in restarts:
            for index in r["new_gpus"]:
                if index in plan.gpus:
                    again.setdefault(index, []).extend((pid, r["pid"]) for pid in r["new"])
        gpus = {}  # type: Dict[str, Dict[str, Any]]
        for index in sorted(self.touched):
            if index in plan.gpus:
                gpus[str(index)] = self.gpu_verdict(index, view, again.get(index, []))
            else:
                gpus[str(index)] = self.release_verdict(index, view)
        clean = all(gpus[str(i)]["result"] == "clean" for i in plan.gpus)
        # A GPU plan proves its GPUs clean: a target that let go of its GPU by itself is not in the
        # way. A plan of processes proves each target gone: one left running (not signalled: it held
        # no GPU when checked) is not, whatever else went well.
        settled = scope.GONE + scope.MOOT if plan.gpus else scope.ENDED
        gone = all(p["result"] in settled for p in processes)
        released = self.released(view.listed)
        taken = sorted(again)
        ok = clean and gone and released
        refused = [p["pid"] for p in processes if p["result"] in ("permission-denied", "protected")]
        running = [p["pid"] for p in processes if p["result"] in scope.LEFT_RUNNING]
        after = {str(i): g.get("memory_used") for i, g in view.gpus.items() if i in self.touched}
        if plan.gpus:
            result = "clean" if ok else "not-clean"
            words = "every targeted GPU verified clean" if ok else "NOT clean"
        else:
            result = "stopped" if ok else "not-stopped"
            words = "every target stopped, its memory released" if ok else "NOT every target stopped"
        left = ""
        if running:
            left = "; not signalled, still running (held no GPU when checked): %s" % _pid_list(running[:20])
            if len(running) > 20:
                left += " and %d more" % (len(running) - 20)
        if taken:
            left += "; %s taken again since verified clean" % _gpus_words(taken)
        for r in restarts:
            new = " and has started %s since" % _pid_list(r["new"]) if r["new"] else ""
            left += "; parent %d (%s) still runs%s: it may start %s again" % (
                r["pid"],
                brief_command(r["command"]) or r["name"] or "?",
                new,
                _pid_list(r["children"]),
            )
        done = self.event(
            "done",
            result,
            "plan %s: %s in %s%s" % (plan.id, words, took(self.ms()), left),
            data={
                "ok": ok,
                "scope": plan.scope,
                "gpus": gpus,
                "processes": processes,
                "refused": refused,
                "memory_before": _by_key(self.before),
                "memory_after": after,
                "method": self.killer.method,
                "link_lost": self.link_lost,
                "cancelled": self.cancelled,
                "restarts": restarts,
                "taken_again": taken,
            },
        )
        return done

    def started_by(self, parent, view):
        # type: (int, View) -> Tuple[List[int], List[int]]
        """The GPU processes below `parent` now that the plan did not take on (a restarted worker),
        and the GPUs NVML lists them on: read now, right before the verdict."""
        below = descendants([parent])
        if not below:
            return [], []
        _, listed = self.probe.read_gpus()
        prefix = self.probe.scanner.prefix
        new, gpus = [], set()  # type: List[int], Set[int]
        for pid, start in sorted(below.items()):
            if pid in self.procs and self.procs[pid].start_time == start:
                continue
            record = view.records.get(pid)
            known = (
                record is not None
                and record.get("start_time") == start
                and record.get("kind") in (USER, HIDDEN)
            )
            if known or pid in listed or holds_device(pid, prefix) is True:
                new.append(pid)
                gpus.update(listed.get(pid, {}))
                if known and record is not None:
                    gpus.update(record.get("gpus") or [])
        return new[:64], sorted(gpus)

    def restarts(self, view):
        # type: (View) -> List[Dict[str, Any]]
        """The parents that outlived what the plan stopped and may start it again: each target gone
        whose parent, when checked, was part of the same work (supervisor_of), is alive now (the
        same process) and was not in the plan. With the GPU processes it has started since that the
        final look saw (`new`): a worker restarted before the verdict."""
        by_parent = {}  # type: Dict[Tuple[int, int], List[int]]
        for proc in self.procs.values():
            if proc.parent is None or proc.parent[0] in self.procs:
                continue
            if proc.verdict not in scope.GONE and proc.exited_ms is None:
                continue
            by_parent.setdefault(proc.parent, []).append(proc.pid)
        out = []  # type: List[Dict[str, Any]]
        for (pid, start), children in sorted(by_parent.items()):
            stat = read_stat(pid)
            if stat is None or stat.start_time != start or stat.state == "Z" or len(out) >= MAX_RESTARTS:
                continue
            new, new_gpus = self.started_by(pid, view)
            status = read_status(pid)
            uid = status.uid if status is not None else None
            out.append(
                {
                    "pid": pid,
                    "start_time": start,
                    "name": stat.comm,
                    "command": _short(read_cmdline(pid)),
                    "user": user_name(uid),
                    "children": sorted(children),
                    "new": new,
                    "new_gpus": new_gpus,
                }
            )
        return out

    def process_verdict(self, proc):
        # type: (Proc) -> Dict[str, Any]
        if proc.verdict is None:
            self.settle(proc)
        data = {
            "result": proc.verdict,
            "why": proc.why,
            "pid": proc.pid,
            "start_time": proc.start_time,
            "signals": proc.signals,
            "exited_ms": proc.exited_ms,
            "exit_signal": proc.exit_signal,
            "state": proc.state,
        }  # type: Dict[str, Any]
        if proc.verdict == "zombie":
            data["ppid"] = proc.ppid
        if proc.allow:
            data["allow"] = proc.allow
        record = self.event(
            "verdict",
            proc.verdict,
            "%s: %s%s" % (proc.label(), proc.verdict, " (%s)" % proc.why if proc.why else ""),
            proc,
            data=dict(data),
        )
        return dict(record["data"], pid=proc.pid, start_time=proc.start_time)

    def settle(self, proc):
        # type: (Proc) -> None
        """The final word on a process that was signalled."""
        try:
            stat = read_stat_strict(proc.pid)
        except OSError as exc:
            if proc.exited_ms is None:
                proc.verdict, proc.why = "not-checked", "could not be checked (%s)" % (exc.strerror or exc)
                return
            stat = None
        same = stat is not None and stat.start_time == proc.start_time
        if proc.exited_ms is not None or not same:
            if same and stat is not None and stat.state == "Z":
                proc.verdict, proc.ppid, proc.why = "zombie", stat.ppid, _zombie_words(stat.ppid)
            else:
                proc.verdict = "exited"
                proc.why = "after %s" % proc.exit_signal if proc.exit_signal else None
            return
        assert stat is not None
        proc.state = stat.state
        if stat.state == "D":
            proc.verdict = "unkillable"
            proc.why = "state D (uninterruptible, likely inside the driver): even SIGKILL waits; not retried"
        else:
            proc.verdict = "survived"
            proc.why = "still running (state %s) after %s" % (
                stat.state,
                ", ".join(proc.signals) or "no signal",
            )

    def gpu_verdict(self, index, view, again=()):
        # type: (int, View, Any) -> Dict[str, Any]
        """A GPU the plan cleans: clean, held (by live processes) or ghost memory. `again`: (pid,
        parent) of the processes a surviving parent started on it since (restarts): held by them."""
        gpu = view.gpus.get(index) or {}
        on_gpu = view.on_gpu(index)
        users = [r for r in on_gpu if r["kind"] in (USER, MONITOR)]  # live, listed by NVML
        hidden = [r for r in on_gpu if r["kind"] == HIDDEN]  # attributed through a listed PID
        ghosts = [r for r in on_gpu if r["kind"] == GHOST]
        live = users + hidden
        idle = Probe.gpu_is_idle(gpu) if gpu else False
        strays = self.sweep_blockers(view)
        suspects = set(r["pid"] for r in hidden)  # type: Set[int]
        for ghost in ghosts:
            suspects.update(ghost.get("links") or [])
        result = "clean"
        # From inside a container, memory no process here holds is `outside`, never `orphaned`.
        foreign = bool(getattr(self.probe, "foreign_pids", False))
        books = account(gpu, view.listed, view.records, self.probe.scanner.prefix, foreign) if gpu else None
        if not gpu or gpu.get("error") or users or strays:
            result = "held"
        elif ghosts or hidden or not idle:
            # Only dead PIDs listed (or none), memory held: name who may really hold it.
            result = "ghost-memory"
            if not ghosts and not hidden and books is not None and books["orphaned"]:
                result = "orphaned"  # nothing holds it at all: only a GPU reset frees it
            elif not ghosts and not hidden and books is not None and books.get("outside"):
                # Seen from inside a container: another container's or the host's. Not ours to
                # free, and no reset would be right (it would end a neighbour's work).
                result = "outside"
            elif not suspects:
                # No link to the ghost: any unattributed holder may be the one (a child that setsid()).
                suspects.update(
                    r["pid"] for r in view.records.values() if r["kind"] == HIDDEN and not r["gpus"]
                )
        held_by = sorted(set(r["pid"] for r in live) | set(r["pid"] for r in strays))
        restarted = sorted(set(pid for pid, _ in again) - set(held_by))
        if restarted:
            result = "held"  # verified clean, then taken again by a surviving parent's new process
            held_by = sorted(set(held_by) | set(restarted))
        ghost_pids = sorted(r["pid"] for r in ghosts)
        suspect_pids = sorted(suspects)
        data = {
            "result": result,
            "memory_before": self.before.get(index),
            "memory_after": gpu.get("memory_used"),
            "memory_baseline": gpu.get("memory_baseline"),
            "held_by": held_by,
            "protected": sorted(r["pid"] for r in live if r.get("protected")),
            "ghosts": ghost_pids,
            "suspects": suspect_pids,
            "idle_ms": self.idle_ms.get(index),
            "error": gpu.get("error") if gpu else "no-such-gpu",
            "accounting": books,
        }
        if result == "clean":
            words = "clean"
        elif result == "orphaned":
            words = "not clean: %s orphaned, no process holds it; a reset would free it" % _size(
                books["orphaned"] if books else 0
            )
        elif result == "outside":
            words = (
                "not clean: %s used outside this container: another container or the host (no process "
                "here holds it; stop it where it runs)" % _size(books["outside"] if books else 0)
            )
        elif result == "ghost-memory":
            words = "ghost memory: NVML lists %s; suspected holders: %s" % (
                _pid_list(ghost_pids) or "nothing",
                _pid_list(suspect_pids) or "none found (run the probe as root to see every holder)",
            )
        else:
            words = "still held by %s" % (_pid_list(held_by) or data["error"] or "memory in use")
            if restarted:
                parents = sorted(set(parent for pid, parent in again if pid in restarted))
                words += " (taken again since it was verified clean: started by %s)" % _pid_list(parents)
        self.event("verdict", result, "GPU %d: %s" % (index, words), gpu=index, data=data)
        return data

    def release_verdict(self, index, view):
        # type: (int, View) -> Dict[str, Any]
        """A GPU the plan's processes used but the plan does not clean: was their memory released?
        What else uses it is named, untouched."""
        gpu = view.gpus.get(index) or {}
        mine = self.mine()
        still = sorted(pid for pid, mem in view.listed.items() if index in mem and pid in mine)
        others = scope.untouched(view.records, self.rule, [index], set(self.procs))
        suspects = set()  # type: Set[int]
        for pid in still:
            record = view.records.get(pid) or {}
            if record.get("kind") == GHOST:
                suspects.update(record.get("links") or [])
        result = "released" if not still else "still-listed"
        suspect_pids = sorted(suspects)
        data = {
            "result": result,
            "memory_before": self.before.get(index),
            "memory_after": gpu.get("memory_used"),
            "memory_baseline": gpu.get("memory_baseline"),
            "still_listed": still,
            "others": others,
            "suspects": suspect_pids,
            "error": gpu.get("error") if gpu else "no-such-gpu",
        }
        if result == "released":
            words = "the targets' memory released"
        else:
            words = "NVML still lists %s (memory not released); suspected holders: %s" % (
                _pid_list(still),
                _pid_list(suspect_pids) or "none found",
            )
        if others:
            words += "; still used by %s (not in the plan, left alone)" % _pid_list(others)
        self.event("verdict", result, "GPU %d: %s" % (index, words), gpu=index, data=data)
        return data


# -- small helpers -----------------------------------------------------------------------------


def _short(command):
    # type: (List[str]) -> List[str]
    """A command line small enough to repeat in every event (some are kilobytes of arguments)."""
    out = [arg if len(arg) <= 512 else arg[:509] + "..." for arg in command[:64]]
    if len(command) > 64:
        out.append("... (%d more)" % (len(command) - 64))
    return out


def _size(nbytes):
    # type: (int) -> str
    """`2.1 GiB`, `615 MiB`: for the probe's own words (the app has gputui.units)."""
    if nbytes >= 1 << 30:
        return "%.1f GiB" % (nbytes / float(1 << 30))
    return "%d MiB" % (nbytes >> 20)


def _pidfd_budget():
    # type: () -> int
    """How many pidfds a plan may hold at once: the descriptor limit less those open now, less a
    reserve for reading /proc (a process that cannot be looked at is never taken for gone). The
    probe raises its soft limit to the hard one at start; this is for a hard limit of 1,024."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        open_now = len(os.listdir("/proc/self/fd"))
    except (ImportError, OSError, ValueError):
        return 1 << 30
    if soft == resource.RLIM_INFINITY:
        return 1 << 30
    return max(0, soft - open_now - FD_RESERVE)


QUICK_LOOK = ("SIGHUP", "SIGUSR1", "SIGUSR2")  # signals a process handles and lives on: one look
STATE_WORDS = {"R": "running", "S": "sleeping", "D": "uninterruptible", "T": "stopped", "t": "stopped by a debugger",
               "Z": "zombie", "I": "idle"}  # fmt: skip
NO_GPU_WORDS = "not signalled: holds no GPU now (no GPU device file, not listed by NVML); still running"


def _reused(expected, found):
    # type: (int, int) -> str
    return "PID reused: start time %d, the plan's was %d" % (found, expected)


def _zombie_words(ppid):
    # type: (Optional[int]) -> str
    return "zombie: exited, holds nothing; parent %s must reap it" % (ppid if ppid is not None else "?")


def _gpus_words(gpus):
    # type: (List[int]) -> str
    """`GPU 3`, `GPUs 0,1` in a sentence (the app's gputui.words.gpus_words, for the probe)."""
    return ("GPU " if len(gpus) == 1 else "GPUs ") + _gpu_list(gpus)


def _gpu_list(gpus):
    # type: (List[int]) -> str
    return ",".join(str(i) for i in gpus) if gpus else "-"


def _pid_list(pids):
    # type: (List[int]) -> str
    return ", ".join(str(p) for p in pids)


def _by_key(mapping):
    # type: (Dict[int, Any]) -> Dict[str, Any]
    return {str(k): v for k, v in sorted(mapping.items())}

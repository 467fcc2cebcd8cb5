"""A plan or a signal record from the wire, checked whole before anything is signalled.

docs/PROTOCOL.md "Plans" and "Signal": `Settings` is a plan record (its scope, targets named by PID
and start time, their roles in a job, the GPUs to prove clean, the soft signals and timeouts),
`SignalSettings` a signal record (one signal, once, to one process). Anything malformed raises
PlanError; `parse_or_refuse` turns that, or a read-only probe, into the error record the app gets.
Apart from the run (reaper.py): what the app may ask, and every bound on it, in one place.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

from typing import Any, Callable, Dict, List, Optional, Set, Tuple  # noqa: F401  (type comments)

from ..common import (
    MAX_TIMEOUT,
    SCOPE_GPUS,
    SCOPE_PROCESSES,
    SCOPE_SIGNAL,
    SCOPES,
    SIGNAL_CHOICES,
    SIGNAL_LOOK_S,
    SIGNAL_PLANS,
    SOFT_SIGNALS,
    TERM_TIMEOUT,
    VERIFY_TIMEOUT,
)
from ..wire import error

MAX_TARGETS = 100000
# A target's part in a job (docs/PROTOCOL.md "Plans"): a root is signalled first and may hold no
# GPU (a launcher); a process between a root and its members needs none either; members are GPU
# processes, signalled once the root has had JOB_GRACE to pass the signal on.
JOB_ROLES = ("root", "between", "member")


class PlanError(Exception):
    """A plan or signal record that is not one: refused before any check or signal."""


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
        if role not in JOB_ROLES:
            raise PlanError("a target's role must be one of %s" % ", ".join(JOB_ROLES))
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
        scope_name = plan.get("scope", SCOPE_GPUS)
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
        if self.scope != SCOPE_PROCESSES and not self.gpus:
            raise PlanError("a %s plan names the GPUs it frees" % self.scope)


class SignalSettings(Settings):
    """A validated `signal` record (docs/PROTOCOL.md "Signal"): one signal, sent once, to one process
    named by PID and start time; no ladder, no rescan, no verification. Checked as a plan's targets
    are (identity, protection: never a monitor, an init or a person's session)."""

    def __init__(self, record):  # not Settings.__init__: another record, other checks
        # type: (Dict[str, Any]) -> None
        self.scope = SCOPE_SIGNAL
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


def parse_or_refuse(probe, record, emit, what, parse):
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

"""The plan of one signal (the detail screen's `k`): one signal, once, to one process, with no
ladder and no verification (docs/PROTOCOL.md "Signal"), and what each signal the chooser offers
does, in words.

Apart from the planner because such a plan has one target and no GPU to free: it judges its one
process as any plan would (reasons.py, jobs.py) and shares only the warnings.
"""

from __future__ import annotations

from dataclasses import replace

from ...config.killoptions import PlanError
from ...model import Sample
from ...probe.common import SIGNAL_CHOICES
from ...probe.jobs import Node
from .entries import Excluded, PlanWarning, Target, excluded_entry, head_excluded, head_target, target_entry
from .jobs import head_refusal, job_words, not_a_gpu_process
from .planner import PlanOptions, plan_warnings
from .reasons import PROTECTED_WORDS, exclusion, holds_words
from .record import Plan

# What each signal a `signal` plan may send does, for the chooser and the dialog.
SIGNAL_MEANINGS = {  # each fits the chooser's line at 80 columns
    "SIGTERM": "ask it to end (kill's default); it may clean up first",
    "SIGINT": "as Ctrl-C: many programs end cleanly",
    "SIGHUP": "hang-up: many servers reload their config or reopen logs",
    "SIGUSR1": "user-defined: depends on the program (stats, reopen logs)",
    "SIGUSR2": "user-defined: depends on the program",
    "SIGQUIT": "end with a core dump (Python: a traceback with faulthandler)",
    "SIGSTOP": "pause it (cannot be caught); its GPU memory stays held",
    "SIGCONT": "resume a stopped process",
    "SIGKILL": "end it at once (cannot be caught: no cleanup)",
}
assert tuple(SIGNAL_MEANINGS) == SIGNAL_CHOICES


def plan_for_signal(
    sample: Sample,
    pid: int,
    start_time: int | None,
    signal: str,
    *,
    host: str,
    options: PlanOptions | None = None,
) -> Plan:
    """Send `signal` once to the process (pid, start time) the operator has in the detail screen:
    a GPU process (user or hidden holder), or a job's root or a process between it and its members
    (a launcher). Refused (excluded, nothing to send) as a kill would be: a monitor, a protected
    process, a zombie or ghost, an init or a person's session, a process that is neither; and one
    that is gone or whose PID names another process now. No ladder, no verification: the probe
    checks the process's identity and protection again, sends it, and says what it did."""
    if signal not in SIGNAL_CHOICES:
        raise PlanError(f"cannot send {signal!r}: one of {', '.join(SIGNAL_CHOICES)}")
    opts = options or PlanOptions()
    by_key = {p.key: p for p in sample.processes}
    proc = by_key.get((pid, start_time))
    target: Target | None = None
    left: Excluded | None = None
    if proc is not None:
        by_pid = {p.pid: p for p in sample.processes}
        reason = exclusion(proc, by_pid)
        if reason is None:
            target = target_entry(host, proc, f"chosen; {holds_words(proc)}")
        else:
            left = excluded_entry(host, proc, reason, chosen=True)
    else:
        left, target = _signal_parent(sample, host, pid, start_time)
    plan = Plan(
        id=opts.new_id(),
        host=host,
        operator=opts.who(),
        scope="signal",
        gpus=(),
        targets=(target,) if target is not None else (),
        sweep=(),
        sweep_included=False,
        excluded=(left,) if left is not None else (),
        warnings=(),
        touched=(),
        kill=opts.kill,
        sample_seq=sample.seq,
        signal=signal,
    )
    warnings = [w for w in plan_warnings(plan, sample, set(), opts) if w.kind != "nothing"]
    if target is None:
        warnings.append(PlanWarning("nothing", f"nothing to send {signal} to: see why below"))
    return replace(plan, warnings=tuple(warnings))


def _signal_parent(
    sample: Sample, host: str, pid: int, start_time: int | None
) -> tuple[Excluded | None, Target | None]:
    """A signal plan's process that is no GPU process: a job's root or a process between it and
    its members may be signalled (as a job plan's: no init, no person's session); anything else,
    or a process gone since the scan, is left alone."""
    info = next((p for p in sample.parents if p.key == (pid, start_time)), None)
    if info is None or start_time is None:
        now = any(p.pid == pid for p in sample.processes) or any(p.pid == pid for p in sample.parents)
        why = "its PID names another process now (reused)" if now else "not in the latest scan: exited?"
        return head_excluded(host, pid, start_time, None, why, kind="unknown"), None
    jobs = [j for j in sample.jobs if (pid, start_time) in j.processes or j.key == (pid, start_time)]
    if not jobs:
        return not_a_gpu_process(sample, host, pid), None
    job = jobs[0]
    node = Node(pid=pid, start=start_time, ppid=info.ppid or 0, comm=info.name or "", argv=info.command)
    refusal = head_refusal(pid, info.name or "", node)
    role = "root" if job.root == pid else "between"
    if refusal is not None:
        why = f"{role} of {job_words(job)}: {PROTECTED_WORDS[refusal]}"
        return head_excluded(host, pid, start_time, info, why, protected=refusal), None
    what = "root" if role == "root" else "a process between the root and the members"
    return None, head_target(host, pid, start_time, info, f"chosen; {what} of {job_words(job)}", role, job.id)

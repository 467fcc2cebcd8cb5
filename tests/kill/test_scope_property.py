"""A kill never reaches past what the operator chose: a property test over generated process trees.

Hypothesis builds a host: a process tree (parents, process groups, sessions, setsid), some processes
holding the device files, some listed by NVML on GPUs, monitors, the probe and its ancestors. The
real classification (gputui/probe/classify.py) turns it into the sample the operator sees; the real
planner (gputui/kill/plan/) builds the plan for a generated selection (processes, or GPUs); then the
probe's rounds are played out with the real rescan rule (gputui/probe/run/scope.py) on a model of the
driver after each kill (children re-parented, a dead parent still listed while a forked child holds
its context). The property, in every case:

- the PIDs signalled are the confirmed plan's, plus holders tied to them (descendants, members of
  their process group or session, holders of a ghost the operator chose), plus, only for a plan that
  cleans GPUs, hidden holders attributed to those GPUs;
- a protected process (PID 1, the probe, its ancestors, a monitor not included) is never signalled.

The real processes version of the same rule is tests/probe/test_reaper.py and tests/kill/test_scope.py.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.kill.plan import PlanOptions, plan_for_selection
from gputui.probe.common import MAX_ROUNDS
from gputui.probe.run import scope
from tests.support.proctrees import GPUS, Host, Task, hosts


@st.composite
def cases(draw: st.DrawFn) -> tuple[Host, list[int], list[int], bool]:
    host = draw(hosts())
    sample_pids = sorted(host.records())
    by_gpu = draw(st.booleans())
    gpus = sorted(draw(st.sets(st.integers(0, GPUS - 1), min_size=1, max_size=2))) if by_gpu else []
    pids = (
        []
        if by_gpu
        else sorted(draw(st.sets(st.sampled_from(sample_pids), min_size=1, max_size=3)))
        if sample_pids
        else []
    )
    sweep = draw(st.booleans())
    return host, gpus, pids, sweep


def tied_closure(host: Host, roots: set[int], ghosts: set[int]) -> set[int]:
    """Independently of scope.py: every process linked to the roots or the chosen ghosts by
    descent, process group or session, and what is linked to those in turn."""
    allowed = set(roots)
    changed = True
    while changed:
        changed = False
        for t in host.tasks.values():
            if t.pid in allowed:
                continue
            anchors = allowed | ghosts
            if host.ancestors(t.pid) & allowed or t.pgid in anchors or t.sid in anchors:
                allowed.add(t.pid)
                changed = True
    return allowed


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_what_is_signalled_stays_inside_the_confirmed_plan_and_what_is_tied_to_it(case: Any) -> None:
    host, gpus, pids, sweep = case
    sample = host.sample()
    plan = plan_for_selection(
        sample, host="h", gpu_indexes=gpus, pids=pids, sweep=sweep, options=PlanOptions(operator="alice")
    )
    protected = {p.pid for p in sample.processes if p.protected or p.kind == "monitor"}
    confirmed = {t.pid for t in plan.signalled}
    assert not confirmed & protected
    # What the operator chose by PID is in the plan or left alone with a reason, never widened to
    # a sibling: every target is chosen, tied to what was chosen, or on a chosen GPU.
    original = Host(
        {p: Task(**vars(t)) for p, t in host.tasks.items()}, {p: dict(m) for p, m in host.listed.items()}
    )
    ghosts = set(plan.ghosts)
    tied_to_choice = tied_closure(original, set(pids), ghosts | set(pids))
    for t in plan.targets:
        assert (
            t.pid in tied_to_choice or set(t.gpus) & set(gpus) or _holds_for_ghost_on(original, t.pid, gpus)
        ), t

    # The probe's rounds.
    rule = scope.Rule(
        plan.gpu_indexes,
        confirmed,
        plan.ghosts,
        sweep=[(t.pid, t.start_time) for t in plan.sweep if plan.sweep_included],
    )
    rule.descendants = host.descendants(confirmed)
    signalled = set(confirmed)
    added: list[scope.Candidate] = []
    host.kill(confirmed)
    for round_no in range(MAX_ROUNDS):
        records = host.records()
        found = scope.admissible(records, rule, signalled)
        swept = scope.sweepable(records, rule, signalled) if round_no == 0 else []
        new = [c for c in found + swept if c.pid in host.tasks]
        if not new:
            break
        for c in new:
            assert records.get(c.pid, {}).get("protected") is None, c
            if c.origin == "attributed":
                # Only the GPUs the operator chose are the plan's business, never the GPUs that the
                # chosen processes happen to use.
                assert set(c.gpus) & set(gpus), (c, gpus, pids)
        added += new
        ids = {c.pid for c in new}
        rule.targets |= ids
        rule.descendants.update(host.descendants(ids))
        signalled |= ids
        host.kill(ids)

    allowed = tied_closure(original, confirmed, ghosts) | confirmed
    for c in added:
        if c.origin == "tied":
            assert c.pid in allowed, (c, sorted(confirmed), sorted(ghosts))
        elif c.origin == "sweep":
            assert plan.sweep_included and c.pid in {t.pid for t in plan.sweep}
    assert not signalled & protected


def _holds_for_ghost_on(host: Host, pid: int, gpus: list[int]) -> bool:
    """A ghost's suspect on a chosen GPU is a target of a GPU plan (it holds that GPU's memory)."""
    t = host.tasks.get(pid)
    if t is None:
        return False
    for ghost, mem in host.listed.items():
        if (
            ghost not in host.tasks
            and set(mem) & set(gpus)
            and ghost in (t.pgid, t.sid, *host.ancestors(pid))
        ):
            return True
    return False

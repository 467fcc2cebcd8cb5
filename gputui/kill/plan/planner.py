"""The planner: a plan from a sample and what the operator chose (GPUs, a host, processes, jobs),
by the rules of docs/GPU_FACTS.md (the package's docstring sums them up): who is targeted, who is
left alone and why, the sweep, the warnings. Pure functions over a Sample.

Jobs (jobs.py) and the plan of one signal (signal.py) are planned apart; both end here: a job
plan is a plan of its members with its roots and the processes between put first (`with_jobs`),
and a signal plan's warnings are any plan's (`plan_warnings`).
"""

from __future__ import annotations

import getpass
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace

from ...config.killoptions import KillOptions, PlanError
from ...model import Job, MigPlace, Proc, Sample
from ...text.words import count, gpus_words
from .entries import Excluded, GpuBefore, PlanScope, PlanWarning, Target, excluded_entry, target_entry
from .jobs import JobPart, job_for_pid, job_part, not_a_gpu_process, restart_warnings
from .mig import mig_part
from .mps import mps_clients, mps_warning, mps_words
from .reasons import UNATTRIBUTED_WORDS, chosen_zombie_words, exclusion, why, zombie_words
from .record import Plan, sweep_warning


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """What the operator chose besides the scope."""

    operator: str | None = None  # default: the local user name
    kill: KillOptions = KillOptions()
    probe_uid: int | None = None  # the uid the host's probe runs as (HostFacts.uid): warns about EPERM
    plan_id: str | None = None
    # Where named, the sweep takes only these users' holders (`clean --user alice --sweep`): another
    # user's exporter is no part of an errand about alice's work.
    sweep_users: tuple[str, ...] = ()

    def new_id(self) -> str:
        """The new plan's id: the one asked for, else a fresh one."""
        return self.plan_id or uuid.uuid4().hex[:12]

    def who(self) -> str:
        """Who runs the plan: the operator named, else the local user."""
        return self.operator or getpass.getuser()


# -- the ways to ask ---------------------------------------------------------------------------


def plan_for_gpus(
    sample: Sample,
    gpu_indexes: Iterable[int],
    *,
    host: str,
    sweep: bool = False,
    options: PlanOptions | None = None,
) -> Plan:
    """Free these GPUs: their users and the hidden holders attributed to them; a ghost's suspects."""
    return plan_for_selection(sample, host=host, gpu_indexes=gpu_indexes, sweep=sweep, options=options)


def plan_for_host(
    sample: Sample, *, host: str, sweep: bool = False, options: PlanOptions | None = None
) -> Plan:
    """Free every GPU of the host: `fuser -k /dev/nvidia*` minus the protected, with proof.

    Every process that uses or holds a GPU through a link is stopped; the unattributed holders are
    listed as the sweep, added only when asked (they may be someone's NVML exporter)."""
    indexes = {g.index for g in sample.gpus}
    # The protected holders too: `fuser -k` would have killed them; the plan says it will not.
    chosen = [p for p in sample.processes if p.gpus or p.protected or p.kind == "monitor"]
    return _build(sample, host, "host", indexes, chosen, sweep, options or PlanOptions())


def plan_for_pids(
    sample: Sample,
    pids: Iterable[int],
    *,
    host: str,
    sweep: bool = False,
    options: PlanOptions | None = None,
) -> Plan:
    """Stop these processes (and the hidden holders tied to them); prove them gone.

    A PID that is not in the sample is excluded: only GPU processes are planned here."""
    return plan_for_selection(sample, host=host, pids=pids, sweep=sweep, options=options)


def plan_for_selection(
    sample: Sample,
    *,
    host: str,
    gpu_indexes: Iterable[int] = (),
    pids: Iterable[int] = (),
    jobs: Iterable[Job] = (),
    instances: Iterable[MigPlace] = (),
    sweep: bool = False,
    options: PlanOptions | None = None,
) -> Plan:
    """GPUs, processes, jobs and MIG instances chosen together (the dashboard's selection, `--gpu`
    with `--pid`).

    Processes chosen by PID bring the hidden holders tied to them (stopping a parent alone would only
    turn it into a ghost); the GPUs they use are reported, not cleaned: that was not asked. A PID
    that is a job's root (a launcher, a supervisor: it may hold no GPU itself) or a process between
    a root and its members chooses that job, or the part of it below that process (`job_for_pid`);
    `jobs` are chosen whole. A job is stopped root first, then the members left (`Target.role`).
    A MIG instance (`instances`) chooses the processes that run in it and the hidden holders tied
    to them, never a job they belong to nor its GPU's other instances (`mig_part`)."""
    asked = set(gpu_indexes)
    indexes = _check_gpus(sample, asked, host)
    places = tuple(dict.fromkeys(instances))
    in_places = mig_part(sample, host, places)
    wanted = list(dict.fromkeys(pids))
    by_pid = {p.pid: p for p in sample.processes}
    chosen_jobs = list(dict.fromkeys(jobs))
    plain = []
    for pid in wanted:
        job = job_for_pid(sample, pid)
        if job is None:
            plain.append(pid)
        elif all(j.root != job.root for j in chosen_jobs):
            chosen_jobs.append(job)
    parts = [job_part(sample, host, job) for job in chosen_jobs]
    chosen = [p for p in sample.processes if set(p.gpus) & indexes]
    chosen += [by_pid[pid] for pid in plain if pid in by_pid]
    chosen += [p for part in parts for p in part.members]
    chosen += in_places
    tied = set(plain) | {t.pid for part in parts for t in part.heads} | {p.pid for p in in_places}
    chosen += [p for p in sample.processes if p.kind == "hidden" and set(p.links) & tied]
    scope: PlanScope
    if places and not (asked or wanted or chosen_jobs):
        scope = "mig"
    elif chosen_jobs and not asked:
        scope = "jobs"
    elif places:
        scope = "selection"
    else:
        scope = "gpus" if not wanted and not chosen_jobs else ("processes" if not asked else "selection")
    opts = options or PlanOptions()
    plan = _build(sample, host, scope, indexes, chosen, sweep, opts, explicit=set(plain), instances=places)
    unknown = tuple(not_a_gpu_process(sample, host, pid) for pid in plain if pid not in by_pid)
    if unknown:
        plan = replace(plan, excluded=plan.excluded + unknown)
    return with_jobs(plan, sample, parts, indexes, opts) if parts else plan


def plan_for_jobs(
    sample: Sample,
    jobs: Iterable[Job],
    *,
    host: str,
    sweep: bool = False,
    options: PlanOptions | None = None,
) -> Plan:
    """Stop these jobs: each root first (a launcher forwards the signal to its ranks), then the
    members left, on the usual ladder; prove every member gone with its memory released, and the
    root gone too. `jobs` as the sample (or the dashboard) carries them; their identity (root PID
    and start time) is the caller's to check against the sample (Operations does)."""
    return plan_for_selection(sample, host=host, jobs=jobs, sweep=sweep, options=options)


def with_jobs(plan: Plan, sample: Sample, parts: list[JobPart], indexes: set[int], opts: PlanOptions) -> Plan:
    """`plan` (built with the jobs' members as chosen processes) with the jobs' roots and the
    processes between as targets first, the members marked, a refused job's root excluded."""
    targets = list(plan.targets)
    excluded = list(plan.excluded)
    heads: list[Target] = []
    for part in parts:
        if part.refused is not None:
            excluded.append(part.refused)
            continue
        head_pids = {h.pid for h in part.heads}
        member_pids = {p.pid for p in part.members}
        targets = [t for t in targets if t.pid not in head_pids]
        for i, t in enumerate(targets):
            if t.pid in member_pids and t.role is None:
                targets[i] = replace(
                    t, role="member", job=part.job.id, why=f"member of job {part.job.id}; {t.why}"
                )
        heads += part.heads
    jobs = tuple(part.job for part in parts if part.refused is None)
    # Roots first, then the processes between, then everything else in the plan's order.
    heads.sort(key=lambda t: 0 if t.role == "root" else 1)
    everything = heads + targets
    # A root that holds a GPU itself (a job of one process, a server with workers): its GPU is
    # reported too.
    used = {i for t in everything for i in t.gpus} - set(plan.gpu_indexes)
    touched = tuple(GpuBefore.of(g) for g in sample.gpus if g.index in used)
    # A job's root may be a sweep candidate too (an unattributed holder that is a job of its own):
    # it is a target now, listed and counted once.
    chosen = {t.pid for t in everything}
    sweep = tuple(t for t in plan.sweep if t.pid not in chosen)
    new = replace(
        plan,
        targets=tuple(everything),
        excluded=tuple(excluded),
        jobs=jobs,
        touched=touched,
        sweep=sweep,
        sweep_included=plan.sweep_included and bool(sweep),
    )
    return replace(new, warnings=tuple(plan_warnings(new, sample, indexes, opts)))


def sweep_candidates(sample: Sample) -> list[Proc]:
    """Unattributed hidden holders: hold /dev/nvidia*, NVML lists them nowhere, no link to a GPU."""
    return [p for p in sample.processes if p.kind == "hidden" and not p.gpus and not p.protected]


# -- building ----------------------------------------------------------------------------------


def _check_gpus(sample: Sample, gpu_indexes: Iterable[int], host: str) -> set[int]:
    known = {g.index for g in sample.gpus}
    indexes = set(gpu_indexes)
    missing = sorted(indexes - known)
    if missing:
        have = ", ".join(str(i) for i in sorted(known)) or "none"
        raise PlanError(f"{host} has no GPU {', '.join(map(str, missing))} (its GPUs: {have})")
    return indexes


def _build(
    sample: Sample,
    host: str,
    scope: PlanScope,
    indexes: set[int],
    chosen: list[Proc],
    sweep: bool,
    opts: PlanOptions,
    explicit: set[int] | None = None,
    instances: tuple[MigPlace, ...] = (),
) -> Plan:
    by_pid = {p.pid: p for p in sample.processes}
    explicit = explicit or set()
    targets: dict[int, Target] = {}
    excluded: dict[int, Excluded] = {}
    ghosts: list[int] = []
    for proc in chosen:
        if proc.pid in targets or proc.pid in excluded:
            continue
        reason = exclusion(proc, by_pid)
        if reason is not None:
            clients = mps_clients(sample, proc)
            if clients and proc.protected == "monitor":
                reason = mps_words(proc, clients)
            excluded[proc.pid] = excluded_entry(
                host, proc, reason, chosen=proc.pid in explicit, clients=clients
            )
        if proc.kind == "ghost":
            if proc.pid in explicit:
                ghosts.append(proc.pid)
            # Its memory is held by the suspects: they are the targets.
            for pid in proc.links:
                suspect = by_pid.get(pid)
                if suspect is not None and pid not in targets and exclusion(suspect, by_pid) is None:
                    targets[pid] = target_entry(host, suspect, f"holds the memory of ghost {proc.pid}")
        elif reason is None:
            said = why(proc, explicit)
            inside = [m.label for m in proc.mig if any(m.within(i) for i in instances)]
            if inside:
                said = f"runs in MIG instance {', '.join(inside)}; {said}"
            targets[proc.pid] = target_entry(host, proc, said, mps_clients(sample, proc))
    for zombie in _zombies_near(sample, indexes, targets, scope):
        excluded.setdefault(zombie.pid, excluded_entry(host, zombie, zombie_words(zombie)))
    # The sweep is offered where it can add something: a plan that frees GPUs (a holder NVML does not
    # list may keep their memory) or stops a ghost's holders (its memory's may be among them), or when
    # asked. Beside chosen processes, the host's other unattributed holders are no part of the errand.
    offered = sweep or bool(indexes) or bool(ghosts)
    sweep_targets = tuple(
        target_entry(host, p, UNATTRIBUTED_WORDS)
        for p in (sweep_candidates(sample) if offered else ())
        if p.pid not in targets
        and p.start_time is not None
        and (not opts.sweep_users or p.user in opts.sweep_users)
    )
    ordered = tuple(sorted(targets.values(), key=lambda t: (min(t.gpus, default=1 << 20), -t.memory, t.pid)))
    used = {i for t in ordered for i in t.gpus} | {i for pid in ghosts for i in by_pid[pid].gpus}
    plan = Plan(
        id=opts.new_id(),
        host=host,
        operator=opts.who(),
        scope=scope,
        gpus=tuple(GpuBefore.of(g) for g in sample.gpus if g.index in indexes),
        targets=ordered,
        sweep=sweep_targets,
        sweep_included=sweep and bool(sweep_targets),
        excluded=tuple(excluded.values()),
        warnings=(),
        touched=tuple(GpuBefore.of(g) for g in sample.gpus if g.index in used - indexes),
        ghosts=tuple(ghosts),
        kill=opts.kill,
        sample_seq=sample.seq,
        instances=instances,
    )
    return replace(plan, warnings=tuple(plan_warnings(plan, sample, indexes, opts)))


def _zombies_near(
    sample: Sample, indexes: set[int], targets: dict[int, Target], scope: PlanScope
) -> list[Proc]:
    """Zombies worth showing with this plan: all for a host-wide plan, else those whose parent,
    group or session is a process on the targeted GPUs (where the memory of a bench run went)."""
    zombies = [p for p in sample.processes if p.kind == "zombie"]
    if scope == "host":
        return zombies
    near = set(targets) | {p.pid for p in sample.processes if set(p.gpus) & indexes}
    return [z for z in zombies if {z.ppid, z.pgid, z.sid} & near]


def plan_warnings(plan: Plan, sample: Sample, indexes: set[int], opts: PlanOptions) -> list[PlanWarning]:
    out: list[PlanWarning] = []
    for t in plan.signalled:
        if t.user is not None and t.user != plan.operator:
            out.append(
                PlanWarning("other-user", f"{t.pid} belongs to {t.user}, not to you ({plan.operator})", t.pid)
            )
        if t.state == "D":
            out.append(
                PlanWarning(
                    "uninterruptible",
                    f"{t.pid} is in state D (uninterruptible): even SIGKILL may not end it",
                    t.pid,
                )
            )
        others = sorted(set(t.gpus) - indexes)
        if others and plan.cleans_gpus:
            out.append(
                PlanWarning(
                    "other-gpus",
                    f"{t.pid} also uses {gpus_words(others)}: stopping it frees "
                    + ("that too" if len(others) == 1 else "those too"),
                    t.pid,
                )
            )
        if (w := mps_warning(t.pid, t.mps, t.mps_clients)) is not None:
            out.append(w)
        if opts.probe_uid not in (None, 0) and t.uid is not None and t.uid != opts.probe_uid:
            out.append(
                PlanWarning(
                    "permission",
                    f"the probe on {plan.host} runs as uid {opts.probe_uid}: signals to {t.pid} "
                    f"({t.user or t.uid}) will be refused (sudo = true in the host config allows them)",
                    t.pid,
                )
            )
    if plan.signal is None:  # one signal by name (SIGSTOP, SIGHUP) ends no process: nothing to restart
        out += restart_warnings(plan.signalled, sample)
    if plan.sweep and not plan.sweep_included:
        out.append(sweep_warning(len(plan.sweep)))
    if sample.scan_unreadable:
        out.append(
            PlanWarning(
                "unreadable",
                f"{count(sample.scan_unreadable, 'process', 'processes')}' file descriptors could not be "
                "read: hidden holders may be missing (run the probe as root)",
            )
        )
    by_pid = {p.pid: p for p in sample.processes}
    zombies = [by_pid[e.pid] for e in plan.excluded if e.chosen and e.kind == "zombie" and e.pid in by_pid]
    out += [PlanWarning("zombie", chosen_zombie_words(z, by_pid), z.pid) for z in zombies]
    if plan.is_empty and not plan.zombies_alone:  # chosen zombies alone: said above
        where = gpus_words(sorted(indexes)) if indexes else (plan.instances_words or "the chosen processes")
        out.append(PlanWarning("nothing", f"nothing to stop for {where}: the probe will only verify"))
    return out

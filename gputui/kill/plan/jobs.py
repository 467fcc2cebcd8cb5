"""Jobs in a plan: which job a PID chooses, what stopping a job takes (its root, the processes
between, its GPU members), which roots must never be signalled, and how plans and verdicts name a
job (docs/ARCHITECTURE.md "Jobs: how a job's root is found").

Apart from the planner because `gputui clean --job/--pid` (gputui.cli.jobspec) asks which job a
PID names without planning anything, and the planner's other scopes need none of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from ...model import Job, Parent, Proc, Sample, brief_process
from ...probe.jobs import INIT_COMMS, SESSION_COMMS, SHELLS, Node, interactive_shell
from ...text.words import pids, plural
from .entries import Excluded, PlanWarning, Target, head_excluded, head_target, target_entry
from .mps import mps_clients
from .reasons import PROTECTED_WORDS, why

# -- naming jobs ---------------------------------------------------------------------------------


def job_words(job: Job) -> str:
    """`job 4242 (torchrun --nproc-per-node 2 train.py)`: how a plan and a verdict name a job."""
    command = job.command_line
    if len(command) > 60:
        command = command[:57] + "..."
    return f"job {job.id} ({command})"


def jobs_title(jobs: Iterable[Job]) -> str | None:
    """`Stop job 4242 (torchrun ...)`, `Stop 2 jobs: 4242 (torchrun ...), 4343 (python serve.py)`;
    None for no job. The one place these words are made (the dialog's title, the CLI's plan head)."""
    items = list(jobs)
    if not items:
        return None
    if len(items) == 1:
        return "Stop " + job_words(items[0])
    shown = ", ".join(job_words(j)[len("job ") :] for j in items[:4])
    more = f" and {len(items) - 4} more" if len(items) > 4 else ""
    return f"Stop {len(items)} jobs: {shown}{more}"


def excluded_root(
    host: str, job: Job, why: str, *, kind: str = "root", protected: str | None = None
) -> Excluded:
    """A chosen job's root that a plan leaves alone (refused, or lost since it was chosen), as the
    job record names it: root PID and start time, command, user, GPUs."""
    return head_excluded(
        host, job.root, job.root_start, job, why, kind=kind, protected=protected, gpus=job.gpus
    )


# -- which job a PID chooses ---------------------------------------------------------------------


def job_for_pid(sample: Sample, pid: int) -> Job | None:
    """The job `clean --pid PID` stops, or None when PID names a plain process (or nothing known).

    PID is a job's root: that job (unless it is the job's only member: a plain GPU process). PID is
    a process between a job's root and its members (an agent below a launcher): the part of the
    job below it, as a job rooted there. Anything above a root (a shell, sshd, init) is no job."""
    for job in sample.jobs:
        if job.root == pid:
            if job.members == (pid,):
                return None
            return job
    ppids = _ppids(sample)
    gpu_pids = {p.pid for p in sample.processes}
    for job in sample.jobs:
        starts = dict(job.processes)
        if pid not in starts or pid in gpu_pids:
            continue
        members = tuple(m for m in job.members if _path_up(m, pid, ppids) is not None)
        if not members:
            continue
        info = next((p for p in sample.parents if p.pid == pid), None)
        procs = {p.pid: p for p in sample.processes if p.pid in members}
        return replace(
            job,
            id=str(pid),
            root=pid,
            root_start=starts[pid],
            name=info.name if info else None,
            command=info.command if info else (),
            user=info.user if info else None,
            uid=info.uid if info else None,
            state=info.state if info else None,
            ppid=info.ppid if info else None,
            members=members,
            processes=tuple((p, s) for p, s in job.processes if p == pid or _path_up(p, pid, ppids)),
            gpus=tuple(sorted({g for p in procs.values() for g in p.gpus})),
            memory=sum(b or 0 for p in procs.values() for b in p.gpu_memory.values()),
        )
    return None


def above_jobs(sample: Sample, pid: int) -> tuple[Job, ...]:
    """The jobs whose root `pid` is an ancestor of (the shell, sshd, tmux or init they were started
    from; a container's or unit's edge): asking for `pid` is asking for none of them."""
    ppids = _ppids(sample)
    if any(j.root == pid for j in sample.jobs):
        return ()
    return tuple(j for j in sample.jobs if _path_up(j.root, pid, ppids) is not None)


def not_a_gpu_process(sample: Sample, host: str, pid: int) -> Excluded:
    """A PID chosen that is no GPU process and no job's: unknown, or above jobs (refused)."""
    jobs = above_jobs(sample, pid)
    if not jobs:
        return head_excluded(host, pid, None, None, "not a GPU process in the latest sample", kind="unknown")
    info = next((p for p in sample.parents if p.pid == pid), None)
    name = info.name if info is not None else None
    node = Node(pid=pid, start=0, ppid=0, comm=name or "", argv=info.command if info is not None else ())
    if pid == 1:
        what = "pid-1"
    elif name in SESSION_COMMS or interactive_shell(node):
        what = "session"
    elif name in INIT_COMMS or jobs[0].boundary == "init":
        what = "init"  # an init program, or what acts as one here (a subreaper: the sim's session)
    elif jobs[0].boundary == "shell":
        what = "session"
    else:
        what = "boundary"
    ids = ", ".join(j.id for j in jobs[:8]) + (" ..." if len(jobs) > 8 else "")
    return head_excluded(
        host,
        pid,
        info.start_time if info is not None else None,
        info,
        f"above {plural(len(jobs), 'job')} {ids}: {PROTECTED_WORDS[what]}; {stop_instead(jobs)}",
        protected=what,
    )


HINTED_JOBS = 3  # the jobs a hint's command names; the rest are counted


def stop_instead(jobs: Sequence[Job]) -> str:
    """`stop the jobs instead: clean --job 4242 --job 4300 --job 4310 (and 5 more)`: every job below
    a PID that is refused, the first HINTED_JOBS in the command, the rest counted."""
    flags = " ".join(f"--job {j.id}" for j in jobs[:HINTED_JOBS])
    more = f" (and {len(jobs) - HINTED_JOBS} more)" if len(jobs) > HINTED_JOBS else ""
    return f"stop the {plural(len(jobs), 'job')} instead: clean {flags}{more}"


# -- which roots must never be signalled ---------------------------------------------------------


def root_refusal(job: Job, sample: Sample) -> str | None:
    """Why a job's root must never be signalled (a PROTECTED_WORDS key), or None. The probe finds
    roots below these (docs/ARCHITECTURE.md "Jobs: how a job's root is found"); a root that is one
    anyway (a protected GPU process is a job of its own) is refused, and so is the job."""
    proc = next((p for p in sample.processes if p.pid == job.root), None)
    if proc is not None and proc.protected:
        return proc.protected
    if job.root == 1:
        return "pid-1"
    if job.root == 2:
        return "kernel-thread"
    name = job.name or ""
    if name in SESSION_COMMS:
        return "session"
    if name in INIT_COMMS:
        return "init"
    if name in SHELLS or (job.command and job.command[0].startswith("-")):
        node = Node(pid=job.root, start=job.root_start or 0, ppid=job.ppid or 0, comm=name, argv=job.command)
        if interactive_shell(node):
            return "session"
    return None


def head_refusal(pid: int, name: str, node: Node) -> str | None:
    """Why a process above a job's GPU processes must never be signalled (a PROTECTED_WORDS key)."""
    if pid == 1:
        return "pid-1"
    if pid == 2:
        return "kernel-thread"
    if name in SESSION_COMMS or interactive_shell(node):
        return "session"
    if name in INIT_COMMS:
        return "init"
    return None


# -- what stopping a job takes -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobPart:
    """One job of a plan: its root and the processes between (`heads`, no GPU needed), the GPU
    processes below the root (`members`), and why the job cannot be stopped, if so."""

    job: Job
    heads: tuple[Target, ...]
    members: tuple[Proc, ...]
    refused: Excluded | None = None


def job_part(sample: Sample, host: str, job: Job) -> JobPart:
    """What stopping `job` takes: every GPU process of the root's subtree (by the sample's parent
    links, and the job's own member list), the root, and the processes between them."""
    ppids = _ppids(sample)
    members = tuple(
        p
        for p in sample.processes
        if p.kind in ("user", "hidden", "monitor")
        and p.pid != job.root
        and (p.pid in job.members or _path_up(p.pid, job.root, ppids) is not None)
    )
    starts = dict(job.processes)
    parents = {p.pid: p for p in sample.parents}
    root_proc = next((p for p in sample.processes if p.pid == job.root), None)
    reason = root_refusal(job, sample)
    if reason is None and job.root_start is None:
        reason = "no-start"
    member_pids = {p.pid for p in members}
    between: list[int] = []
    for m in members:
        for pid in _path_up(m.pid, job.root, ppids) or ():
            if pid not in between and pid not in member_pids and pid in starts:
                between.append(pid)
    if reason is not None:
        words = PROTECTED_WORDS.get(
            reason, "its start time could not be read: it cannot be identified safely"
        )
        refused = excluded_root(
            host,
            job,
            f"root of {job_words(job)}: {words}; its job is not stopped",
            kind=root_proc.kind if root_proc is not None else "root",
            protected=reason if reason != "no-start" else None,
        )
        return JobPart(job, (), (), refused)
    root_why = f"root of job {job.id}: signalled first" + (
        " (a launcher passes it on to its members)" if members else ""
    )
    if root_proc is not None:
        said = f"{root_why}; {why(root_proc, set())}" if root_proc.gpus else root_why
        root = replace(
            target_entry(host, root_proc, said, mps_clients(sample, root_proc)), role="root", job=job.id
        )
    else:
        assert job.root_start is not None
        root = head_target(host, job.root, job.root_start, job, root_why, "root", job.id)
    heads = [root]
    for pid in between:
        start = starts[pid]
        if start is None:
            continue  # cannot be told from a reuse: not signalled (the root's signal reaches it)
        what = f"between the root and the members of job {job.id}"
        heads.append(head_target(host, pid, start, parents.get(pid), what, "between", job.id))
    return JobPart(job, tuple(heads), members)


# -- who may start a target again -----------------------------------------------------------------


def restart_warnings(targets: Iterable[Target], sample: Sample) -> list[PlanWarning]:
    """A warning per parent that may start targets of the plan again: a target's parent that is of
    the same job (its root, or a process between the root and the members) and is not signalled
    itself. The verdict names such a parent once it has outlived the plan (probe: supervisor_of,
    boundary); the plan says it before, with the job that stopping takes: `X` in the dashboard,
    `clean --job` from the shell. A job of one process, or a parent above its job (a shell, an
    init), is no such parent."""
    items = list(targets)
    signalled = {t.pid for t in items}
    ppids = _ppids(sample)
    children: dict[int, list[int]] = {}
    jobs: dict[int, Job] = {}
    for t in items:
        parent = ppids.get(t.pid)
        if parent is None or parent in signalled:
            continue
        job = next((j for j in sample.jobs if {t.pid, parent} <= {pid for pid, _ in j.processes}), None)
        if job is not None:
            children.setdefault(parent, []).append(t.pid)
            jobs[parent] = job
    return [_restart_warning(sample, parent, kids, jobs[parent]) for parent, kids in children.items()]


def _restart_warning(sample: Sample, parent: int, children: list[int], job: Job) -> PlanWarning:
    """`parent 4242 `python supervisor.py` of 5252 is not in the plan and may start it again: stop
    job 4242 whole`: the verdict's words (words.restart_words), said before; how to stop the job is
    each front's to say (PlanWarning.said: `X` in the dashboard, `clean --job 4242` in the CLI)."""
    known: list[Parent | Proc] = [*sample.parents, *sample.processes]
    info = next((p for p in known if p.pid == parent), None)
    brief = brief_process(info.command, info.name) if info is not None else "?"
    them = "it" if len(children) == 1 else "them"
    kids = pids(children[:8]) + (" and more" if len(children) > 8 else "")
    return PlanWarning(
        "restart",
        f"parent {parent} `{brief[:80]}` of {kids} is not in the plan and may start {them} "
        f"again: stop job {job.id} whole",
        children[0],
        job=job.id,
    )


def _ppids(sample: Sample) -> dict[int, int]:
    out = {p.pid: p.ppid for p in sample.parents if p.ppid is not None}
    out.update({p.pid: p.ppid for p in sample.processes if p.ppid is not None})
    return out


def _path_up(pid: int, root: int, ppids: dict[int, int], limit: int = 64) -> list[int] | None:
    """The PIDs strictly between `pid` and its ancestor `root`, nearest first; None when `root` is
    not an ancestor as far as the sample knows."""
    path: list[int] = []
    at = ppids.get(pid)
    while at is not None and len(path) <= limit:
        if at == root:
            return path
        path.append(at)
        at = ppids.get(at)
    return None

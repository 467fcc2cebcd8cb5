"""What `gputui clean` names besides GPUs: processes and jobs, per host.

People stop "my torchrun job", "Slurm job 4711", "what container 129 runs", "everything of alice",
not PIDs. Each selector here is exact (no prefix matching, no pattern): a name that matches nothing
is a usage error that lists what exists (NotFound: where a host did not answer, the caller says it
may be there instead), so a typo never stops the wrong work.

- `--pid PID`: a GPU process, or a job's root (a launcher holding no GPU) or a process between a
  root and its members (plan.job_for_pid). A PID above a job (the shell or sshd it was started
  from, an init) is passed on: the plan refuses it with the reason (plan.above_jobs).
- `--job ID`: the job with that id (its root's PID), as `snapshot` lists them.
- `--slurm-job ID`, `--container NAME`: every job whose root is in that Slurm job or container.
- `--pod NAMESPACE/NAME`: every job whose root is in that Kubernetes pod (its container
  `pod/NAMESPACE/NAME`; `--pod UID` where the node keeps no name and the pod is `pod/<uid>`).
- `--user NAME`: every job whose root belongs to NAME, and NAME's GPU processes in other jobs
  (monitors and protected processes stay excluded by the plan, as always).
Pure functions over the samples: nothing here touches a process.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..kill.plan.jobs import above_jobs, job_for_pid
from ..model import Job, Sample
from ..model.textsafe import cut, printable
from .gpuspec import NotFound, UsageError

SHOWN = 12  # names listed in a "no such ..." message
POD = "pod/"  # a Kubernetes pod's container: pod/NAMESPACE/NAME (gputui/probe/pods.py), or pod/<uid>


@dataclass
class Chosen:
    """What one host was asked for by PID and by job."""

    pids: set[int] = field(default_factory=set)
    jobs: dict[str, Job] = field(default_factory=dict)  # by id, in the order they were named

    def add_job(self, job: Job) -> None:
        self.jobs.setdefault(job.id, job)


def choose(
    samples: dict[str, Sample],
    *,
    pids: Sequence[int] = (),
    jobs: Sequence[str] = (),
    slurm_jobs: Sequence[str] = (),
    containers: Sequence[str] = (),
    users: Sequence[str] = (),
    pods: Sequence[str] = (),
) -> dict[str, Chosen]:
    """{host: what to stop there}. Raises NotFound for a name that matches nothing on any host
    (listing what there is) and UsageError for a PID or job id found on more than one host."""
    out: dict[str, Chosen] = {}

    def on(host: str) -> Chosen:
        return out.setdefault(host, Chosen())

    for pid in pids:
        hosts = [h for h, s in samples.items() if _knows_pid(s, pid)]
        if len(hosts) > 1:
            raise UsageError(f"PID {pid} is on {', '.join(hosts)}: name one HOST to say which")
        if not hosts:
            raise NotFound(
                f"PID {pid} is not a GPU process or a job's root on any of the hosts ({_jobs_seen(samples)})"
            )
        on(hosts[0]).pids.add(pid)
    for job_id in jobs:
        found = [(h, j) for h, s in samples.items() for j in s.jobs if j.id == job_id]
        if len(found) > 1:
            raise UsageError(
                f"job {job_id} is on {', '.join(h for h, _ in found)}: name one HOST to say which"
            )
        if not found:
            raise NotFound(f"no job {printable(job_id)} on the hosts ({_jobs_seen(samples)})")
        on(found[0][0]).add_job(found[0][1])
    for slurm in slurm_jobs:
        matched = _by(samples, "slurm_job", slurm)
        if not matched:
            seen = _names(j.slurm_job for s in samples.values() for j in s.jobs)
            raise NotFound(f"no Slurm job {printable(slurm)} on the hosts (Slurm jobs seen: {seen})")
        for host, job in matched:
            on(host).add_job(job)
    for name in containers:
        matched = _by(samples, "container", name)
        if not matched:
            seen = _names(
                [j.container for s in samples.values() for j in s.jobs]
                + [p.container for s in samples.values() for p in s.processes]
            )
            raise NotFound(f"no job in container {printable(name)} on the hosts (containers seen: {seen})")
        for host, job in matched:
            on(host).add_job(job)
    for pod in pods:
        for host, job in _in_pod(samples, pod):
            on(host).add_job(job)
    for user in users:
        matched = _by(samples, "user", user)
        plain = [
            (h, p.pid)
            for h, s in samples.items()
            for p in s.processes
            if p.user == user
            and p.kind in ("user", "hidden")
            and not p.protected  # left out, as every plan leaves it: not a refusal of the rest
            and not any(j.user == user and p.job == j.id for j in s.jobs)
        ]
        if not matched and not plain:
            seen = _names(
                [j.user for s in samples.values() for j in s.jobs]
                + [p.user for s in samples.values() for p in s.processes if p.kind in ("user", "hidden")]
            )
            raise NotFound(
                f"no job or GPU process of user {printable(user)} on the hosts (users seen: {seen})"
            )
        for host, job in matched:
            on(host).add_job(job)
        for host, pid in plain:
            on(host).pids.add(pid)
    return out


def _in_pod(samples: dict[str, Sample], pod: str) -> list[tuple[str, Job]]:
    """The jobs of Kubernetes pod `pod` (NAMESPACE/NAME, or a uid); UsageError naming the pods
    there are when none is in it."""
    matched = _by(samples, "container", POD + pod)
    if not matched:
        containers = [j.container for s in samples.values() for j in s.jobs]
        containers += [p.container for s in samples.values() for p in s.processes]
        seen = _names(c[len(POD) :] for c in containers if c and c.startswith(POD))
        raise NotFound(f"no job in pod {printable(pod)} on the hosts (pods seen: {seen})")
    return matched


def _knows_pid(sample: Sample, pid: int) -> bool:
    """A GPU process, a job's root or a process of a job's chain, or one above a job (refused later)."""
    if any(p.pid == pid for p in sample.processes):
        return True
    return job_for_pid(sample, pid) is not None or bool(above_jobs(sample, pid))


def _by(samples: dict[str, Sample], attribute: str, value: str) -> list[tuple[str, Job]]:
    """Every job whose `attribute` (slurm_job, container, user) is exactly `value`."""
    return [(h, j) for h, s in samples.items() for j in s.jobs if getattr(j, attribute) == value]


def _names(values: Iterable[str | None]) -> str:
    names = sorted({v for v in values if v})
    if not names:
        return "none"
    shown = ", ".join(printable(n) for n in names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def _jobs_seen(samples: dict[str, Sample]) -> str:
    """`jobs: demo-a: 5550 (torchrun ...), 5551 (python supervisor.py)`, or `no job`."""
    parts = []
    for host, sample in samples.items():
        if sample.jobs:
            shown = ", ".join(f"{printable(j.id)} ({cut(j.command_line, 40)})" for j in sample.jobs[:SHOWN])
            more = f" and {len(sample.jobs) - SHOWN} more" if len(sample.jobs) > SHOWN else ""
            parts.append(f"{printable(host)}: {shown}{more}")
    return "jobs: " + "; ".join(parts) if parts else "no job there"

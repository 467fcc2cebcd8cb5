"""The jobs of a sample (docs/PROTOCOL.md "Jobs"): the work a set of GPU processes belongs to, named
by its root, which is what `clean --job` and the dashboard's job view stop as one. Separate from the
processes (gputui.model.samples) because a job is told apart by different rules: an id that is
unique in its sample, a root, its members and the processes between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..probe.jobs import BOUNDARIES, MAX_JOB_PROCESSES, MAX_JOBS, MAX_MEMBERS
from .decode import (
    Indexes,
    Pids,
    as_count,
    as_list,
    as_pid,
    as_pids,
    gpu_set,
    listed_once,
    plain,
    read_fields,
    records,
    wire_fields,
)
from .process import ProcessFacts

MAX_JOB_ID = 64  # characters of a job id (the probe sends the root's PID)


def as_job_id(value: Any) -> str | None:
    """A job id as the probe sends it (the root's PID, as a string): 1 to MAX_JOB_ID printable
    characters without spaces; anything else is no id."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_JOB_ID:
        return None
    if not value.isprintable() or any(c.isspace() for c in value):
        return None
    return value


def _job_processes(value: Any) -> tuple[tuple[int, int | None], ...]:
    """A job's `processes`: [pid, start_time] pairs, at most MAX_JOB_PROCESSES; bad pairs dropped."""
    out: list[tuple[int, int | None]] = []
    for item in as_list(value)[:MAX_JOB_PROCESSES]:
        if isinstance(item, list) and len(item) == 2:
            pid = as_pid(item[0])
            if pid is not None:
                out.append((pid, as_count(item[1])))
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True, slots=True, kw_only=True)
class Job(ProcessFacts):
    """The work a set of GPU processes belongs to (docs/PROTOCOL.md "Jobs"): its root (a launcher,
    a supervisor, a service's main process, the process itself), its members (the GPU processes
    below the root), their GPUs and memory, and where known its Slurm job, container and unit.

    `id` is what people type (`clean --job ID`): the root's PID as a string. `processes`: (pid,
    start time) of the root, the members and the processes between them, parents first. The root's
    name, command, owner, state and parent are ProcessFacts'."""

    id: str
    root: int
    root_start: int | None = None
    boundary: str | None = None  # container, slurm, unit, init, shell, limit
    members: Pids = ()
    processes: tuple[tuple[int, int | None], ...] = ()
    gpus: Indexes = ()
    memory: int | None = None
    slurm_job: str | None = None
    container: str | None = None
    unit: str | None = None

    @classmethod
    def from_wire(cls, d: Any) -> Job | None:
        """None for a record without a usable id and root (it cannot be named or stopped)."""
        if not isinstance(d, dict):
            return None
        ident, root = as_job_id(d.get("id")), as_pid(d.get("root"))
        if ident is None or root is None:
            return None
        return cls(id=ident, root=root, **read_fields(d, _JOB))

    @property
    def key(self) -> tuple[int, int | None]:
        """The root's identity: a PID alone can be reused."""
        return (self.root, self.root_start)

    @property
    def where(self) -> str:
        """`slurm 4711`, `container lxc/129`, `unit vllm.service`, joined by `, `; empty for none."""
        parts = [f"slurm {self.slurm_job}" if self.slurm_job else ""]
        parts += [f"container {self.container}" if self.container else ""]
        parts += [f"unit {self.unit}" if self.unit else ""]
        return ", ".join(p for p in parts if p)

    def describe(self) -> dict[str, Any]:
        """Plain JSON types (`snapshot --json`, tests): the job's identity first, as documented."""
        return plain(self, first=("id", "root", "root_start"))


_JOB = wire_fields(
    Job,
    skip=("id", "root"),
    boundary=lambda value: value if value in BOUNDARIES else None,
    members=lambda value: tuple(dict.fromkeys(as_pids(value, MAX_MEMBERS))),
    processes=_job_processes,
    gpus=gpu_set,
)


def sample_jobs(value: Any) -> tuple[Job, ...]:
    """A sample's jobs, at most MAX_JOBS; a record without a usable id or root is dropped, and so is
    a second one with an id already taken (which of the two is meant cannot be told)."""
    return listed_once(records(value, Job.from_wire, MAX_JOBS), _job_id)[0]


def _job_id(job: Job) -> str:
    return job.id

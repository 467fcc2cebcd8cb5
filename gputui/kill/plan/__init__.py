"""Kill plans built from what the operator sees (a Sample): the confirmation dialog's and the CLI's.

A plan names processes by (pid, start time), says why each is targeted, which ones it leaves alone and
why, what to watch out for, the stages and timeouts the probe will run, and what it will prove
(docs/PROTOCOL.md "Plans"). Its scope decides both what the probe may add after the first kills and
what the verdict is about (docs/ARCHITECTURE.md "Staged kill-and-verify"):
- a GPU (or host) plan frees GPUs: their users, the hidden holders attributed to them and a ghost's
  suspects are targets, and the verdict is "the GPU is clean";
- a plan of processes stops exactly the chosen ones (and the hidden holders tied to them: stopping a
  parent alone would only turn it into a ghost); the verdict is "each is gone and the memory it held
  came back". What else uses those GPUs is named in the verdict, untouched.
The rules follow docs/GPU_FACTS.md: holding /dev/nvidiaN alone does not put a process on GPU N; a ghost
(a dead PID NVML still lists) is never a target, its suspected holders are; a zombie holds nothing;
protected processes (monitors, PID 1, the probe and its ancestors, kernel threads) are excluded, and
only a monitor can be included, explicitly (`Plan.including`), as the probe also enforces;
unattributed hidden holders are sweep candidates, listed apart and signalled only when asked.
Pure functions over a Sample: nothing here touches processes or the network.

The package, bottom up: entries.py (the processes a plan names, its warnings, the GPUs as it saw
them), reasons.py (why a process is in or out, in words), mps.py (CUDA MPS servers and their
clients), jobs.py (which job a PID names, what stopping a job takes), record.py (the `Plan`
itself), planner.py (the ways to ask: GPUs, a host, processes, jobs) and signal.py (one signal,
once). Every name callers used when this was one module is here.
"""

from ...config.killoptions import KillOptions, PlanError
from ...probe.common import SIGNAL_CHOICES, SIGNAL_PLANS
from ...probe.run.orders import JOB_ROLES
from .entries import (
    SCOPES,
    SEVERE,
    WARNING_KINDS,
    Entry,
    Excluded,
    GpuBefore,
    PlanWarning,
    Target,
    excluded_entry,
    target_entry,
)
from .jobs import above_jobs, excluded_root, job_for_pid, job_words, jobs_title, root_refusal
from .mps import mps_clients, mps_warning
from .planner import (
    PlanOptions,
    plan_for_gpus,
    plan_for_host,
    plan_for_jobs,
    plan_for_pids,
    plan_for_selection,
    sweep_candidates,
)
from .reasons import PROTECTED_WORDS, UNATTRIBUTED_WORDS
from .record import KILL_WAIT, SIGNAL_WORDS, VERIFY_POLL_MS, Plan
from .signal import SIGNAL_MEANINGS, plan_for_signal

__all__ = [
    "JOB_ROLES",
    "KILL_WAIT",
    "PROTECTED_WORDS",
    "SCOPES",
    "SEVERE",
    "SIGNAL_CHOICES",
    "SIGNAL_MEANINGS",
    "SIGNAL_PLANS",
    "SIGNAL_WORDS",
    "UNATTRIBUTED_WORDS",
    "VERIFY_POLL_MS",
    "WARNING_KINDS",
    "Entry",
    "Excluded",
    "GpuBefore",
    "KillOptions",
    "Plan",
    "PlanError",
    "PlanOptions",
    "PlanWarning",
    "Target",
    "above_jobs",
    "excluded_entry",
    "excluded_root",
    "job_for_pid",
    "job_words",
    "jobs_title",
    "mps_clients",
    "mps_warning",
    "plan_for_gpus",
    "plan_for_host",
    "plan_for_jobs",
    "plan_for_pids",
    "plan_for_selection",
    "plan_for_signal",
    "root_refusal",
    "sweep_candidates",
    "target_entry",
]

"""CUDA MPS in a plan: which clients end with an MPS server or control daemon, and the words that
warn of it (docs/GPU_FACTS.md). Apart because the planner, the plan's `including` and the dashboard
(gputui.ui.kinds, gputui.views.report) all ask it, and none of them needs the rest of the planner.
"""

from __future__ import annotations

from ...model import Proc, Sample
from ...text.words import count
from .entries import PlanWarning


def mps_clients(sample: Sample, proc: Proc) -> tuple[int, ...]:
    """The MPS clients that end with this process: for a server, the clients of its user on its GPUs
    (MPS runs one server per user); for the control daemon, every client of the host. Empty for
    anything else."""
    if proc.mps not in ("server", "control"):
        return ()
    clients = [p for p in sample.processes if p.mps == "client" and p.pid != proc.pid]
    if proc.mps == "server":
        clients = [
            p
            for p in clients
            if (proc.uid is None or p.uid is None or p.uid == proc.uid)
            and (not proc.gpus or not p.gpus or set(p.gpus) & set(proc.gpus))
        ]
    return tuple(sorted(p.pid for p in clients))


def mps_warning(pid: int, mps: str | None, clients: tuple[int, ...]) -> PlanWarning | None:
    """The warning for a plan that stops an MPS server or control daemon, naming its clients."""
    if mps not in ("server", "control"):
        return None
    what = "the MPS server" if mps == "server" else "the MPS control daemon"
    if clients:
        shown = ", ".join(map(str, clients[:12])) + (
            f" and {len(clients) - 12} more" if len(clients) > 12 else ""
        )
        whose = f"all its clients: {count(len(clients), 'process', 'processes')} ({shown})"
    else:
        whose = "all its clients (none is listed now)"
    if mps == "control":
        whose += " and the MPS servers it started"
    return PlanWarning("mps-server", f"{pid} is {what}: stopping it ends {whose}", pid)


def mps_words(proc: Proc, clients: tuple[int, ...]) -> str:
    """Why an MPS server or daemon that is a protected monitor is left alone: what stopping it ends."""
    what = "MPS server" if proc.mps == "server" else "MPS control daemon"
    return f"{what}: protected (stopping it ends its {count(len(clients), 'client', 'clients')})"

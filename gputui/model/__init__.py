"""Typed records of what crosses the wire (docs/PROTOCOL.md), as the app sees them.

The probe speaks plain dicts (it must run on Python 3.8 with nothing installed); the app turns each
record into these frozen dataclasses once, at the edge, so the fleet, the kill flow and the UI never
index dicts. A probe is not trusted: every field is checked on its own (gputui.model.decode), so one
bad field costs that field, never the record or the host. Every string is made printable here
(control and invisible reordering characters escaped: gputui.model.textsafe), so no output path can pass a
host's escape sequence to the operator's terminal; the raw records are kept apart only for JSON
output, which escapes them itself.

The package, from the bottom up (the `layers` contract in pyproject.toml keeps this order):
  decode.py    one field at a time: the checks every record shares, and the records' plain fields
               read by their declared types
  host.py      the hello's facts about a host (and the error codes that mean it has no GPU), its load
  gpus.py      a GPU: memory, utilization, its memory account, preflight state, MIG instances
  process.py   what every record of a process says of it: name, command, owner, state, parent
  jobs.py      the work a set of GPU processes belongs to, named by its root
  samples.py   the processes, their parents, and the sample that holds them all
  detail.py    one process in full: the answer to a `detail` request
  events.py    a running plan's events and the verdict its `done` event carries
Callers import the records from here, the package's face. The face loads a module when one of its
names is first asked for (PEP 562): a command that needs only the escaping (`textsafe`) or one
field check does not pay for every record's module at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..probe.classify import KINDS
    from ..probe.common import IDLE_SLACK, brief_command
    from .detail import Ancestor, DeviceFd, EnvVar, ProcDetail
    from .events import (
        NOT_SENT,
        OUTCOME_UNKNOWN,
        DoneResult,
        Event,
        GpuVerdict,
        PlanVerdict,
        ProcessVerdict,
        Restart,
        WireScope,
        done_event,
    )
    from .gpus import Gpu, MemoryAccount, MigInstance, MigPlace, Preflight
    from .host import HOST_STATUSES, NO_GPU_CODES, HostFacts, HostMetrics
    from .jobs import Job
    from .process import ProcessFacts, brief_process
    from .samples import GpuShare, Parent, Proc, ProcUtilState, Sample

_HOME = {
    "Ancestor": ".detail",
    "brief_command": "..probe.common",
    "brief_process": ".process",
    "DeviceFd": ".detail",
    "done_event": ".events",
    "DoneResult": ".events",
    "EnvVar": ".detail",
    "Event": ".events",
    "Gpu": ".gpus",
    "GpuShare": ".samples",
    "GpuVerdict": ".events",
    "HOST_STATUSES": ".host",
    "HostFacts": ".host",
    "HostMetrics": ".host",
    "IDLE_SLACK": "..probe.common",
    "Job": ".jobs",
    "KINDS": "..probe.classify",
    "MemoryAccount": ".gpus",
    "MigInstance": ".gpus",
    "MigPlace": ".gpus",
    "NO_GPU_CODES": ".host",
    "NOT_SENT": ".events",
    "OUTCOME_UNKNOWN": ".events",
    "Parent": ".samples",
    "PlanVerdict": ".events",
    "Preflight": ".gpus",
    "Proc": ".samples",
    "ProcDetail": ".detail",
    "ProcessFacts": ".process",
    "ProcessVerdict": ".events",
    "ProcUtilState": ".samples",
    "Restart": ".events",
    "Sample": ".samples",
    "WireScope": ".events",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value  # asked once: a plain attribute from then on
    return value


__all__ = [
    "HOST_STATUSES",
    "IDLE_SLACK",
    "KINDS",
    "NOT_SENT",
    "NO_GPU_CODES",
    "OUTCOME_UNKNOWN",
    "Ancestor",
    "DeviceFd",
    "DoneResult",
    "EnvVar",
    "Event",
    "Gpu",
    "GpuShare",
    "GpuVerdict",
    "HostFacts",
    "HostMetrics",
    "Job",
    "MemoryAccount",
    "MigInstance",
    "MigPlace",
    "Parent",
    "PlanVerdict",
    "Preflight",
    "Proc",
    "ProcDetail",
    "ProcUtilState",
    "ProcessFacts",
    "ProcessVerdict",
    "Restart",
    "Sample",
    "WireScope",
    "brief_command",
    "brief_process",
    "done_event",
]

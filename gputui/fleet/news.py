"""News: whether a host's sample says anything the fleet's views draw that its last one did not.

At a thousand hosts the dashboard's redraw was mostly hosts whose new sample changed nothing it
shows: a probe's sample moves its number, its time and its own costs every second, the host's
uptime and load, each process's age, CPU and RSS; the fleet table, the host list, the problems and
the per-user view show none of those. A sample with no news still feeds the GPU's history and the
idle tracker (gputui/fleet/session.py `HostView.record`); the screens redraw the host only when it has
news, or when it is the host they show in full (its own screen, or the process pane's host:
the figures above are shown there, and its sparklines move every sample).

What is not news, and only that (everything else compared as the model holds it):
- the sample's `seq`, `time`, `scan_age`, the per-process reading's age (the app keeps no `cost_ms`);
- the host's `uptime` and load averages (its CPU and RAM are in the fleet table: news);
- a process's `elapsed`, `cpu_percent` and `rss`;
- a GPU's preflight reading, when it is none (samples carry one only now and then: the host keeps
  its last) or the same as the one the host keeps.
Pure: no clock, no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from ..model import Gpu, HostMetrics, Preflight, Proc, Sample

__all__ = ["has_news"]


def _fields_but(cls: Any, *left_out: str) -> Any:
    """An attrgetter of every field of dataclass `cls` but `left_out` (a tuple of their values)."""
    names = [f.name for f in dataclasses.fields(cls)]
    missing = set(left_out) - set(names)
    if missing:  # a field renamed in the model: this table must follow (tests/fleet/test_news.py)
        raise AttributeError(f"{cls.__name__} has no field {sorted(missing)}")
    return attrgetter(*(n for n in names if n not in left_out))


_SAMPLE = _fields_but(Sample, "seq", "time", "scan_age", "host", "proc_util", "gpus", "processes")
_HOST = _fields_but(HostMetrics, "uptime", "load1", "load5", "load15")
_GPU = _fields_but(Gpu, "preflight")
_PROC = _fields_but(Proc, "elapsed", "cpu_percent", "rss")


def has_news(last: Sample | None, new: Sample, preflight: Mapping[int, Preflight]) -> bool:
    """Whether `new` says something the fleet's views draw that `last` (the host's sample before
    it) did not. `preflight`: the host's latest reading of each GPU, as it was before `new`."""
    if last is None:
        return True
    if new.gpus is not last.gpus:
        if len(new.gpus) != len(last.gpus):
            return True
        for a, b in zip(last.gpus, new.gpus, strict=True):
            if a is b:
                continue
            if _GPU(a) != _GPU(b):
                return True
            if b.preflight is not None and b.preflight != preflight.get(b.index):
                return True
    if new.processes is not last.processes:
        if len(new.processes) != len(last.processes):
            return True
        for p, q in zip(last.processes, new.processes, strict=True):
            if p is not q and _PROC(p) != _PROC(q):
                return True
    if new.host is not last.host and (
        new.host is None or last.host is None or _HOST(new.host) != _HOST(last.host)
    ):
        return True
    a_util, b_util = last.proc_util, new.proc_util
    if a_util is not b_util and (a_util.state, a_util.every) != (b_util.state, b_util.every):
        return True
    return bool(_SAMPLE(last) != _SAMPLE(new))

"""Idle holders: processes that keep GPU memory while they run nothing on it.

A notebook kernel left open, a server nobody calls, a job stopped with SIGSTOP: each keeps its
memory, and the GPU looks busy in every memory column while it does nothing. Schedulers' trackers
ask for it (slurm-job-exporter#65, jobstats#28). One sample cannot say it: "0 % SM for 10 minutes"
is history, so it is tracked here, on the app's side, from the samples the fleet already receives
(the probe sends what one reading says and keeps no history; docs/FLEET_VIEW.md).

What one sample says of a process that NVML lists with memory (kind `user`), per GPU it holds
memory on (`sm_evidence`):
- its own SM utilization where the driver gives per-process figures (`gpu_util`, read every few
  seconds: docs/PROTOCOL.md "Per-process utilization");
- where figures were read for that GPU but none for this process, 0: the driver lists only the
  processes that ran in its window (NVML_ERROR_NOT_FOUND, no sample of it), unless the process is
  younger than the figures (it started after the reading: unknown, not idle);
- else the GPU's own utilization: a holder of a GPU at 0 % is idle; at more it may be what runs.
A process is idle in a sample when every GPU it holds memory on says 0, busy when one says more,
unknown otherwise (a GPU in MIG mode gives no utilization). A streak of idle samples starts at the
first one and ends at the first sample that is not idle (busy, unknown, or the process gone), and
when the host's samples stop for longer than `max_gap` (what happened in between is not known).
Times are the samples' own (the probe's clock), so a replay at any speed and a host whose clock is
off both read right; durations are measured to the host's latest sample.

Pure and typed: feed `observe` samples, ask `since`, `seconds`, `durations` or `holders`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..model import Gpu, Proc, Sample

MAX_GAP = 300.0  # seconds without a sample after which every streak starts again
GAP_INTERVALS = 3.0  # ... or this many sample intervals, when the host samples more slowly

ProcKey = tuple[int, int | None]


def holds_memory(proc: Proc) -> bool:
    """A live process NVML lists with GPU memory (a figure over 0, or none given): what an idle
    holder keeps. Ghosts, hidden holders, monitors and zombies are flagged as what they are."""
    if proc.kind != "user" or proc.state == "Z" or not proc.gpu_memory:
        return False
    return any(size is None or size > 0 for size in proc.gpu_memory.values())


def _figured(sample: Sample) -> frozenset[int]:
    """The GPUs the latest per-process reading gave figures for (for any process)."""
    if sample.proc_util.state != "on" or sample.proc_util.age is None:
        return frozenset()
    return frozenset(i for p in sample.processes if p.gpu_util for i in p.gpu_util)


def sm_evidence(sample: Sample, proc: Proc, index: int, figured: frozenset[int] | None = None) -> int | None:
    """What `sample` says of `proc`'s SM utilization on GPU `index`, in percent (0: idle there);
    None when it says nothing. `figured`: `_figured(sample)`, computed once per sample by a caller
    that asks for many processes."""
    figured = _figured(sample) if figured is None else figured
    return _evidence(proc, sample.gpu(index), index, figured, sample.proc_util.age)


def _evidence(
    proc: Proc, gpu: Gpu | None, index: int, figured: frozenset[int], age: float | None
) -> int | None:
    """`sm_evidence`'s rules, on what a caller has already looked up: `gpu` (the sample's GPU
    `index`), `figured` and `age` (the per-process reading's GPUs and age)."""
    if gpu is None or gpu.error:
        return None
    share = proc.gpu_util.get(index) if proc.gpu_util is not None else None
    if share is not None and share.sm is not None:
        return share.sm
    if index in figured and age is not None and (proc.elapsed is None or proc.elapsed > age):
        return 0  # read for this GPU, nothing of this process in the driver's window
    return gpu.util_gpu


def idle_now(sample: Sample, proc: Proc, figured: frozenset[int] | None = None) -> bool | None:
    """True: `proc` holds GPU memory and runs nothing on any of those GPUs in `sample`; False: it
    holds memory and something runs; None: it holds none, or the sample cannot say."""
    if not holds_memory(proc):
        return None
    figured = _figured(sample) if figured is None else figured
    evidence = [sm_evidence(sample, proc, index, figured) for index in proc.gpu_memory]
    if any(e is not None and e > 0 for e in evidence):
        return False
    if not evidence or any(e is None for e in evidence):
        return None
    return True


def _same_to_idle(before: tuple[Proc, ...], now: tuple[Proc, ...], age: float | None) -> bool:
    """Whether processes `now` say to the idle rules what `before` said, with the sample's GPUs and
    per-process reading (of `age`) the same objects: the same processes in the same order, each the
    same object or one that differs only in what the rules do not read (its CPU, RSS, and its age
    unless the age crossed the reading's: `_evidence`). A young process's age moves every sample
    (gputui/probe/delta.py), and that alone made every such sample worked out again."""
    if len(before) != len(now):
        return False
    for p, q in zip(before, now, strict=True):
        if p is q:
            continue
        if (
            p.pid != q.pid
            or p.start_time != q.start_time
            or p.kind != q.kind
            or p.state != q.state
            or (p.gpu_memory is not q.gpu_memory and p.gpu_memory != q.gpu_memory)
            or (p.gpu_util is not q.gpu_util and p.gpu_util != q.gpu_util)
        ):
            return False
        if (
            p.elapsed != q.elapsed
            and age is not None
            and (p.elapsed is None or p.elapsed > age) != (q.elapsed is None or q.elapsed > age)
        ):
            return False
    return True


def idle_keys(sample: Sample) -> list[ProcKey]:
    """The keys of the processes `idle_now` says are idle in `sample`, in one pass: what a fleet's
    every sample costs, so the sample's GPUs are looked up by index once, and its
    per-process reading worked out once (tests/fleet/test_idle.py holds it to `idle_now`)."""
    out: list[ProcKey] = []
    gpus: dict[int, Gpu] | None = None
    figured: frozenset[int] = frozenset()
    age = sample.proc_util.age
    for proc in sample.processes:
        if not holds_memory(proc):
            continue  # most processes (monitors, hidden holders, ghosts): nothing to work out
        if gpus is None:
            gpus = {}
            for each in sample.gpus:
                gpus.setdefault(each.index, each)  # (the first of an index, as Sample.gpu finds it)
            figured = _figured(sample)
        for index in proc.gpu_memory:  # idle: every GPU it holds memory on says 0 (busy or unknown: not)
            evidence = _evidence(proc, gpus.get(index), index, figured, age)
            if evidence is None or evidence > 0:
                break
        else:
            out.append(proc.key)
    return out


@dataclass(frozen=True, slots=True)
class IdleHolder:
    """A process idle for at least the threshold, as of its host's latest sample."""

    host: str
    proc: Proc
    since: float  # the sample time (probe's clock) of the first idle sample of its streak
    seconds: float  # idle so far: from `since` to the host's latest sample

    @property
    def memory(self) -> int:
        """Bytes it holds (figures NVML gives; none given counts 0)."""
        return self.proc.gpu_bytes


class HostIdle:
    """The idle streaks of one host's processes, by (pid, start time): a reused PID starts afresh."""

    __slots__ = ("_read", "_since", "last", "max_gap")

    def __init__(self, max_gap: float = MAX_GAP) -> None:
        self.max_gap = max_gap
        self.last: float | None = None  # the time of the latest sample observed
        self._since: dict[ProcKey, float] = {}
        # What the streaks were last worked out from: a sample's processes, GPUs and per-process
        # reading. Samples hold unchanged records as the same objects (gputui/fleet/deltas.py), so a
        # sample that brings the same three says the same of every process: its streaks go on.
        self._read: tuple[tuple[Proc, ...], object, object] | None = None

    def observe(self, sample: Sample, now: float | None = None, interval: float | None = None) -> None:
        """Take one sample, at `now` (default: the sample's own time, else the clock). `interval`:
        the host's sample interval, when known: a host sampled every 10 minutes is not in a gap
        between two of its samples."""
        t = now if now is not None else (sample.time if sample.time > 0 else time.time())
        gap = max(self.max_gap, GAP_INTERVALS * interval) if interval else self.max_gap
        broke = self.last is not None and not 0 <= t - self.last <= gap
        read = (sample.processes, sample.gpus, sample.proc_util)
        last_read = self._read
        if (
            not broke
            and last_read is not None
            and read[1] is last_read[1]
            and read[2] is last_read[2]
            and (read[0] is last_read[0] or _same_to_idle(last_read[0], read[0], sample.proc_util.age))
        ):
            # The same processes idle, since the same times (most samples of a fleet).
            self._read, self.last = read, t
            return
        self._read = read
        # Samples that stopped (or a clock that went back): nothing is known in between.
        before = {} if broke else self._since
        self._since = {key: before.get(key, t) for key in idle_keys(sample)}
        self.last = t

    def any_for(self, at_least: float) -> bool:
        """Whether a process has been idle for `at_least` seconds or more (as of the latest sample)."""
        last = self.last
        return last is not None and any(last - since >= at_least for since in self._since.values())

    def since(self, key: ProcKey) -> float | None:
        """When `key`'s idle streak began (sample time), or None: not idle in the latest sample."""
        return self._since.get(key)

    def seconds(self, key: ProcKey) -> float | None:
        """How long `key` has been idle, as of the latest sample; None: not idle."""
        since = self._since.get(key)
        return None if since is None or self.last is None else self.last - since

    def durations(self, at_least: float = 0.0) -> dict[ProcKey, float]:
        """Seconds idle of every process idle for `at_least` seconds or more."""
        last = self.last
        if last is None:
            return {}
        return {key: last - since for key, since in self._since.items() if last - since >= at_least}

    def holders(self, host: str, sample: Sample | None, at_least: float) -> list[IdleHolder]:
        """The idle holders of `sample` (the host's latest), longest idle first."""
        if sample is None or self.last is None:
            return []
        found = [
            IdleHolder(host, p, since, self.last - since)
            for p in sample.processes
            if (since := self._since.get(p.key)) is not None and self.last - since >= at_least
        ]
        return sorted(found, key=lambda h: (-h.seconds, h.proc.pid))

    def copy(self) -> HostIdle:
        """The streaks as they are now (a paused screen keeps them as they were)."""
        out = HostIdle(self.max_gap)
        out.last, out._since, out._read = self.last, dict(self._since), self._read
        return out

    def __len__(self) -> int:
        return len(self._since)


class IdleTracker:
    """Every host's streaks: `observe(host, sample)`, then ask who is idle and since when."""

    def __init__(self, max_gap: float = MAX_GAP) -> None:
        self.max_gap = max_gap
        self.hosts: dict[str, HostIdle] = {}

    def host(self, name: str) -> HostIdle:
        idle = self.hosts.get(name)
        if idle is None:
            idle = self.hosts[name] = HostIdle(self.max_gap)
        return idle

    def observe(self, host: str, sample: Sample, now: float | None = None) -> None:
        self.host(host).observe(sample, now)

    def since(self, host: str, key: ProcKey) -> float | None:
        idle = self.hosts.get(host)
        return idle.since(key) if idle is not None else None

    def holders(self, samples: Mapping[str, Sample | None], at_least: float) -> list[IdleHolder]:
        """The idle holders of every host in `samples` (host -> its latest sample), longest first."""
        found = [
            h
            for name, s in samples.items()
            if name in self.hosts
            for h in self.hosts[name].holders(name, s, at_least)
        ]
        return sorted(found, key=lambda h: (-h.seconds, h.host, h.proc.pid))


def idle_words(seconds: float) -> str:
    """`idle 12m`, `idle 2h05m`: how long, for a table cell (whole minutes; seconds under one)."""
    return "idle " + span(seconds)


def span(seconds: float) -> str:
    """12s, 12m, 2h05m, 3d04h: the two largest units, never a fraction."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    minutes = s // 60
    if minutes < 60:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 24:
        return f"{hours}h{minutes % 60:02d}m"
    return f"{hours // 24}d{hours % 24:02d}h"


def holder_keys(holders: Iterable[IdleHolder]) -> dict[str, set[ProcKey]]:
    """host -> the keys of its idle holders."""
    out: dict[str, set[ProcKey]] = {}
    for h in holders:
        out.setdefault(h.host, set()).add(h.proc.key)
    return out

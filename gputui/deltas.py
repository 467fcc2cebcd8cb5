"""A host's samples as the app takes them: whole ones and deltas, parsed only where they changed.

A probe that was asked for them (docs/PROTOCOL.md "Delta samples") sends each sample as a delta of
the one before: `gputui.probe.delta.apply` merges it into the last sample held, giving the record
the probe would have sent whole. Parsing that record (gputui/model.py: every field of every GPU
and process checked) is most of what a sample costs the app, and most of it says again what the
last one said. So what did not change keeps what was parsed of it the last time:
- a GPU or process record that did not change keeps its object;
- one whose fields changed is the last object with those fields parsed again: each field of `Gpu`
  and `Proc` is made from the record's field of that name alone (a process's `elapsed` alone, the
  common change in a whole sample, written out in `_aged`);
- the sample's own fields are the last sample's, where the record's did not change (ALONE).
The same reuse serves whole samples (an older probe, or the whole sample every so often): a field
equal to the last one's is not parsed again.

What comes out is what `Sample.from_wire` makes of the merged record (tests/test_deltas.py holds
both to it, field by field). A delta that cannot be merged (for another sample than the one held,
or malformed) is refused whole with `DeltaError`, like any bad record: the host keeps its last
sample until the probe sends one whole again (the fleet asks for it).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, TypeVar

from .model import Gpu, Proc, Sample
from .probe.delta import DeltaError, apply, gpu_key, process_key
from .probe.wire import MAX_PROCESSES

__all__ = ["ALONE", "DELTAS_EVERY", "DeltaError", "SampleIntake"]

DELTAS_EVERY = 30  # what the app asks of a probe that can: a whole sample in every 30 (30 s at 1 Hz)
MAX_GPUS = 4096  # as gputui.model: more GPU records than this are parsed the slow way (and cut)

# The sample's fields that each of these record fields alone makes (Sample.from_wire): a sample
# that differs from the last only in them is the last with those fields parsed again. Any other
# field changed, and the sample's own fields are all parsed again.
ALONE = {
    "seq": ("seq",),
    "time": ("time",),
    "cost_ms": ("cost_ms",),
    "host": ("host",),
    "proc_util": ("proc_util",),
    "parents": ("parents",),
    "scan": ("scan_age", "scan_unreadable", "full_scan"),
}
_LISTS = ("gpus", "processes")
_GPU_FIELDS = frozenset(f.name for f in dataclasses.fields(Gpu))
_PROC_FIELDS = frozenset(f.name for f in dataclasses.fields(Proc))
_ELAPSED = frozenset({"elapsed"})
_GPU_KEY = frozenset({"index"})  # a record's key names it: never a change of the same GPU or process
_PROC_KEY = frozenset({"pid", "start_time"})
_MISSING = object()

T = TypeVar("T")


def _elapsed(value: Any) -> float | None:
    """`elapsed` as Proc.from_wire takes it: a finite number >= 0, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and number >= 0.0 else None


def _copier(cls: type[T]) -> Any:
    """`copied(obj, changes)`: frozen dataclass `obj` with the fields in `changes` replaced, as
    `dataclasses.replace` would make it but without its __init__: written out field by field through
    the slots' own descriptors (what the frozen class's __init__ sets them with), it costs a quarter
    of `replace`."""
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    scope: dict[str, Any] = {"new": object.__new__, "cls": cls}
    lines = ["def copied(obj, changes):", "    copy = new(cls)"]
    for name in names:
        scope[f"set_{name}"] = getattr(cls, name).__set__
        lines.append(f"    set_{name}(copy, obj.{name})")
    scope["setters"] = {name: scope[f"set_{name}"] for name in names}
    lines += [
        "    for name, value in changes.items():",
        "        setters[name](copy, value)",
        "    return copy",
    ]
    exec("\n".join(lines), scope)  # code made here, from the dataclass's own field names
    return scope["copied"]


_copy_gpu = _copier(Gpu)
_copy_proc = _copier(Proc)


def _aged(proc: Proc, elapsed: Any) -> Proc:
    """`proc` as a record that differs from its own only in `elapsed` makes it."""
    return _copy_proc(proc, {"elapsed": _elapsed(elapsed)})


def _differ(before: dict[str, Any], record: dict[str, Any]) -> set[str]:
    """The fields in which two records differ (one that only one has counts)."""
    out = {k for k, v in record.items() if k not in before or before[k] != v}
    out.update(k for k in before if k not in record)
    return out


def _reparsed(obj: T, record: dict[str, Any], fields: set[str], kind: str) -> T | None:
    """`obj` (parsed from an earlier record of the same GPU or process) with `fields` parsed again
    from `record`: each field of Gpu and Proc is made from the record's field of that name alone
    (tests/test_deltas.py holds them to it); a record field that is none of the class's own changes
    nothing. None when the stub does not parse (it has the record's own key, so it does)."""
    gpu = kind == "gpu"
    mine = fields & (_GPU_FIELDS if gpu else _PROC_FIELDS)
    stub = {k: record.get(k) for k in mine}
    if gpu:
        stub["index"] = record.get("index")
        made: Any = Gpu.from_wire(stub)
    else:
        stub["pid"] = record.get("pid")
        made = Proc.from_wire(stub)
    if made is None:
        return None
    copy = _copy_gpu if gpu else _copy_proc
    return copy(obj, {name: getattr(made, name) for name in mine})


class SampleIntake:
    """One link's samples, as the app holds them: the last record (merged) and what was parsed of
    it, by GPU index and by process (pid, start time)."""

    def __init__(self) -> None:
        self.raw: dict[str, Any] | None = None  # the last sample, whole (deltas merged in)
        self.sample: Sample | None = None
        self.keyed = False  # its GPUs and processes have keys of their own: a delta can follow it
        self.deltas = 0  # deltas taken (for tests and the bench)
        self._gpus: dict[int, tuple[dict[str, Any], Gpu]] = {}
        self._procs: dict[tuple[int, int | None], tuple[dict[str, Any], Proc | None]] = {}

    def take(self, record: dict[str, Any]) -> Sample:
        """The sample `record` makes (a whole one, or a delta merged into the last); DeltaError for a
        delta that cannot be merged (nothing held changes then)."""
        changes: tuple[dict[Any, Any], dict[Any, Any]] | None = None
        if "delta" in record:
            if self.raw is None or not self.keyed:
                raise DeltaError("a delta, but no whole sample to merge it into yet")
            merged = apply(self.raw, record)
            changes = (_changes(record.get("gpus"), gpu_key), _changes(record.get("processes"), process_key))
            self.deltas += 1
        else:
            merged = record
        sample = self._parse(merged, changes)
        self.raw, self.sample = merged, sample
        return sample

    def _parse(self, merged: dict[str, Any], changes: tuple[dict[Any, Any], dict[Any, Any]] | None) -> Sample:
        gpus_raw, procs_raw = merged.get("gpus"), merged.get("processes")
        before, last = self.raw, self.sample
        # A list the merge left as it was (nothing in it changed) keeps what was parsed of it.
        held = before is not None and last is not None and self.keyed
        same_gpus = held and gpus_raw is before.get("gpus")  # type: ignore[union-attr]
        same_procs = held and procs_raw is before.get("processes")  # type: ignore[union-attr]
        gpus = None if same_gpus else self._gpus_of(gpus_raw, changes[0] if changes is not None else None)
        procs = None if same_procs else self._procs_of(procs_raw, changes[1] if changes is not None else None)
        if (gpus is None and not same_gpus) or (procs is None and not same_procs):
            # Records without keys of their own (or too many): parsed the one general way, and no
            # delta can follow this sample (the probe never sends such; a hostile one may).
            self.keyed = False
            self._gpus, self._procs = {}, {}
            return Sample.from_wire(merged)
        self.keyed = True
        parsed_gpus = last.gpus if same_gpus and last is not None else tuple(g for _, g in gpus or ())
        parsed_procs = (
            last.processes
            if same_procs and last is not None
            else tuple(p for _, p in procs or () if p is not None)
        )
        fields = self._alone(merged)
        if fields is not None and last is not None:
            return dataclasses.replace(last, gpus=parsed_gpus, processes=parsed_procs, **fields)
        rest = Sample.from_wire({k: v for k, v in merged.items() if k not in _LISTS})
        return dataclasses.replace(rest, gpus=parsed_gpus, processes=parsed_procs)

    def _alone(self, merged: dict[str, Any]) -> dict[str, Any] | None:
        """The sample's fields made again, when the record differs from the last one (held) only
        in fields of ALONE; None when another field changed."""
        before = self.raw
        if before is None or len(before) != len(merged):
            return None
        stub: dict[str, Any] = {}
        for key, value in merged.items():
            if key in _LISTS:
                continue
            old = before.get(key, _MISSING)
            if old is value or (type(old) is type(value) and old == value):  # (1 == True == 1.0)
                continue
            if key not in ALONE:
                return None
            stub[key] = value
        if not stub:
            return {}
        made = Sample.from_wire(stub)
        return {name: getattr(made, name) for key in stub for name in ALONE[key]}

    def _gpus_of(
        self, records: Any, changes: dict[Any, Any] | None
    ) -> list[tuple[dict[str, Any], Gpu]] | None:
        if records is None:
            records = []
        if not isinstance(records, list) or len(records) > MAX_GPUS:
            return None
        known, parsed = self._gpus, {}
        out = []
        for record in records:
            key = gpu_key(record)
            if key is None or key in parsed:
                return None
            before = known.get(key)
            gpu: Gpu | None
            if before is None:
                gpu = Gpu.from_wire(record)
            elif before[0] is record:
                gpu = before[1]
            else:
                change = changes.get(key) if changes is not None else None
                fields = (set(change) if change is not None else _differ(before[0], record)) - _GPU_KEY
                gpu = _reparsed(before[1], record, fields, "gpu") if fields else before[1]
            if gpu is None:
                return None  # an index out of range: refused the general way
            parsed[key] = (record, gpu)
            out.append((record, gpu))
        self._gpus = parsed
        return out

    def _procs_of(
        self, records: Any, changes: dict[Any, Any] | None
    ) -> list[tuple[dict[str, Any], Proc | None]] | None:
        if records is None:
            records = []
        if not isinstance(records, list) or len(records) > MAX_PROCESSES:
            return None
        known, parsed = self._procs, {}
        out = []
        for record in records:
            key = process_key(record)
            if key is None or key in parsed:
                return None
            before = known.get(key)
            proc: Proc | None
            if before is None:
                proc = Proc.from_wire(record)
            elif before[0] is record or before[1] is None:
                proc = before[1]  # (a record without a usable PID stays one: the PID is its key)
            else:
                change = changes.get(key) if changes is not None else None
                # In a delta, the fields it names (a process it does not name is the same record).
                fields = (set(change) if change is not None else _differ(before[0], record)) - _PROC_KEY
                if fields <= _ELAPSED:
                    proc = _aged(before[1], record.get("elapsed")) if fields else before[1]
                else:
                    proc = _reparsed(before[1], record, fields, "proc")
            parsed[key] = (record, proc)
            out.append((record, proc))
        self._procs = parsed
        return out


def _changes(records: Any, key_of: Any) -> dict[Any, Any]:
    """A delta's records of one list, by key."""
    return {key_of(r): r for r in records} if isinstance(records, list) else {}

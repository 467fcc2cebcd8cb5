"""A host's samples as the app takes them: whole ones and deltas, parsed only where they changed.

A probe that was asked for them (docs/PROTOCOL.md "Delta samples") sends each sample as a delta of
the one before. Parsing a sample (gputui/model.py: every field of every GPU and process checked) is
most of what it costs the app, and most of it says again what the last one said. So what did not
change keeps what was parsed of it the last time:
- a GPU or process record that did not change keeps its object;
- one whose fields changed is the last object with those fields parsed again: each field of `Gpu`
  and `Proc` is made from the record's field of that name alone (a process's `elapsed` alone, the
  common change in a whole sample, written out in `_aged`; a GPU's preflight reading is most often
  its last one again);
- the sample's own fields are the last sample's, where the record's did not change (ALONE).
The same reuse serves whole samples (an older probe, or the whole sample every so often): a field
equal to the last one's is not parsed again.

What a host's last sample said is kept compact (`Held`): each GPU and process record as its JSON
text, with the fields deltas changed since, beside what was parsed of it. As decoded JSON a host's
records were some 70 KB and a thousand objects for the garbage collector to walk; as text, a
fifth of that and one object each (4,096 hosts in 600 MB). The record itself is made
again only where it is asked for (`raw`, what `snapshot --json` writes; a whole sample's changed
records).

What comes out is what `Sample.from_wire` makes of the merged record, and the merged record what
`gputui.probe.delta.apply` makes of the probe's base (tests/probe/test_deltas.py holds both, field by
field). A delta that cannot be merged (for another sample than the one held, or malformed:
`gputui.probe.delta.read`, one set of rules for both sides) is refused whole with `DeltaError`,
like any bad record: the host keeps its last sample until the probe sends one whole again (the
fleet asks for it).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from ..model import Gpu, HostMetrics, Parent, Proc, ProcUtilState, Sample
from ..model.decode import MAX_BYTES, MAX_GPUS  # more GPU records: parsed the slow way (and cut)
from ..model.gpus import GPU_WIRE
from ..model.samples import MAX_PARENTS, PROC_WIRE
from ..probe.delta import DeltaError, gpu_key, process_key, read
from ..probe.wire import MAX_PROCESSES

__all__ = ["ALONE", "DELTAS_EVERY", "DeltaError", "Held", "RawSample", "SampleIntake"]

# What the app asks of a probe that can: a whole sample in every 300 (five minutes at 1 Hz). A lost
# or refused line is found by its `seq` at the next sample, whatever this is; the whole sample is the
# floor under a bug nothing else finds, and it costs the app some 13 times a delta (at 4,096 hosts,
# one in every 60 was a tenth of the app's intake).
DELTAS_EVERY = 300


def _number(value: Any, low: float) -> float | None:
    """As gputui.model reads a float: finite, at least `low`, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and number >= low else None


def _count(value: Any) -> int | None:
    """As gputui.model reads a count: an int (not a bool) from 0 to MAX_BYTES, else None."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_BYTES:
        return None
    return value


def _scan(value: Any) -> dict[str, Any]:
    scan = value if isinstance(value, dict) else {}
    return {
        "scan_age": _number(scan.get("age"), 0.0),
        "scan_unreadable": _count(scan.get("unreadable")) or 0,
        "full_scan": scan.get("full") is True,
    }


def _parents(value: Any) -> tuple[Parent, ...]:
    records = value[:MAX_PARENTS] if isinstance(value, list) else []
    made = (Parent.from_wire(x) for x in records if isinstance(x, dict))
    return tuple(p for p in made if p is not None)


# The sample's fields that each of these record fields alone makes, as Sample.from_wire makes them
# (tests/probe/test_deltas.py holds this table to it, hostile values included): a sample that differs
# from the last only in them is the last with those fields made again, without the rest of
# from_wire. Any other field changed, and the sample's own fields are all parsed again.
ALONE: dict[str, Any] = {
    "seq": lambda v: {"seq": _count(v) or 0},
    "time": lambda v: {"time": _number(v, 0.0) or 0.0},
    "cost_ms": lambda v: {},  # the probe's own cost: kept in the raw record alone (snapshot --json)
    "host": lambda v: {"host": HostMetrics.from_wire(v)},
    "proc_util": lambda v: {"proc_util": ProcUtilState.from_wire(v)},
    "parents": lambda v: {"parents": _parents(v)},
    "scan": _scan,
}
_LISTS = ("gpus", "processes")
_GPU_READERS = dict(GPU_WIRE)  # field -> what reads it from the wire (the key's own fields apart)
_PROC_READERS = dict(PROC_WIRE)
_ELAPSED = frozenset({"elapsed"})
_GPU_KEY = frozenset({"index"})  # a record's key names it: never a change of the same GPU or process
_PROC_KEY = frozenset({"pid", "start_time"})
_MISSING = object()

T = TypeVar("T")


def _elapsed(value: Any) -> float | None:
    """`elapsed` as Proc.from_wire takes it: a finite number >= 0, else None."""
    return _number(value, 0.0)


def _copier(cls: type[T]) -> Callable[[T, Mapping[str, Any]], T]:
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
    copied: Callable[[T, Mapping[str, Any]], T] = scope["copied"]
    return copied


_copy_gpu = _copier(Gpu)
_copy_proc = _copier(Proc)
_copy_sample = _copier(Sample)


def _aged(proc: Proc, elapsed: Any) -> Proc:
    """`proc` as a record that differs from its own only in `elapsed` makes it."""
    return _copy_proc(proc, {"elapsed": _elapsed(elapsed)})


def _differ(before: dict[str, Any], record: dict[str, Any]) -> set[str]:
    """The fields in which two records differ (one that only one has counts)."""
    out = {k for k, v in record.items() if k not in before or before[k] != v}
    out.update(k for k in before if k not in record)
    return out


def _reparsed(obj: T, record: dict[str, Any], fields: set[str], kind: str) -> T:
    """`obj` (parsed from an earlier record of the same GPU or process) with `fields` parsed again
    from `record` (the new record, or a delta's change to it: it has those fields): each field of
    Gpu and Proc is made from the record's field of that name alone, by the reader its from_wire
    uses (tests/probe/test_deltas.py holds them to it); a record field that is none of the class's
    own (or its key) changes nothing."""
    gpu = kind == "gpu"
    readers = _GPU_READERS if gpu else _PROC_READERS
    changes = {name: readers[name](record.get(name)) for name in fields if name in readers}
    if not changes:
        return obj
    copy: Any = _copy_gpu if gpu else _copy_proc
    copied: T = copy(obj, changes)
    return copied


def _text(record: Any) -> str:
    return json.dumps(record, separators=(",", ":"))


class Held:
    """One GPU or process record as held: its JSON text (as received whole, or as it came new in a
    delta), the fields deltas changed since (None: none), and what was parsed of it (None: a
    process record without a usable PID, which Sample.from_wire leaves out too).

    Of the changed fields, a list or an object (a GPU's preflight reading) is kept as its JSON
    text, in `nested`: decoded, a reading was a dozen objects that every collection of the garbage
    collector walked, and a dict of plain values is not one it walks at all."""

    __slots__ = ("changed", "key", "nested", "parsed", "text")

    def __init__(
        self,
        key: Any,
        text: str,
        changed: dict[str, Any] | None,
        parsed: Any,
        nested: dict[str, str] | None = None,
    ) -> None:
        self.key = key
        self.text = text
        self.changed = changed  # changed fields of plain values (numbers, strings, true, null)
        self.nested = nested  # changed fields that are lists or objects, as JSON text
        self.parsed = parsed

    def record(self) -> dict[str, Any]:
        """The record, made again."""
        record: dict[str, Any] = json.loads(self.text)
        if self.changed:
            record.update(self.changed)
        if self.nested:
            for name, text in self.nested.items():
                record[name] = json.loads(text)
        return record

    def merged(self, change: dict[str, Any], parsed: Any) -> Held:
        """This record with a delta's `change` to it merged in, parsed as `parsed`."""
        nested = self.nested
        for value in change.values():
            if type(value) is dict or type(value) is list:
                break
        else:  # plain values only (a process's age, a GPU's readings): most changes, merged at once
            if not nested or nested.keys().isdisjoint(change):
                changed = {**self.changed, **change} if self.changed else dict(change)
                return Held(self.key, self.text, changed, parsed, nested)
        changed = dict(self.changed) if self.changed else {}
        nested = dict(nested) if nested else {}
        for name, value in change.items():
            if type(value) is dict or type(value) is list:
                nested[name] = _text(value)
                changed.pop(name, None)
            else:
                changed[name] = value
                nested.pop(name, None)
        return Held(self.key, self.text, changed or None, parsed, nested or None)


class RawSample(Mapping[str, Any]):
    """A sample's record as the probe would have sent it whole, made (and kept) when asked: what
    `snapshot --json` writes. An immutable snapshot: later samples do not change it."""

    __slots__ = ("_gpus", "_lists", "_procs", "_top")

    def __init__(self, top: dict[str, Any], gpus: tuple[Held, ...], procs: tuple[Held, ...]) -> None:
        self._top, self._gpus, self._procs = top, gpus, procs
        # Made when first read: one is made a sample for every host, and few are ever read.
        self._lists: dict[str, list[dict[str, Any]]] | None = None

    def __getitem__(self, key: str) -> Any:
        if key == "gpus" or key == "processes":
            lists = self._lists
            if lists is None:
                lists = self._lists = {}
            made = lists.get(key)
            if made is None:
                made = lists[key] = [h.record() for h in (self._gpus if key == "gpus" else self._procs)]
            return made
        return self._top[key]

    def __iter__(self) -> Iterator[str]:
        yield from self._top
        yield from _LISTS

    def __len__(self) -> int:
        return len(self._top) + 2

    def whole(self) -> dict[str, Any]:
        """The record as a new dict whose lists are made and not kept here (what a relay encodes
        once): kept, every host's lists would stay decoded until its next sample."""
        lists = self._lists or {}
        out = dict(self._top)
        for key, held in (("gpus", self._gpus), ("processes", self._procs)):
            made = lists.get(key)
            out[key] = made if made is not None else [h.record() for h in held]
        return out


class SampleIntake:
    """One link's samples, as the app holds them (the last one's records, compact: Held) and what
    was parsed of them."""

    def __init__(self) -> None:
        self.top: dict[str, Any] | None = None  # the last sample's own fields (its lists apart)
        self.gpus: tuple[Held, ...] = ()
        self.processes: tuple[Held, ...] = ()
        self.plain: dict[str, Any] | None = None  # the last sample, when its records have no keys
        self.sample: Sample | None = None
        self.deltas = 0  # deltas taken (for tests and the bench)
        self._readings: dict[int, tuple[str, Any]] = {}  # each GPU's last preflight, as text and parsed
        # For the GPUs (True) and the processes (False): a held tuple and where each record is in it.
        self._at: dict[bool, tuple[tuple[Held, ...], dict[Any, int]]] = {}

    @property
    def keyed(self) -> bool:
        """Whether a delta can follow the last sample (its records have keys of their own)."""
        return self.top is not None

    @property
    def raw(self) -> Mapping[str, Any] | None:
        """The last sample's record, whole (deltas merged in)."""
        if self.top is None:
            return self.plain
        return RawSample(self.top, self.gpus, self.processes)

    def take(self, record: dict[str, Any]) -> Sample:
        """The sample `record` makes (a whole one, or a delta merged into the last); DeltaError for a
        delta that cannot be merged (nothing held changes then)."""
        if "delta" in record:
            top = self.top
            if top is None:
                raise DeltaError("a delta, but no whole sample to merge it into yet")
            fields, gpu_changes, proc_changes, gone_gpus, gone_procs = read(record, top.get("seq"))
            new_top = dict(top)
            new_top.update(fields)
            gpus = self._merge(self.gpus, gpu_changes, gone_gpus, "gpu")
            procs = self._merge(self.processes, proc_changes, gone_procs, "proc")
            self.deltas += 1
            if gpus is None or procs is None:  # beyond what a sample may hold: the general way
                return self._general(
                    self._merged_plain(new_top, gpu_changes, proc_changes, gone_gpus, gone_procs)
                )
        else:
            new_top = {k: v for k, v in record.items() if k not in _LISTS}
            gpus = self._whole(record.get("gpus"), "gpu")
            procs = self._whole(record.get("processes"), "proc")
            if gpus is None or procs is None:
                return self._general(record)
        return self._hold(new_top, gpus, procs)

    def _hold(self, top: dict[str, Any], gpus: tuple[Held, ...], procs: tuple[Held, ...]) -> Sample:
        last = self.sample if self.top is not None else None
        parsed_gpus = last.gpus if last is not None and gpus is self.gpus else tuple(h.parsed for h in gpus)
        if last is not None and procs is self.processes:
            parsed_procs = last.processes
        else:
            parsed_procs = tuple(h.parsed for h in procs if h.parsed is not None)
        fields = self._alone(top) if last is not None else None
        if fields is not None and last is not None:
            fields["gpus"], fields["processes"] = parsed_gpus, parsed_procs
            sample = _copy_sample(last, fields)
        else:
            sample = dataclasses.replace(Sample.from_wire(top), gpus=parsed_gpus, processes=parsed_procs)
        self.top, self.gpus, self.processes, self.plain, self.sample = top, gpus, procs, None, sample
        return sample

    def _general(self, record: dict[str, Any]) -> Sample:
        """A sample whose records have no keys of their own (or too many): parsed the one general
        way, and no delta can follow it (the probe never sends such; a hostile one may)."""
        sample = Sample.from_wire(record)
        self.top, self.gpus, self.processes, self.plain, self.sample = None, (), (), record, sample
        return sample

    def _merged_plain(
        self,
        top: dict[str, Any],
        gpu_changes: dict[Any, Any],
        proc_changes: dict[Any, Any],
        gone_gpus: set[Any],
        gone_procs: set[Any],
    ) -> dict[str, Any]:
        """A delta merged into the held records, as one plain record (the general way)."""
        merged = dict(top)
        for name, held, changes, gone in (
            ("gpus", self.gpus, gpu_changes, gone_gpus),
            ("processes", self.processes, proc_changes, gone_procs),
        ):
            records = []
            for h in held:
                if h.key in gone:
                    continue
                change = changes.get(h.key)
                records.append(h.record() if change is None else dict(h.record(), **change))
            records += [c for k, c in changes.items() if k not in {h.key for h in held}]
            merged[name] = records
        return merged

    def _alone(self, top: dict[str, Any]) -> dict[str, Any] | None:
        """The sample's fields made again, when its own fields differ from the last sample's only in
        fields of ALONE; None when another changed."""
        before = self.top
        if before is None or len(before) != len(top):
            return None
        fields: dict[str, Any] = {}
        for key, value in top.items():
            old = before.get(key, _MISSING)
            if old is value or (type(old) is type(value) and old == value):  # (1 == True == 1.0)
                continue
            make = ALONE.get(key)
            if make is None:
                return None
            fields.update(make(value))
        return fields

    def _merge(
        self, held: tuple[Held, ...], changes: dict[Any, Any], gone: set[Any], kind: str
    ) -> tuple[Held, ...] | None:
        """The held records of one list after a delta (as apply() merges them: in their order, the
        new ones at the end); the same tuple when nothing in it changed; None past the bounds."""
        if not changes and not gone:
            return held
        gpu = kind == "gpu"
        at = self._positions(held, gpu)
        if not gone and all(key in at for key in changes):
            # The common delta: a few records changed, none came or went. Each keeps its place.
            out = list(held)
            for key, change in changes.items():
                i = at[key]
                out[i] = self._changed(out[i], change, gpu)
            merged = tuple(out)
            self._at[gpu] = (merged, at)
            return merged
        fresh: list[Held] = []
        parsed: Any
        for h in held:
            if h.key in gone:
                continue
            change = changes.get(h.key)
            fresh.append(h if change is None else self._changed(h, change, gpu))
        for key, change in changes.items():
            if key not in at:  # new since the last sample: the whole record
                parsed = Gpu.from_wire(change) if gpu else Proc.from_wire(change)
                if gpu and parsed is None:
                    return None
                fresh.append(Held(key, _text(change), None, parsed))
                if gpu:
                    self._remember(key, change, parsed)
        if len(fresh) > (MAX_GPUS if gpu else MAX_PROCESSES):
            return None
        return tuple(fresh)

    def _positions(self, held: tuple[Held, ...], gpu: bool) -> dict[Any, int]:
        """Where each record of `held` is, by key (kept while the list keeps its records' places)."""
        cached = self._at.get(gpu)
        if cached is not None and cached[0] is held:
            return cached[1]
        at = {h.key: i for i, h in enumerate(held)}
        self._at[gpu] = (held, at)
        return at

    def _changed(self, h: Held, change: dict[str, Any], gpu: bool) -> Held:
        """Held record `h` with a delta's `change` to it merged in."""
        fields = change.keys() - (_GPU_KEY if gpu else _PROC_KEY)
        parsed: Any
        if gpu:
            parsed = self._gpu_again(h.key, h.parsed, change, fields)
        elif h.parsed is None or fields <= _ELAPSED:
            parsed = _aged(h.parsed, change.get("elapsed")) if h.parsed is not None and fields else h.parsed
        else:
            parsed = _reparsed(h.parsed, change, fields, "proc")
        return h.merged(change, parsed)

    def _whole(self, records: Any, kind: str) -> tuple[Held, ...] | None:
        """A whole sample's records of one list, held; None when one has no key of its own (or there
        are too many, or a GPU's index is out of range)."""
        if records is None:
            records = []
        gpu = kind == "gpu"
        if not isinstance(records, list) or len(records) > (MAX_GPUS if gpu else MAX_PROCESSES):
            return None
        key_of, key_field = (gpu_key, _GPU_KEY) if gpu else (process_key, _PROC_KEY)
        before = {h.key: h for h in (self.gpus if gpu else self.processes)} if self.top is not None else {}
        out: list[Held] = []
        seen = set()
        parsed: Any
        key: Any
        for record in records:
            key = key_of(record)
            if key is None or key in seen:
                return None
            seen.add(key)
            text = _text(record)
            last = before.get(key)
            if last is not None and last.changed is None and last.nested is None and last.text == text:
                out.append(last)
                continue
            if last is None or (last.parsed is None and not gpu):
                parsed = Gpu.from_wire(record) if gpu else Proc.from_wire(record)
            else:
                fields = _differ(last.record(), record) - key_field
                if gpu:
                    parsed = self._gpu_again(key, last.parsed, record, fields)
                elif fields <= _ELAPSED:
                    parsed = _aged(last.parsed, record.get("elapsed")) if fields else last.parsed
                else:
                    parsed = _reparsed(last.parsed, record, fields, "proc")
            if gpu and parsed is None:
                return None  # an index out of range: refused the general way
            if gpu:
                self._remember(key, record, parsed)
            out.append(Held(key, text, None, parsed))
        return tuple(out)

    def _gpu_again(self, key: Any, gpu: Gpu, record: dict[str, Any], fields: set[str]) -> Gpu | None:
        """GPU `key` with `fields` parsed again from `record` (a new record or a change); its
        preflight reading without parsing it where it is none or its last one again (a probe sends
        one every few samples and none in between)."""
        reading: Any = _MISSING
        text: str | None = None
        if "preflight" in fields:
            raw = record.get("preflight")
            if raw is None:
                reading = None
            else:
                text = _text(raw)
                last = self._readings.get(key)
                if last is not None and last[0] == text:
                    reading = last[1]
        if reading is not _MISSING:
            fields = fields - {"preflight"}
        made = _reparsed(gpu, record, fields, "gpu") if fields else gpu
        if made is not None and reading is not _MISSING:
            made = _copy_gpu(made, {"preflight": reading})
        if made is not None:
            self._remember(key, record, made, text)
        return made

    def _remember(self, key: Any, record: dict[str, Any], gpu: Any, text: str | None = None) -> None:
        """Keep GPU `key`'s preflight reading, as JSON text (`text`, when made already) beside what
        was parsed of it: as decoded JSON it was a fifth of the objects a host's intake holds for
        the garbage collector to walk. The same reading again keeps what is kept (a new
        pair would be one more young object a GPU, every time the probe repeats it)."""
        if gpu is None or gpu.preflight is None or record.get("preflight") is None:
            return
        if text is None:
            text = _text(record["preflight"])
        last = self._readings.get(key)
        if last is None or last[1] is not gpu.preflight or last[0] != text:
            self._readings[key] = (text, gpu.preflight)

"""How every wire record is read: one field at a time, each checked on its own.

A probe is not trusted: a field is checked for its type and domain (a NaN, an infinity, a negative
size or a string where a number belongs becomes None), so one bad field costs that field, never the
record or the host; every string is made printable (gputui.model.textsafe). The record modules of
gputui.model build on this one: `wire_fields` reads the plain fields of a record by their declared
types (BY_TYPE), so a record's `from_wire` names only what is special about it (a required PID, a
percentage, a nested record). Separate from the records so that each of them reads a field alike.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import fields
from functools import partial
from typing import Any, TypeAlias, TypeVar

from .textsafe import printable

MAX_BYTES = 1 << 60  # sizes above this (an exbibyte) are nonsense from a broken or hostile probe
MAX_PID = 1 << 22  # Linux's PID_MAX_LIMIT
MAX_INDEX = 4095  # the highest GPU index taken
MAX_GPUS = 4096  # GPU records taken from one sample, and GPU indexes from one list

# What a field of PIDs or of GPU indexes holds (to mypy both are tuples of ints); the names tell
# BY_TYPE which check to apply: a PID is 1 to MAX_PID, an index is a whole number from 0.
Pids: TypeAlias = tuple[int, ...]
Indexes: TypeAlias = tuple[int, ...]

Decoder = Callable[[Any], Any]
Record = TypeVar("Record")
Key = TypeVar("Key", bound=Hashable)


# -- one field at a time -----------------------------------------------------------------------


def as_int(value: Any, low: int | None = None, high: int | None = None) -> int | None:
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    if (low is not None and value < low) or (high is not None and value > high):
        return None
    return value


def as_count(value: Any) -> int | None:
    """A whole number >= 0 (a size, an index, a start time)."""
    return as_int(value, 0, MAX_BYTES)


def as_total(value: Any) -> int:
    """A count that is 0 where the probe did not say (or said nonsense)."""
    return as_int(value, 0, MAX_BYTES) or 0


def as_pid(value: Any) -> int | None:
    return as_int(value, 1, MAX_PID)


def as_percent(value: Any) -> int | None:
    return as_int(value, 0, 100)


def as_float(value: Any, low: float | None = None) -> float | None:
    """A finite number (NaN and the infinities are refused), at least `low` when given."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return None
    if not math.isfinite(number) or (low is not None and number < low):
        return None
    return number


# A finite number >= 0: seconds, milliseconds, watts, a CPU share. A partial, not a function that
# calls as_float: it is read for every process of every sample, and a call less is measurable.
as_measure: Callable[[Any], float | None] = partial(as_float, low=0.0)


def as_str(value: Any) -> str | None:
    return printable(value) if isinstance(value, str) else None


def as_bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def is_true(value: Any) -> bool:
    """A flag is set only by an explicit true: one the probe did not send (or garbled) is off."""
    return value is True


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# The helpers for lists and maps return at once for what most records carry: nothing (a sample's
# 1,000 process records are parsed on the app's event loop, field by field).


def as_pids(value: Any, limit: int | None = None) -> Pids:
    """The valid PIDs of a list (of its first `limit` items), in its order."""
    if not value or not isinstance(value, list):
        return ()
    return tuple(p for p in map(as_pid, value if limit is None else value[:limit]) if p is not None)


def as_indexes(value: Any) -> Indexes:
    if not value or not isinstance(value, list):
        return ()
    return tuple(i for i in map(as_count, value) if i is not None)


def gpu_set(value: Any) -> Indexes:
    """GPU indexes as a set: each once, in order, from the first MAX_GPUS of the list."""
    return tuple(sorted(set(as_indexes(as_list(value)[:MAX_GPUS]))))


def as_strs(value: Any) -> tuple[str, ...]:
    if not value or not isinstance(value, list):
        return ()
    return tuple(printable(v) for v in value if isinstance(v, str))


def as_strs_or_none(value: Any) -> tuple[str, ...] | None:
    """A list of strings, or None where the probe sent no list (it could not read it)."""
    return as_strs(value) if isinstance(value, list) else None


def index_key(key: Any) -> int | None:
    """A GPU index as the key of a per-GPU map ("0"); None for a key that is not one."""
    if isinstance(key, str) and key.isdecimal() and key.isascii() and len(key) < 6:
        return int(key)
    return None


def by_index(value: Any) -> dict[int, int | None]:
    """{"0": bytes} as the probe sends per-GPU figures: {0: bytes or None}; bad keys are dropped."""
    out: dict[int, int | None] = {}
    if not value or not isinstance(value, dict):
        return out
    for key, item in value.items():
        index = index_key(key)
        if index is not None:
            out[index] = as_count(item)
    return out


def records(value: Any, decode: Callable[[dict[str, Any]], Record | None], limit: int) -> tuple[Record, ...]:
    """The records of a list (its first `limit` items) that decode; what is not an object, or does
    not decode (no usable PID, index, id), is dropped."""
    items = (decode(v) for v in as_list(value)[:limit] if isinstance(v, dict))
    return tuple(r for r in items if r is not None)


def listed_once(
    items: Iterable[Record], key: Callable[[Record], Key]
) -> tuple[tuple[Record, ...], dict[Key, int]]:
    """The records whose key no other one has, in order; and how many times each key listed more
    than once was. Of two records that say they are one GPU or one job, which one is cannot be
    told: neither is taken (a plan or a wait built on either would be a guess)."""
    kept = list(items)
    times = Counter(key(r) for r in kept)
    return tuple(r for r in kept if times[key(r)] == 1), {k: n for k, n in times.items() if n > 1}


# -- a record's plain fields, by their declared types ---------------------------------------------

# The decoder for a field of each declared type (as written: the records' modules postpone their
# annotations, so a field's type is its source text).
BY_TYPE: dict[str, Decoder] = {
    "str | None": as_str,
    "int | None": as_count,
    "int": as_total,
    "float | None": as_measure,
    "bool | None": as_bool,
    "bool": is_true,
    "tuple[str, ...]": as_strs,
    "tuple[str, ...] | None": as_strs_or_none,
    "Pids": as_pids,
    "Indexes": as_indexes,
    "dict[int, int | None]": by_index,
    "dict[str, Any]": as_dict,
}

WireFields: TypeAlias = tuple[tuple[str, Decoder], ...]


def wire_fields(
    record: type, skip: Iterable[str] = (), only: Iterable[str] | None = None, **special: Decoder
) -> WireFields:
    """(name, decoder) of every field of the dataclass `record` read from the wire under its own
    name: `special`'s decoder where given, else BY_TYPE's for its declared type. Fields in `skip`
    (or not in `only`) are the caller's. A field of another type must be given or skipped: a
    TypeError when the module loads, never a field read the wrong way."""
    skipped, wanted = set(skip), set(only) if only is not None else None
    if unknown := (set(special) | skipped | (wanted or set())) - {f.name for f in fields(record)}:
        raise TypeError(f"{record.__name__} has no field {', '.join(sorted(unknown))}")
    out: list[tuple[str, Decoder]] = []
    for item in fields(record):
        if item.name in skipped or (wanted is not None and item.name not in wanted):
            continue
        decoder = special.get(item.name) or BY_TYPE.get(str(item.type))
        if decoder is None:
            raise TypeError(f"{record.__name__}.{item.name}: no decoder for {item.type}")
        out.append((item.name, decoder))
    return tuple(out)


def read_fields(d: dict[str, Any], table: WireFields) -> dict[str, Any]:
    """The fields of `table` read from the wire record `d` (absent ones as their decoder reads None)."""
    get, out = d.get, {}  # a loop, not a comprehension: no frame of its own (3.10, 3.11)
    for name, decode in table:
        out[name] = decode(get(name))
    return out


# -- back to plain JSON types ---------------------------------------------------------------------


def plain(record: Any, skip: Iterable[str] = (), first: Iterable[str] = ()) -> dict[str, Any]:
    """A record's fields as plain JSON types, `first` first and the rest in their declared order
    (`describe`, `--json`): tuples become lists (pairs too), the rest is kept as it is; fields in
    `skip` are left out. `first` keeps a record's identity ahead of the fields it shares with
    others (gputui.model.process), which a dataclass declares before the record's own."""
    out = {name: _plain(getattr(record, name)) for name in first}
    skipped = set(skip) | set(out)
    for f in fields(record):
        if f.name not in skipped:
            out[f.name] = _plain(getattr(record, f.name))
    return out


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, tuple) else value

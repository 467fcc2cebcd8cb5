"""Delta samples: a sample that carries only what changed since the one before it.

At a thousand hosts, the app's work is mostly reading samples that say again what the last one said:
a host's GPUs, its processes, their commands, the same every second. Once the app asks for them
(`configure` `deltas`: N, docs/PROTOCOL.md "Delta samples"), the probe sends a `sample` with a
`delta` field naming the `seq` of the sample it follows, and in it only:
- the sample's own fields that changed (`seq` and `time` always; `cost_ms` nearly always); an object
  value (`host`, `scan`) or a list (`parents`, `jobs`) is sent whole when any of it changed, and a
  field that is gone is sent as null (null and missing mean the same in a sample);
- `gpus`: for each GPU that changed, its `index` and the fields that changed (a GPU new since the
  last sample: its whole record);
- `processes`: for each process that changed, its `pid`, `start_time` and the fields that changed (a
  process new since the last sample: its whole record); a process is named by both, so a reused PID
  is a new process;
- `gone`: `{"gpus": [index, ...], "processes": [[pid, start_time], ...]}`, what left.
A process's `elapsed` moves with the clock on every sample; a delta carries it once it moved by a
second and a hundredth of itself from what the app holds (`elapsed_moved`): exact to the second for
a young process, to a minute for an hour-old one, and exact again in every whole sample. So an
unchanged host's delta says nothing of its processes, and costs the app nothing for them.
A GPU's `preflight` reading comes in one sample of every few (docs/PROTOCOL.md): a delta carries it
when it differs from the one the app holds, and a sample without one leaves the app's as it is
(exact again in every whole sample). Sent as it changed in the whole record, the reading came and
went twice a period on every GPU of every host at once (4,096 hosts' GPUs renewed in the
same second, every 10 s), and said nothing the app did not hold.

Every `deltas`-th sample is whole again (and any sample the app asks `whole`, and whenever a delta
would not be shorter than a line may be): a missed or refused line costs at most that many
samples. The encoder keeps, as its base, exactly what the app holds after merging (`apply`, the
same code on both sides), so the two never drift apart.

Shared by the probe (SampleEncoder) and the app (apply, DeltaError). Stdlib only, Python >= 3.8
syntax: this runs on monitored hosts.
"""

from typing import Any, Dict, List, Optional, Set, Tuple  # noqa: F401  (type comments)

from .wire import MAX_LINE, encode

# A process's age moves every sample; a delta carries it once it moved this far from what the app
# holds: a second, and a hundredth of the age (a day-old job's every 15 minutes or so). Whole
# samples carry every age as it is.
ELAPSED_STEP = 1.0
ELAPSED_SHARE = 0.01
# The sample's own fields that are not merged field by field (the keyed lists are, `delta` and
# `gone` describe the merge).
_MERGED = ("gpus", "processes", "delta", "gone")
_HEAD = ("type", "v", "seq", "time")


class DeltaError(ValueError):
    """A delta that cannot be merged (malformed, or for another sample than the one held)."""


def gpu_key(record):
    # type: (Any) -> Optional[int]
    """A GPU record's key: its index (an int, not a bool), else None."""
    if not isinstance(record, dict):
        return None
    index = record.get("index")
    return index if type(index) is int else None


def process_key(record):
    # type: (Any) -> Optional[Tuple[int, Optional[int]]]
    """A process record's key: (pid, start_time), both ints (start_time may be null), else None."""
    if not isinstance(record, dict):
        return None
    pid, start = record.get("pid"), record.get("start_time")
    if type(pid) is not int or (start is not None and type(start) is not int):
        return None
    return (pid, start)


def _number(value):
    # type: (Any) -> bool
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def elapsed_moved(held, elapsed):
    # type: (Any, Any) -> bool
    """Whether a delta carries a process's `elapsed`: it is not a number, or it moved by at least
    ELAPSED_STEP and ELAPSED_SHARE of itself since the value the app holds."""
    if not (_number(held) and _number(elapsed)):
        return bool(held != elapsed)
    return bool(abs(elapsed - held) >= max(ELAPSED_STEP, ELAPSED_SHARE * abs(elapsed)))


def _changed_fields(base, new, gpu):
    # type: (Dict[str, Any], Dict[str, Any], bool) -> Dict[str, Any]
    """The fields of record `new` (a GPU's if `gpu`, else a process's) that differ from `base` (gone
    ones as null); a process's elapsed only once it moved far enough (elapsed_moved), a GPU's
    preflight reading only when the sample has one (a sample without leaves the held one)."""
    out = {}  # type: Dict[str, Any]
    for key, value in new.items():
        if key == "elapsed" and not gpu:
            if not elapsed_moved(base.get("elapsed"), value):
                continue
        elif (key == "preflight" and gpu and value is None) or base.get(key) == value:
            continue  # (no reading in this sample: the held one stays)
        out[key] = value
    for key, value in base.items():
        if key not in new and value is not None and not (gpu and key == "preflight"):
            out[key] = None
    return out


def diff(base, new):
    # type: (Dict[str, Any], Dict[str, Any]) -> Dict[str, Any]
    """The delta that turns sample `base` (as the app holds it) into sample `new` (but for the
    processes' ages that did not move far enough, elapsed_moved, and the GPUs' preflight readings
    where `new` carries none: the held ones stay)."""
    out = {"type": "sample", "v": new.get("v"), "seq": new.get("seq"), "time": new.get("time")}
    out["delta"] = base.get("seq")
    for key, value in new.items():
        if key not in _HEAD and key not in _MERGED and base.get(key) != value:
            out[key] = value
    for key, value in base.items():
        if key not in new and key not in _HEAD and key not in _MERGED and value is not None:
            out[key] = None
    gone = {}  # type: Dict[str, List[Any]]
    for name in ("gpus", "processes"):
        key_of = gpu_key if name == "gpus" else process_key  # type: Any
        old = _keyed(name, base.get(name))
        changes = []  # type: List[Dict[str, Any]]
        seen = set()  # type: Set[Any]
        for record in new.get(name) or []:
            ident = key_of(record)
            if ident is None or ident in seen:
                raise DeltaError("%s: a record without a key of its own: send the sample whole" % name)
            seen.add(ident)
            previous = old.get(ident)
            if previous is None:
                changes.append(record)
                continue
            fields = _changed_fields(previous, record, name == "gpus")
            if fields:
                head = {"index": ident} if name == "gpus" else {"pid": ident[0], "start_time": ident[1]}
                head.update(fields)
                changes.append(head)
        if changes:
            out[name] = changes
        left = [k for k in old if k not in seen]
        if left:
            gone[name] = [list(k) if isinstance(k, tuple) else k for k in left]
    if gone:
        out["gone"] = gone
    return out


def _keyed(name, records):
    # type: (str, Any) -> Dict[Any, Dict[str, Any]]
    """`records` by key; DeltaError when one has no key or two have the same."""
    key_of = gpu_key if name == "gpus" else process_key
    out = {}  # type: Dict[Any, Dict[str, Any]]
    for record in records if isinstance(records, list) else []:
        key = key_of(record)
        if key is None or key in out:
            raise DeltaError("%s: a record without a key of its own" % name)
        out[key] = record
    return out


def _gone_keys(gone, name):
    # type: (Dict[str, Any], str) -> Set[Any]
    value = gone.get(name, [])
    if not isinstance(value, list):
        raise DeltaError("gone.%s must be a list" % name)
    keys = set()  # type: Set[Any]
    for item in value:
        if name == "gpus":
            if type(item) is not int:
                raise DeltaError("gone.gpus holds an index that is not a whole number")
            keys.add(item)
        else:
            key = process_key({"pid": item[0], "start_time": item[1]}) if _pair(item) else None
            if key is None:
                raise DeltaError("gone.processes holds something that is not [pid, start_time]")
            keys.add(key)
    return keys


def _pair(item):
    # type: (Any) -> bool
    return isinstance(item, list) and len(item) == 2


def _changes(name, changes):
    # type: (str, Any) -> Dict[Any, Dict[str, Any]]
    """A delta's records of list `name` (gpus, processes), by key; DeltaError when one has no key
    of its own or two name the same."""
    if changes is None:
        return {}
    if not isinstance(changes, list):
        raise DeltaError("%s must be a list" % name)
    processes = name == "processes"
    key_of = process_key if processes else gpu_key  # type: Any
    by_key = {}  # type: Dict[Any, Dict[str, Any]]
    for change in changes:
        key = key_of(change)
        if key is None:
            raise DeltaError("a %s record without a usable %s" % (
                "process" if processes else "GPU", "pid and start_time" if processes else "index"))  # fmt: skip
        if key in by_key:
            raise DeltaError("%s: one record twice in a delta" % name)
        by_key[key] = change
    return by_key


def read(delta, held):
    # type: (Dict[str, Any], Any) -> Tuple[Dict[str, Any], Dict[Any, Dict[str, Any]], Dict[Any, Dict[str, Any]], Set[Any], Set[Any]]
    """A delta checked against the seq of the sample it must follow (`held`): its own fields, its
    GPU changes by index and process changes by (pid, start_time), the gone GPUs and processes.
    DeltaError when it follows another sample or is malformed (the one set of rules, both sides)."""
    follows = delta.get("delta")
    if type(follows) is not int:
        raise DeltaError("delta must be the seq of the sample it follows")
    if follows != held:
        raise DeltaError("a delta for sample %d, but the last one held is %r" % (follows, held))
    gone = delta.get("gone", {})
    if not isinstance(gone, dict):
        raise DeltaError("gone must be an object")
    fields = dict((k, v) for k, v in delta.items() if k not in _MERGED)
    return (
        fields,
        _changes("gpus", delta.get("gpus")),
        _changes("processes", delta.get("processes")),
        _gone_keys(gone, "gpus"),
        _gone_keys(gone, "processes"),
    )


def _merge_list(name, base, changes, gone):
    # type: (str, Any, Dict[Any, Dict[str, Any]], Set[Any]) -> List[Any]
    """The records of list `name` (gpus, processes) after the delta: the base's in their order, each
    with its change merged in, the gone ones left out, the new ones at the end. A record that did
    not change is the base's own object, and a list in which nothing changed is the base's list."""
    if not isinstance(base, list):
        base = []
    if not changes and not gone:
        unchanged = base  # type: List[Any]
        return unchanged
    key_of = process_key if name == "processes" else gpu_key  # type: Any
    merged = []  # type: List[Any]
    held = set()  # type: Set[Any]
    for record in base:
        key = key_of(record)
        held.add(key)
        if key in gone:
            continue
        change = changes.get(key)
        merged.append(record if change is None else dict(record, **change))
    for key, change in changes.items():
        if key not in held:
            merged.append(change)  # new since the base: the whole record
    return merged


def apply(base, delta):
    # type: (Dict[str, Any], Dict[str, Any]) -> Dict[str, Any]
    """Sample `base` with `delta` merged in: the sample the probe would have sent whole. Raises
    DeltaError when the delta is not for `base` or is malformed; `base` is never changed."""
    fields, gpus, processes, gone_gpus, gone_processes = read(delta, base.get("seq"))
    merged = dict(base)
    merged.update(fields)
    merged["gpus"] = _merge_list("gpus", base.get("gpus"), gpus, gone_gpus)
    merged["processes"] = _merge_list("processes", base.get("processes"), processes, gone_processes)
    return merged


class SampleEncoder(object):
    """The probe's side: each sample as the line to send, whole or as a delta (as the app asked)."""

    def __init__(self, deltas=0):
        # type: (int) -> None
        self.deltas = deltas  # a whole sample every this many (0: every sample whole, no deltas)
        self.base = None  # type: Optional[Dict[str, Any]]  # the last sample as the app holds it
        self.since_whole = 0
        self._head = 0  # samples the next whole one comes early by, once (ask)

    def ask(self, deltas, head_start=0):
        # type: (int, int) -> None
        """What the app asked (`configure` `deltas`): a whole sample every `deltas`, the next one
        `head_start` samples early (0 to deltas - 1). The probe picks it at random: a fleet that
        connected together would otherwise send its whole samples in the same second, every
        `deltas` (4,096 at once held the app up for seconds)."""
        self.deltas = deltas
        head = min(max(0, head_start), max(0, deltas - 1)) if deltas > 0 else 0
        if self.base is None:
            self._head = head  # taken at the first whole sample
        else:  # in the middle of a run: the next sample still a delta
            self.since_whole = max(self.since_whole, min(self.since_whole + head, deltas - 1))

    def line(self, record, whole=False):
        # type: (Dict[str, Any], bool) -> bytes
        """`record` (a whole sample) as the line to send. `whole`: no delta this time."""
        from .core import fit_line  # core imports this module's users: late, to keep it light

        base = self.base
        if self.deltas > 0 and base is not None and not whole and self.since_whole < self.deltas:
            try:
                delta = diff(base, record)
                line = encode(delta)
                if len(line) - 1 <= MAX_LINE:
                    self.base = apply(base, delta)
                    self.since_whole += 1
                    return line
            except DeltaError:
                pass  # records this cannot key (none of the probe's own): the sample goes whole
        line = encode(record)
        if len(line) - 1 <= MAX_LINE:
            self.base = record
        else:
            line = fit_line(record)  # what the app gets is the cut sample: the next delta follows it
            import json

            sent = json.loads(line.decode("utf-8"))
            self.base = sent if sent.get("type") == "sample" else None
        self.since_whole, self._head = 1 + self._head, 0
        return line

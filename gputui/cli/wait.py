"""`gputui wait`: return as soon as every chosen GPU has been ready for the settle period.

    gputui wait [HOST ...] [--demo] [--gpu SPEC ...] [--timeout S] [--settle S] [--temp-below C]
                [--no-throttle] [--memory-below SIZE] [--util-below PCT] [--persistence]
                [--interval S] [--json]

Made for `gputui clean --all --yes && gputui wait --settle 5 && ./run_benchmark.sh`. Ready means
(gputui.views.readiness): no process uses or holds the GPU (monitors aside), memory within the idle slack
of its baseline, no unaccounted memory, utilization 0; and, when asked, below a temperature, below a
memory figure, under a utilization, not throttling, in persistence mode. A MIG instance (`--gpu
MIG-...`) is waited for alone, by what makes sense of a slice (readiness.unready's `instance`): no
utilization, --util-below refused. On a terminal a line per host says what each GPU waits for and
for how long.

Exit codes: 0 ready; 1 timeout (each GPU's failing conditions printed, and in the JSON), or a host
down; 2 bad usage; 3 no NVIDIA driver or GPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..config.file import idle_threshold as threshold
from ..fleet.fleet import Fleet
from ..fleet.session import DOWN, HostView, SampleArrived, StatusChanged
from ..model import NO_GPU_CODES, MigPlace, Preflight, Sample
from ..model.gpus import mig_label
from ..model.textsafe import cells, cut, printable
from ..text.words import columns, count, shares
from ..views.readiness import (
    DEFAULT_UTIL_BELOW,
    SERIES_JUDGED,
    SERIES_READER,
    Conditions,
    Unready,
    unready,
)
from .exits import Exit
from .gpuspec import NotFound, Targets, UsageError, is_uuid, resolve_gpu_specs, take_positional_gpus
from .judging import judge_fleet
from .streams import for_a_person
from .versions import WAIT_JSON

# A host waited for but not (yet) judged: (NO_SAMPLE or NOT_JUDGED, why). The kinds are the JSON's keys.
Pending = tuple[str, str]
NO_SAMPLE, NOT_JUDGED = "no_sample", "not_judged"
READABLE = 24  # cells of a GPU's words below which the live line names its first condition instead
# What is waited for on a host: a whole GPU (its index), or a MIG instance alone (a MIG UUID names it).
Item = int | MigPlace
Key = tuple[str, Item]  # (host, item)


# The conditions the command line sets, each an option of the same name (--util-below: util_below).
ASKED = ("util_below", "temp_below", "memory_below", "no_throttle", "persistence")


def run(args: argparse.Namespace) -> int:
    """`gputui wait` with its parsed arguments (a positional HOST:N is GPU N of HOST, as for clean)."""
    take_positional_gpus(args)
    return judge_fleet(args, run_wait)


def conditions_of(args: argparse.Namespace) -> Conditions:
    asked = {name: getattr(args, name) for name in ASKED}
    if asked["util_below"] is None:  # not asked (None, so that a MIG instance can refuse it when asked)
        asked["util_below"] = DEFAULT_UTIL_BELOW
    return Conditions(**asked)


def order(key: Key) -> tuple[str, int, int, int, int]:
    """Hosts by name, then each GPU by index, itself before its MIG instances (by GPU and compute
    instance; an unknown compute instance first)."""
    host, item = key
    if isinstance(item, MigPlace):
        return (host, item.gpu, 1, *item.order[1:])
    return (host, item, 0, 0, 0)


def item_name(item: Item) -> str:
    """`GPU 2`, `MIG 0:1.0`: what a line of the verdict names."""
    return f"MIG {item.label}" if isinstance(item, MigPlace) else f"GPU {item}"


@dataclass
class GpuWait:
    """One GPU or MIG instance being waited for: since when it has been ready, and what it lacks now."""

    host: str
    item: Item
    ready_since: float | None = None  # monotonic: ready in every sample since
    last: list[Unready] = field(default_factory=list)
    # The processes (pid, start time) on the GPU in the first sample judged: one that comes later
    # is named as new, with the parent that started it (a supervisor restarting its worker).
    known: set[tuple[int, int | None]] | None = None
    waited: float = 0.0
    series: bool = False  # judged from Prometheus' series (no holder list)
    uuid: str | None = None  # a MIG instance's, as the latest sample says it

    @property
    def gpu(self) -> int:
        """The GPU it is, or whose instance it is."""
        return self.item.gpu if isinstance(self.item, MigPlace) else self.item

    def ready_for(self, now: float) -> float:
        return now - self.ready_since if self.ready_since is not None else 0.0


async def run_wait(
    args: argparse.Namespace, fleet: Fleet, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Wait on the hosts of `fleet` (built by the caller, not started); return the exit code."""
    out, err = stdout or sys.stdout, stderr or sys.stderr
    conditions = conditions_of(args)
    # Seconds at 0 % SM that make an idle holder (the CLI sets it from --idle-minutes or the config).
    idle_after = getattr(args, "idle_after", None)
    idle_after = threshold(None) if idle_after is None else idle_after
    live = bool(getattr(err, "isatty", lambda: False)()) and not args.json
    started = time.monotonic()
    fleet.start()
    try:
        await fleet.wait_first_samples(min(args.timeout, 30.0) or 30.0)
        problem = _no_gpu(fleet)
        if problem:
            if for_a_person(err, args.json):
                problem += (
                    " (`gputui wait --demo demo-b --gpu 3` waits on a simulated GPU that a benchmark frees)"
                )
            return _refuse(out, err, args, Exit.NO_GPU, problem, time.monotonic() - started)
        samples = {v.name: v.sample for v in fleet.hosts if v.sample is not None}
        hosts = list(fleet.sessions)
        # Hosts whose sample lists every GPU it has, and each once: the GPU specs are checked
        # against these (a spec that names nothing there is a usage error).
        judged = {h: s for h, s in samples.items() if _list_trouble(s) is None}
        try:
            chosen = _chosen(args.gpu or [], judged, hosts, args.util_below is not None)
        except UsageError as exc:
            return _refuse(out, err, args, Exit.USAGE, str(exc), time.monotonic() - started)
        if conditions.needs_preflight:
            await fleet.configure(args.interval, preflight_every=1)
        waits = {(h, i): GpuWait(h, i) for h, items in chosen.items() for i in items}
        # Hosts with no sample yet (connecting, down, slow), or whose sample cannot be judged (no
        # GPU listed, GPU records refused): not ready, and waited for, never left out; their GPUs
        # join as a sample that can be judged comes.
        pending: dict[str, Pending] = {
            h: (NO_SAMPLE, "") for h in _awaited(args.gpu or [], fleet) if h not in judged
        }
        preflights: dict[tuple[str, int], Preflight] = {}  # (host, GPU index)
        changed = asyncio.Event()
        fleet.listen(
            lambda change: changed.set() if isinstance(change, SampleArrived | StatusChanged) else None
        )
        deadline = started + args.timeout
        while True:
            now = time.monotonic()
            _judge_pending(fleet, pending, waits, args.gpu or [], hosts, args.util_below is not None)
            for view in fleet.hosts:
                _update(view, waits, preflights, conditions, now, idle_after)
            if (
                waits
                and not pending
                and all(w.ready_for(now) >= args.settle and w.ready_since is not None for w in waits.values())
            ):
                _finish_line(err, live)
                return _report(out, err, args, waits, now, now - started, ready=True)
            if now >= deadline or _all_down(fleet, waits, pending):
                _finish_line(err, live)
                return _report(out, err, args, waits, now, now - started, ready=False, pending=pending)
            if live:
                _live_line(err, waits, pending, now, args.settle, (now - started, args.timeout))
            changed.clear()
            # The next sample, or the moment a ready GPU will have settled, whichever comes first.
            settling = [args.settle - w.ready_for(now) for w in waits.values() if w.ready_since is not None]
            wake = min([deadline - now, *[s for s in settling if s > 0], 1.0])
            try:
                await asyncio.wait_for(changed.wait(), timeout=max(wake, 0.01))
            except asyncio.TimeoutError:
                pass
    finally:
        await fleet.stop()


def _judge_pending(
    fleet: Fleet,
    pending: dict[str, Pending],
    waits: dict[Key, GpuWait],
    specs: list[str],
    hosts: list[str],
    util_asked: bool = False,
) -> None:
    """Take in the pending hosts whose sample can now be judged (their GPUs join `waits`); say why
    of the others, and drop a host with no driver or no GPU (nothing to wait for there)."""
    for host in list(pending):
        view = fleet.view(host)
        late = view.sample
        if view.facts is not None and view.facts.error_code in NO_GPU_CODES:
            del pending[host]
        elif late is None:
            pending[host] = (NO_SAMPLE, _no_sample(view))
        else:
            items, problem = _judge(specs, host, late, hosts, util_asked)
            for i in items:
                waits.setdefault((host, i), GpuWait(host, i))
            if problem is None:
                del pending[host]
            else:
                pending[host] = (NOT_JUDGED, problem)


def _no_gpu(fleet: Fleet) -> str | None:
    """Every host lacks a driver or GPU: nothing to wait for (exit 3)."""
    bad = [v for v in fleet.hosts if v.facts is not None and v.facts.error_code in NO_GPU_CODES]
    if bad and len(bad) == len(fleet.hosts):
        v = bad[0]
        assert v.facts is not None
        return f"{v.name}: {v.facts.error_message or v.facts.error_code}"
    return None


def _chosen(
    specs: list[str], samples: dict[str, Sample], hosts: list[str], util_asked: bool = False
) -> dict[str, set[Item]]:
    """The GPUs and MIG instances to wait for on the hosts judged now. A UUID none of them has is the
    user's mistake only when every host is judged; else it may be on one not heard from yet
    (`_judge`, later). `util_asked`: --util-below was given, which no MIG instance can be judged by."""
    if not specs:
        return {h: {g.index for g in s.gpus} for h, s in samples.items()}
    out: dict[str, set[Item]] = {}
    for spec in specs:
        try:
            found = resolve_gpu_specs([spec], samples, hosts)
        except NotFound:
            if set(samples) >= set(hosts):
                raise
            continue
        for host, items in items_of(found, util_asked).items():
            out.setdefault(host, set()).update(items)
    return out


def items_of(found: dict[str, Targets], util_asked: bool = False) -> dict[str, set[Item]]:
    """What the specs name, to wait for: whole GPUs, and MIG instances alone (the GPU's other
    instances run other jobs: docs/SLURM.md "Which GPUs"). A MIG instance with --util-below asked is
    bad usage: NVML gives no utilization of an instance, nor of its GPU in MIG mode."""
    instances = sorted(p.label for t in found.values() for p in t.instances)
    if instances and util_asked:
        raise UsageError(
            f"--util-below: NVML reports no utilization of a MIG instance ({instances[0]}), nor of its "
            "GPU in MIG mode"
        )
    return {host: {*t.gpus, *t.instances} for host, t in found.items()}


def _update(
    view: HostView,
    waits: dict[Key, GpuWait],
    preflights: dict[tuple[str, int], Preflight],
    conditions: Conditions,
    now: float,
    idle_after: float | None = None,
) -> None:
    sample = view.sample
    idle = view.idle.durations(threshold(None) if idle_after is None else idle_after)
    for (host, item), w in waits.items():
        if host != view.name:
            continue
        if view.status != "live" or sample is None:
            w.ready_since, w.last = (
                None,
                [Unready("host", f"{view.name} is {view.status}: {view.detail or view.reason or ''}")],
            )
            continue
        gpu = sample.gpu(w.gpu)
        if gpu is None:
            w.ready_since, w.last = None, [Unready("gpu", f"GPU {w.gpu} is not in the latest sample")]
            continue
        if gpu.preflight is not None:
            preflights[(host, w.gpu)] = gpu.preflight
        preflight = preflights.get((host, w.gpu))
        if isinstance(item, MigPlace):
            instance = gpu.mig_instance(item)
            w.uuid = instance.uuid if instance is not None and instance.uuid else w.uuid
            if w.known is None:
                w.known = {p.key for p in sample.in_instance(item)}
            w.last = unready(gpu, sample, conditions, preflight, known=w.known, idle=idle, instance=item)
        else:
            if w.known is None:
                w.known = {p.key for p in sample.on_gpu(item)}
            w.series = view.facts is not None and view.facts.reader == SERIES_READER
            w.last = unready(gpu, sample, conditions, preflight, known=w.known, idle=idle, series=w.series)
        if w.last:
            w.ready_since = None
        elif w.ready_since is None:
            w.ready_since = now


def _awaited(specs: list[str], fleet: Fleet) -> list[str]:
    """The hosts the GPU specs can name: every host, unless each spec names its host (HOST:INDEX)."""
    hosts = list(fleet.sessions)
    named = {spec.rpartition(":")[0] for spec in specs}
    if not specs or any(h not in hosts for h in named):
        return hosts  # a spec of every host (`0`, `all`) or a UUID: any host may hold it
    return [h for h in hosts if h in named]


def _pending_words(pending: Pending) -> str:
    kind, why = pending
    return why if kind == NO_SAMPLE else f"cannot be judged: {why}"


def _no_sample(view: HostView) -> str:
    why = view.shown_detail or view.reason
    return f"no sample yet ({view.status}{': ' + why if why else ''})"


def _list_trouble(sample: Sample) -> str | None:
    """Why `sample`'s GPU list is not the host's whole list (None: it is, as far as can be told)."""
    refused = ""
    if sample.gpus_refused:
        why = "; ".join(sample.gpus_refused_why)
        refused = f"{count(sample.gpus_refused, 'GPU record')} refused ({printable(why)})"
    if not sample.gpus:
        return "its sample lists no GPU" + (f" that can be read: {refused}" if refused else "")
    return refused or None


def _judge(
    specs: list[str], host: str, sample: Sample, hosts: list[str], util_asked: bool = False
) -> tuple[set[Item], str | None]:
    """The GPUs and MIG instances of `host` to wait for in `sample`, and why the host cannot be
    judged (None: it can).

    Every GPU (no spec, `all`, HOST:all) needs the whole list; a GPU named by index needs that GPU in
    it. A UUID names one GPU or MIG instance of whichever host has it (checked when the wait began),
    not one of each."""
    trouble = _list_trouble(sample)
    if not specs:
        return {g.index for g in sample.gpus}, trouble
    indexes: set[Item] = set()
    missing: list[str] = []
    for spec in specs:
        try:
            found = resolve_gpu_specs([spec], {host: sample}, hosts)
            indexes |= items_of(found, util_asked).get(host, set())
        except UsageError as exc:  # a UUID this host lacks may be another's; anything else is said
            if not (is_uuid(spec, hosts) and isinstance(exc, NotFound)):
                missing.append(str(exc))
        else:
            if trouble and spec.strip() in ("all", f"{host}:all"):
                missing.append("every GPU")
    if missing:
        return indexes, trouble or "; ".join(missing)
    return indexes, None


def _all_down(fleet: Fleet, waits: dict[Key, GpuWait], pending: dict[str, Pending]) -> bool:
    hosts = {h for h, _ in waits} | set(pending)
    return bool(hosts) and all(fleet.view(h).status == DOWN for h in hosts)


# Seconds waited so far and the --timeout, for the live line.
Spent = tuple[float, float]


def _live_line(
    err: TextIO,
    waits: dict[Key, GpuWait],
    pending: dict[str, Pending],
    now: float,
    settle: float,
    spent: Spent,
) -> None:
    """The one line a terminal shows while `wait` waits, redrawn in place (carriage return, erase to
    the end of the line): never wider than the terminal, else it wraps and each redraw leaves a copy
    of its first rows behind."""
    text = live_text(waits, pending, now, settle, columns(err) - 1, spent)
    print("\r\x1b[K" + text, end="", file=err, flush=True)


def live_text(
    waits: dict[Key, GpuWait],
    pending: dict[str, Pending],
    now: float,
    settle: float,
    width: int,
    spent: Spent | None = None,
) -> str:
    """`1/4 ready, 12 s of 600 s | demo-a: GPU 0 used or held by 4121 (user: python train.py) · GPU 1
    ready 1.5/5 s` in at most `width` cells. When it does not fit, what each GPU waits for gives way,
    never the hosts, the GPUs, the count or the time: an equal share each, cut with an ellipsis, or
    where a share is too short to read, the first condition it fails by its name and how many more
    (`processes +2`): whole words, never abbreviations a reader must guess."""
    ready = sum(1 for w in waits.values() if w.ready_since is not None)
    lead = f"{ready}/{len(waits)} ready"
    if spent is not None:
        lead += f", {spent[0]:.0f} s of {spent[1]:g} s"
    # Each host: its name, then per GPU (name, what it waits for, the same in a word or three).
    by_host: dict[str, list[tuple[str, str, str]]] = {
        h: [("", _pending_words(p), "no sample" if p[0] == NO_SAMPLE else "not judged")]
        for h, p in sorted(pending.items())
    }
    for (host, item), w in sorted(waits.items(), key=lambda kv: order(kv[0])):
        if w.ready_since is not None:
            state = (item_name(item), f"ready {w.ready_for(now):.1f}/{settle:g} s", "ready")
        elif w.last:
            more = f" +{len(w.last) - 1}" if len(w.last) > 1 else ""
            state = (item_name(item), w.last[0].words, w.last[0].condition + more)
        else:
            state = (item_name(item), "waiting", "waiting")
        by_host.setdefault(host, []).append(state)
    states = [(printable(long), printable(short)) for parts in by_host.values() for _, long, short in parts]
    frame = cells(lead) + sum(
        cells(f" | {printable(h)}: ")
        + sum(cells(gpu) + (1 if gpu else 0) for gpu, _, _ in parts)
        + 3 * (len(parts) - 1)  # " · " between a host's GPUs
        for h, parts in by_host.items()
    )
    room = shares([cells(long) for long, _ in states], width - frame)
    fitted = iter(_fit_state(long, short, n) for (long, short), n in zip(states, room, strict=True))
    line = lead + "".join(
        f" | {printable(h)}: "
        + " · ".join(" ".join(x for x in (gpu, next(fitted)) if x) for gpu, _, _ in parts)
        for h, parts in by_host.items()
    )
    return cut(line, width)  # a terminal too narrow for even the GPUs' names: cut at its edge


def _fit_state(long: str, short: str, room: int) -> str:
    """What a GPU waits for in `room` cells: its words (cut with an ellipsis where `READABLE` cells
    still say something), else its first condition whole (`processes +2`, then `processes`), else
    `✗`: a word is shown whole or not at all."""
    if room >= cells(long):
        return long
    if room >= READABLE:
        return cut(long, room)
    for form in (short, short.partition(" +")[0]):
        if room >= cells(form):
            return form
    return "✗"


def _finish_line(err: TextIO, live: bool) -> None:
    if live:
        print("\r\x1b[K", end="", file=err, flush=True)


def _refuse(
    out: TextIO, err: TextIO, args: argparse.Namespace, code: int, message: str, waited: float
) -> int:
    """Nothing to wait for (no GPU, a spec that names nothing): the line on stderr, and with --json
    the document as well, so that a script reading it learns why (an empty stdout parses as nothing)."""
    print(f"gputui: {message}", file=err)
    if args.json:
        doc = {
            "version": WAIT_JSON,
            "ready": False,
            "exit_code": code,
            "error": printable(message),
            "waited_s": round(waited, 3),
            "settle_s": args.settle,
            "hosts": [],
        }
        print(json.dumps(doc, indent=2, ensure_ascii=True), file=out)
    return code


def _report(
    out: TextIO,
    err: TextIO,
    args: argparse.Namespace,
    waits: dict[Key, GpuWait],
    now: float,
    waited: float,
    ready: bool,
    pending: dict[str, Pending] | None = None,
) -> int:
    """The verdict reached at `now` (monotonic): how long each GPU had been ready then, not when
    this is written (a busy machine writes it later)."""
    code = Exit.READY if ready else Exit.TIMEOUT
    pending = pending or {}
    if args.json:
        doc = {
            "version": WAIT_JSON,
            "ready": ready,
            "exit_code": code,
            "waited_s": round(waited, 3),
            "settle_s": args.settle,
            "hosts": _host_entries(waits, pending, now),
        }
        print(json.dumps(doc, indent=2, ensure_ascii=True), file=out)
        return code
    ordered = sorted(waits.items(), key=lambda kv: order(kv[0]))
    if ready:
        where = ", ".join(f"{printable(h)} {_ready_items(h, waits)}" for h in sorted({h for h, _ in waits}))
        judged = f"; {SERIES_JUDGED}" if any(w.series for w in waits.values()) else ""
        print(f"ready: {where} (after {waited:.1f} s{judged})", file=out)
        return code
    print(f"gputui wait: not ready after {waited:.1f} s", file=err)
    for host, p in sorted(pending.items()):
        print(f"  {printable(host)}: {printable(_pending_words(p))}", file=err)
    for (host, item), w in ordered:
        if w.ready_since is not None and w.ready_for(now) >= args.settle:
            continue
        name = f"{printable(host)} {item_name(item)}"
        if w.ready_since is not None:
            print(f"  {name}: ready for {w.ready_for(now):.1f} s of {args.settle:g}", file=err)
        for u in w.last:
            print(f"  {name}: {u.condition}: {printable(u.words)}", file=err)
    return code


def _ready_items(host: str, waits: dict[Key, GpuWait]) -> str:
    """`GPU 0,1`, `MIG 0:1.0,0:5.0`, `GPU 2 and MIG 0:5.0`: what was waited for on `host`."""
    items = [i for h, i in sorted(waits, key=order) if h == host]
    gpus = [str(i) for i in items if not isinstance(i, MigPlace)]
    places = [i.label for i in items if isinstance(i, MigPlace)]
    return " and ".join(
        f"{what} {','.join(names)}" for what, names in (("GPU", gpus), ("MIG", places)) if names
    )


def _host_entries(waits: dict[Key, GpuWait], pending: dict[str, Pending], now: float) -> list[dict[str, Any]]:
    """The JSON document's hosts: each GPU by its index under "gpus"; each MIG instance under "mig"
    by its place (`0:1.0`, present only where one is waited for), with its GPU, instance and UUID; a
    host not judged with why ("no_sample", "not_judged")."""
    hosts: dict[str, dict[str, Any]] = {}
    for (host, item), w in sorted(waits.items(), key=lambda kv: order(kv[0])):
        entry = hosts.setdefault(host, {"host": host, "gpus": {}})
        verdict = {
            "ready": w.ready_since is not None,
            "ready_for_s": round(w.ready_for(now), 3),
            "unready": [u.describe() for u in w.last],
        }
        if isinstance(item, MigPlace):
            named = {"gpu": item.gpu, "mig": mig_label(item.gi, item.ci), "uuid": w.uuid}
            entry.setdefault("mig", {})[item.label] = {**named, **verdict}
        else:
            entry["gpus"][str(item)] = verdict
    for host, (kind, why) in pending.items():
        hosts.setdefault(host, {"host": host, "gpus": {}})[kind] = why
    return list(hosts.values())

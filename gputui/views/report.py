"""The fleet's state as text and as versioned JSON: `gputui snapshot` (`--json`) and the dashboard's
"Export snapshot" write the same documents, built here once (the UI may not import the CLI's modules).

Schema (version 1): {"version": 1, "time": ..., "hosts": [HOST, ...]} where HOST is
{"name", "status" ("live" | "down" | "no-gpu"), "reason", "message", "host" (the hello's host facts),
"metrics" (the last sample's `host` object: CPU %, load, RAM, swap, uptime), "gpus" and
"processes" (the probe's records, docs/PROTOCOL.md), "jobs" (the jobs the GPU processes belong to,
as gputui.model.Job checked them: {"id", "root", "root_start", "name", "command", "user", "uid",
"state", "ppid", "boundary", "members", "processes", "gpus", "memory", "slurm_job", "container",
"unit"}; docs/PROTOCOL.md "Jobs"), "jobs_omitted", "scan"}. Each process record gets three fields of
the app's (docs/FLEET_VIEW.md "Idle holders"): "idle_since" (the sample time that began its streak of
samples at 0 % SM while it holds GPU memory, as this gputui saw them; null: not idle now),
"idle_seconds" (how long, to the host's latest sample) and "idle_holder" (idle for "idle_minutes" or
more, a top-level field). A single snapshot has seen one sample: `--watch` sees the streaks grow.
"filter" is the filter the document was narrowed by (`snapshot --user alice`: "user:alice"; null:
none): then "gpus", "processes" and "jobs" hold what it matches (gputui/views/narrow.py).
"""

from __future__ import annotations

import errno
import io
import json
import os
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from ..config.file import idle_threshold as threshold
from ..fleet.idle import span
from ..fleet.session import DOWN, REASONS, HostView
from ..kill.plan.mps import mps_clients
from ..model import IDLE_SLACK, NO_GPU_CODES, Gpu, Job, Proc, Sample
from ..model.textsafe import fit, pad, printable
from ..text.units import fmt_bytes, fmt_bytes_of, fmt_duration, fmt_gpus, fmt_percent, fmt_power
from ..text.words import (
    MPS_NAMES,
    count,
    count_does,
    gpu_places,
    host_metrics_parts,
    joined,
    kind_word,
    mig_profile,
)
from .narrow import Narrowing, Shown
from .problems import gpu_free, severe_problems

SCHEMA_VERSION = 1
NOTHING_MATCHES = "no GPU or process here matches the filter"


def host_status(view: HostView) -> tuple[str, str | None, str | None]:
    """(status, reason code, message) of a host for a one-shot report."""
    if view.facts is not None and view.facts.error_code in NO_GPU_CODES:
        return "no-gpu", view.facts.error_code, view.facts.error_message
    if view.sample is not None:
        return "live", None, None
    return DOWN, view.reason or "timeout", view.shown_detail or "no sample arrived in time"


def as_json(
    views: list[HostView],
    now: float | None = None,
    idle_after: float | None = None,
    narrowing: Narrowing | None = None,
) -> dict[str, Any]:
    """The document; `idle_after`: seconds at 0 % SM that make an idle holder (None: the default);
    `narrowing`: a filter's GPUs, processes and jobs only (its text is the document's `filter`)."""
    after = threshold(None) if idle_after is None else idle_after
    hosts = []
    for v in views:
        status, reason, message = host_status(v)
        raw = (
            _narrowed(v.raw_sample or {}, narrowing.of(v.name))
            if narrowing is not None
            else v.raw_sample or {}
        )
        hosts.append(
            {
                "name": v.name,
                "status": status,
                "reason": reason,
                "message": message,
                "host": (v.raw_hello or {}).get("host"),
                "metrics": raw.get("host"),
                "gpus": raw.get("gpus", []),
                "processes": [_with_idle(p, v, after) for p in raw.get("processes", [])],
                # Checked field by field (model.Job): what a script acts on by id must be well-formed.
                "jobs": [job.describe() for job in _jobs(v.sample, narrowing, v.name)],
                "jobs_omitted": v.sample.jobs_omitted if v.sample is not None else 0,
                "scan": raw.get("scan"),
            }
        )
    return {
        "version": SCHEMA_VERSION,
        "time": time.time() if now is None else now,
        "idle_minutes": after / 60,
        "filter": narrowing.text if narrowing is not None else None,
        "hosts": hosts,
    }


def _narrowed(raw: Mapping[str, Any], shown: Shown) -> dict[str, Any]:
    """A raw sample with the GPU and process records `shown` leaves (the records as they came)."""
    gpus = [g for g in raw.get("gpus", []) if isinstance(g, dict) and g.get("index") in shown.gpus]
    processes = [
        p
        for p in raw.get("processes", [])
        if isinstance(p, dict) and (p.get("pid"), p.get("start_time")) in shown.procs
    ]
    return {**raw, "gpus": gpus, "processes": processes}


def _jobs(sample: Sample | None, narrowing: Narrowing | None, host: str) -> list[Job]:
    """The sample's jobs, or those of the processes a filter leaves."""
    if sample is None:
        return []
    if narrowing is None:
        return list(sample.jobs)
    kept = narrowing.of(host).jobs
    return [job for job in sample.jobs if job.id in kept]


def _with_idle(record: Any, view: HostView, after: float) -> Any:
    """A raw process record with the app's idle fields (a record that is no object as it came)."""
    if not isinstance(record, dict):
        return record
    pid, start = record.get("pid"), record.get("start_time")
    seconds = since = None
    if isinstance(pid, int) and (start is None or isinstance(start, int)):
        seconds, since = view.idle.seconds((pid, start)), view.idle.since((pid, start))
    return {
        **record,
        "idle_since": since,
        "idle_seconds": seconds,
        "idle_holder": seconds is not None and seconds >= after,
    }


def dumps(
    views: list[HostView],
    now: float | None = None,
    idle_after: float | None = None,
    narrowing: Narrowing | None = None,
) -> str:
    """The document as text (ASCII: a host's control characters stay escaped)."""
    return json.dumps(as_json(views, now, idle_after, narrowing), indent=2, ensure_ascii=True)


KIND_NOTE = {
    "ghost": "dead PID NVML still lists",
    "hidden": "holds /dev/nvidia*, not listed by NVML",
    "monitor": "watches only: protected",
    "zombie": "exited, holds nothing",
}


def _note(p: Proc, sample: Sample) -> str:
    """Why `p` has its kind, as the dashboard's note says it (gputui/ui/kinds.py)."""
    if p.mps in ("server", "control") and p.kind == "monitor":
        clients = len(mps_clients(sample, p))
        return f"{MPS_NAMES[p.mps]}; {count_does(clients, 'client', 'ends')} with it"
    if p.mps == "client" and p.kind == "user":
        return MPS_NAMES["client"]
    if p.kind == "ghost":
        holders = ", ".join(str(pid) for pid in p.links) or "nobody found"
        return f"{p.reason}; memory held by {holders}"
    if p.kind == "hidden":
        return f"via {p.reason} {p.links[0]}" if p.links else "unattributed"
    if p.kind == "zombie":
        return f"parent {p.ppid} must reap it"
    if p.protected:
        return f"protected: {p.protected}"
    return ""


def _sm(p: Proc) -> str:
    sm = p.sm_util()
    return "-" if sm is None else f"{sm}%"


def render(
    views: list[HostView],
    out: TextIO,
    width: int = 120,
    idle_after: float | None = None,
    narrowing: Narrowing | None = None,
) -> None:
    """The text report; with `narrowing`, a filter's GPUs, processes and jobs only (said first)."""
    after = threshold(None) if idle_after is None else idle_after
    if narrowing is not None:
        print(f"filter: {printable(narrowing.text)}", file=out)
    for v in views:
        _render_head(v, out)
        sample = v.sample
        if sample is None:
            print(file=out)
            continue
        shown = narrowing.of(v.name) if narrowing is not None else None
        if shown is not None and not shown:
            print(f"   {NOTHING_MATCHES}", file=out)
            print(file=out)
            continue
        gpus = [g for g in sample.gpus if shown is None or g.index in shown.gpus]
        procs = [p for p in sample.processes if shown is None or p.key in shown.procs]
        _render_gpus(v, sample, gpus, out)
        _render_procs(v, sample, procs, out, width, after)
        _render_jobs(sample, _jobs(sample, narrowing, v.name), out, width)
        if sample.scan_unreadable:
            print(
                f"   (the open files of {count(sample.scan_unreadable, 'process', 'processes')} unreadable: run as root to see every holder)",
                file=out,
            )
        print(file=out)


def _render_head(v: HostView, out: TextIO) -> None:
    """A host's title line, its load, and its status where it is not live."""
    status, reason, message = host_status(v)
    facts = v.facts
    head = f"== {printable(v.name)}"
    if facts is not None:
        head += f"  ({printable(facts.hostname)}, driver {facts.driver_version or '-'})"
    if facts is not None and facts.read_only:
        head += "  [read-only]"
    print(head, file=out)
    metrics = v.sample.host if v.sample is not None else None
    if metrics is not None and host_metrics_parts(metrics):
        print("   " + " · ".join(host_metrics_parts(metrics)), file=out)
    if status != "live":
        words = REASONS.get(reason or "", reason)
        print(f"   {joined(status, words, printable(message or ''))}", file=out)  # each said once


def _render_gpus(v: HostView, sample: Sample, gpus: list[Gpu], out: TextIO) -> None:
    """A row per GPU (and its MIG instances under it): memory, load, and why it is not free."""
    if gpus:
        print(
            f"   {'GPU':>3}  {'name':<22} {'memory used/total':>18} {'util':>5} {'temp':>5} "
            f"{'power':>11}  state",
            file=out,
        )
    for g in gpus:
        used = fmt_bytes_of(g.memory_used, g.memory_total)
        power = fmt_power(g.power_draw, g.power_limit)
        temp = f"{g.temperature}C" if g.temperature is not None else "-"
        state = g.error or ("free" if gpu_free(v, g) else "busy")
        # Why a GPU nothing holds is not free: its memory trouble (an error is said already).
        state += "".join(f", {p.words}" for p in severe_problems(v, g) if p.state != "error")
        if g.pod:
            state += f", pod {printable(g.pod)}"
        account = g.accounting
        if account is not None and account.unaccounted > IDLE_SLACK:
            # As the GPU table marks it: the largest part nobody listed holds (orphaned, outside...).
            part, size = max(
                ((p, b) for p, b in account.parts() if p in account.UNACCOUNTED), key=lambda x: x[1]
            )
            state += f", {fmt_bytes(size)} {part}"
        print(
            f"   {g.index:>3}  {pad(g.name or '-', 22)} {used:>18} "
            f"{fmt_percent(g.util_gpu):>5} {temp:>5} {power:>11}  {state}",
            file=out,
        )
        _render_mig(g, sample, out)


def _render_procs(
    v: HostView, sample: Sample, procs: list[Proc], out: TextIO, width: int, idle_after: float
) -> None:
    """A row per process, its command cut to `width`; an idle holder says so in its note."""
    # The GPU column is as wide as its widest place (`0:1.0,1:2.0` in MIG): never cut.
    places = {p.pid: gpu_places(p) for p in sample.processes}
    wide = max([6, *map(len, places.values())])
    if procs:
        print(
            f"   {'PID':>7} {'kind':<8} {'GPUs':<{wide}} {'GPU mem':>8} {'SM%':>4} {'user':<10} {'elapsed':>8}  command",
            file=out,
        )
    for p in procs:
        mem = fmt_bytes(p.gpu_bytes) if p.gpu_memory else "-"
        note = _note(p, sample)
        idle = v.idle.seconds(p.key)
        if idle is not None and idle >= idle_after:  # an idle holder: 0 % SM all that time
            words = f"idle holder: 0% SM for {span(idle)}"
            note = f"{words}; {note}" if note else words
        head = (
            f"   {p.pid:>7} {kind_word(p):<8} {places[p.pid]:<{wide}} {mem:>8} {_sm(p):>4} "
            f"{pad(p.user or '-', 10)} {fmt_duration(p.elapsed):>8}  "
        )
        tail = f"  ({note})" if note else ""
        # Numbers and the note stay whole; the command gives way, with an ellipsis.
        print(fit(head, p.command_line, tail, max(width, 60), 12), file=out)


def _render_mig(gpu: Gpu, sample: Sample, out: TextIO) -> None:
    """A GPU in MIG mode: a row per instance under it, as the dashboard's GPU table has them
    (`0/1.0  └ MIG 3g.71gb  46.0/71.0 GiB  2 user`, or `· idle`)."""
    for instance in gpu.mig_instances or ():
        label = f"{gpu.index}/{instance.label}"
        name = f"└ MIG {mig_profile(instance)}".rstrip()
        used = fmt_bytes_of(instance.memory_used, instance.memory_total)
        inside = [
            p
            for p in sample.processes
            if any(m.gi == instance.gi and m.ci in (instance.ci, None) for m in p.mig_on(gpu.index))
        ]
        kinds = Counter(p.kind for p in inside)
        who = "  ".join(f"{kinds[k]} {k}" for k in ("user", "ghost", "hidden") if kinds[k]) or "· idle"
        # Under the GPU's row, its columns kept: the driver gives no utilization, temperature or
        # power per instance, so those are left blank, as in the dashboard.
        print(f"     {label:<5} {pad(name, 19)} {used:>18} {'':>5} {'':>5} {'':>11}  {who}", file=out)


def _render_jobs(sample: Sample, jobs: list[Job], out: TextIO, width: int) -> None:
    """The jobs section: one line per job of `jobs` (its id, the root's user, GPUs, memory, members,
    the root's command, and where it runs: Slurm job, container, unit)."""
    if not jobs:
        return
    print(
        f"   {'job':>7} {'user':<10} {'GPUs':<6} {'GPU mem':>8} {'members':>7}  root command",
        file=out,
    )
    for job in jobs:
        head = (
            f"   {pad(job.id, 7, right=True)} {pad(job.user or '-', 10)} {fmt_gpus(job.gpus):<6} "
            f"{fmt_bytes(job.memory):>8} {len(job.members):>7}  "
        )
        where = job.where
        tail = f"  ({printable(where)})" if where else ""
        print(fit(head, job.command_line, tail, max(width, 60), 12), file=out)
    if sample.jobs_omitted:
        print(f"   ({count(sample.jobs_omitted, 'more job')} not sent by the probe)", file=out)


def write_files(
    views: list[HostView], directory: Path, now: float | None = None, idle_after: float | None = None
) -> tuple[Path, Path]:
    """The snapshot as `gputui-snapshot-YYYYMMDD-HHMMSS.json` and `.txt` in `directory` (created if
    missing). Both files or neither: a name taken by anything (a dangling symlink included) is
    skipped for the next suffix, nothing is ever overwritten or followed, and a write that fails
    (no room) removes what this export wrote. Raises OSError."""
    now = time.time() if now is None else now
    directory.mkdir(parents=True, exist_ok=True)
    stem = "gputui-snapshot-" + time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    text = io.StringIO()
    render(views, text, idle_after=idle_after)
    document = dumps(views, now, idle_after) + "\n"
    for n in range(1000):
        name = stem if n == 0 else f"{stem}-{n}"
        json_path, text_path = directory / f"{name}.json", directory / f"{name}.txt"
        if os.path.lexists(json_path) or os.path.lexists(text_path):
            continue
        try:
            _write_new(json_path, document)
        except FileExistsError:
            continue  # taken between the look and the write
        try:
            _write_new(text_path, text.getvalue())
        except OSError as exc:
            json_path.unlink(missing_ok=True)
            if isinstance(exc, FileExistsError):
                continue
            raise
        return json_path, text_path
    raise OSError(errno.EEXIST, f"no free snapshot name in {directory} ({stem}-*)")


def _write_new(path: Path, data: str) -> None:
    """Create `path` (never an existing one, never through a symlink) and write `data`; a write
    that fails removes the file it created."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
    except BaseException:
        path.unlink(missing_ok=True)
        raise

"""`gputui pick`: choose N GPUs of one host that are ready for the next run, and print them as a line a
shell takes (`export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=2,3`).

Ready is `gputui wait`'s rule (gputui.views.readiness), throttling included, on whole GPUs; of the
ready GPUs of the first host (in the order given) that has N, the N closest together where the probe
says how they are linked (gputui.views.pick). stdout carries the line (or, with --format json, the
document) and nothing else; which host, and why each other GPU is not ready, go to stderr.

Exit codes (gputui/cli/commands/pick.py EPILOG): 0 picked; 1 fewer than N ready on every host after
--wait; 2 bad usage (N more than any host has); 3 no NVIDIA driver or GPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from ..fleet.fleet import Fleet
from ..fleet.session import DOWN, LIVE, HostView, SampleArrived, StatusChanged
from ..model import NO_GPU_CODES
from ..model.textsafe import printable
from ..text.words import count
from ..views.pick import Judged, closest, judge, link_of
from ..views.readiness import Conditions
from .exits import Exit
from .judging import judge_fleet
from .versions import PICK_JSON

FIRST_SAMPLES_S = 30.0  # the longest pick waits for each host's first sample, --wait or not


@dataclass(frozen=True, slots=True)
class HostJudged:
    """One host as pick sees it now: each GPU judged, or why none can be (no sample, down)."""

    host: str
    gpus: tuple[Judged, ...] = ()
    why_not: str | None = None  # the host cannot be judged: why

    @property
    def ready(self) -> list[Judged]:
        return [j for j in self.gpus if j.ready]


@dataclass(frozen=True, slots=True)
class Picked:
    host: str
    gpus: tuple[Judged, ...]


def run(args: argparse.Namespace) -> int:
    """`gputui pick` with its parsed arguments."""
    return judge_fleet(args, run_pick)


def conditions_of(args: argparse.Namespace) -> Conditions:
    """`wait`'s defaults, throttling included: a benchmark on a throttled GPU measures the throttle."""
    return Conditions(memory_below=args.memory_below, no_throttle=True)


async def run_pick(
    args: argparse.Namespace, fleet: Fleet, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Pick on the hosts of `fleet` (built by the caller, not started); return the exit code."""
    out, err = stdout or sys.stdout, stderr or sys.stderr
    started = time.monotonic()
    changed = asyncio.Event()
    fleet.listen(lambda event: changed.set() if isinstance(event, SampleArrived | StatusChanged) else None)
    fleet.start()
    try:
        await fleet.wait_first_samples(FIRST_SAMPLES_S)
        refused = _refusal(fleet, args.count)
        if refused is not None:
            code, message = refused
            return _refuse(out, err, args, code, message)
        if args.wait > 0:
            # A preflight reading (throttling) with every sample while waiting, not every 10 s.
            await fleet.configure(args.interval, preflight_every=1)
        deadline = started + args.wait
        said = False
        while True:
            judged = [_judge_host(view, args) for view in fleet.hosts]
            picked = _first_with(judged, args.count)
            if picked is not None:
                return _report(out, err, args, judged, picked)
            if time.monotonic() >= deadline or all(v.status == DOWN for v in fleet.hosts):
                return _report(out, err, args, judged, None)
            if not said:
                print(_waiting(args, judged), file=err, flush=True)
                said = True
            changed.clear()
            try:
                await asyncio.wait_for(
                    changed.wait(), timeout=max(0.01, min(1.0, deadline - time.monotonic()))
                )
            except asyncio.TimeoutError:
                pass
    finally:
        await fleet.stop()


def _refusal(fleet: Fleet, wanted: int) -> tuple[Exit, str] | None:
    """Nothing to pick from: no host has a driver or GPU (exit 3), or every host that has sent a
    sample has fewer than N GPUs and none is left to hear from (exit 2: no wait can help)."""
    views = fleet.hosts
    no_gpu = [v for v in views if v.facts is not None and v.facts.error_code in NO_GPU_CODES]
    if no_gpu and len(no_gpu) == len(views):
        v = no_gpu[0]
        assert v.facts is not None
        why = v.facts.error_message or v.facts.error_code
        return Exit.NO_GPU, f"{v.name}: {why} (`gputui pick 1 --demo` picks on a simulated cluster)"
    sizes = {v.name: len(v.sample.gpus) for v in views if v.sample is not None}
    if len(sizes) + len(no_gpu) < len(views) or any(n >= wanted for n in sizes.values()):
        return None
    have = ", ".join(f"{printable(h)} has {n}" for h, n in sizes.items()) or "no host sent a sample"
    return Exit.USAGE, f"no host has {count(wanted, 'GPU')} to pick from ({have})"


def _judge_host(view: HostView, args: argparse.Namespace) -> HostJudged:
    sample = view.sample
    if view.facts is not None and view.facts.error_code in NO_GPU_CODES:
        return HostJudged(view.name, why_not=view.facts.error_message or view.facts.error_code)
    if sample is None or view.status != LIVE:
        why = view.shown_detail or view.reason
        return HostJudged(view.name, why_not=f"{view.status}{': ' + why if why else ''}")
    conditions = conditions_of(args)
    idle = view.idle.durations(args.idle_after)
    gpus = tuple(
        judge(gpu, sample, conditions, view.preflight.get(gpu.index), idle=idle, uuid=args.uuid)
        for gpu in sorted(sample.gpus, key=lambda g: g.index)
    )
    return HostJudged(view.name, gpus)


def _first_with(judged: Sequence[HostJudged], wanted: int) -> Picked | None:
    """The first host in order with `wanted` ready GPUs, and the closest `wanted` of them."""
    for host in judged:
        ready = {j.gpu.index: j for j in host.ready}
        if len(ready) >= wanted:
            chosen = closest([j.gpu for j in ready.values()], wanted)
            return Picked(host.host, tuple(ready[g.index] for g in chosen))
    return None


def shell_line(picked: Picked, uuid: bool) -> str:
    """`export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=2,3`: NVML's indexes are in PCI bus
    order, CUDA's by default fastest first, so the order is set with them. UUIDs (checked against
    their form when judged) name a GPU in any order. Quoted all the same: nothing else reaches it."""
    if uuid:
        return "export CUDA_VISIBLE_DEVICES=" + shlex.quote(",".join(str(j.gpu.uuid) for j in picked.gpus))
    indexes = ",".join(str(j.gpu.index) for j in picked.gpus)
    return f"export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES={indexes}"


def _refuse(out: TextIO, err: TextIO, args: argparse.Namespace, code: Exit, message: str) -> int:
    print(f"gputui pick: {message}", file=err)
    if args.format == "json":
        doc = {"version": PICK_JSON, "ok": False, "exit_code": int(code), "error": printable(message)}
        print(json.dumps(doc, indent=2, ensure_ascii=True), file=out)
    return code


def _report(
    out: TextIO, err: TextIO, args: argparse.Namespace, judged: Sequence[HostJudged], picked: Picked | None
) -> int:
    code = Exit.PICKED if picked is not None else Exit.TOO_FEW
    if args.format == "json":
        print(json.dumps(_document(args, judged, picked, code), indent=2, ensure_ascii=True), file=out)
    elif picked is not None:
        print(shell_line(picked, args.uuid), file=out)
    if picked is not None:
        gpus = ", ".join(str(j.gpu.index) for j in picked.gpus)
        link = link_of([j.gpu for j in picked.gpus])
        print(
            f"# gputui pick: {printable(picked.host)} GPU {gpus}"
            + (f" (linked by {link} or closer)" if link else ""),
            file=err,
        )
    else:
        print(f"gputui pick: no host has {count(args.count, 'GPU')} ready" + _after(args), file=err)
    for line in _reasons(judged, picked):
        print(line, file=err)
    return code


def _waiting(args: argparse.Namespace, judged: Sequence[HostJudged]) -> str:
    """`gputui pick: waiting up to 120 s for 2 GPUs ready on one host (ready now: demo-b 1)`."""
    now = ", ".join(f"{printable(h.host)} {len(h.ready)}" for h in judged)
    return f"gputui pick: waiting up to {args.wait:g} s for {count(args.count, 'GPU')} ready on one host (ready now: {now})"


def _after(args: argparse.Namespace) -> str:
    return f" after {args.wait:g} s" if args.wait else " (--wait S waits for them)"


def _reasons(judged: Sequence[HostJudged], picked: Picked | None) -> list[str]:
    """`  demo-a GPU 0: processes: used or held by ...; memory: 118 GiB above idle ...`: a line for
    each GPU not picked, with every condition it fails (a ready one says so), and for each host that
    could not be judged."""
    chosen = {(picked.host, j.gpu.index) for j in picked.gpus} if picked is not None else set()
    lines = []
    for h in judged:
        name = printable(h.host)
        if h.why_not is not None:
            lines.append(f"  {name}: not judged: {printable(h.why_not)}")
        for j in h.gpus:
            if (h.host, j.gpu.index) in chosen:
                continue
            why = "; ".join(f"{u.condition}: {printable(u.words)}" for u in j.unready)
            lines.append(f"  {name} GPU {j.gpu.index}: {why or ('ready, not needed' if picked else 'ready')}")
    return lines


def _document(
    args: argparse.Namespace, judged: Sequence[HostJudged], picked: Picked | None, code: Exit
) -> dict[str, Any]:
    """The --format json document (version PICK_JSON): the pick, and every GPU as judged."""
    doc: dict[str, Any] = {"version": PICK_JSON, "ok": picked is not None, "exit_code": int(code)}
    if picked is not None:
        doc["host"] = picked.host
        doc["gpus"] = [{"index": j.gpu.index, "uuid": j.gpu.uuid, "name": j.gpu.name} for j in picked.gpus]
        doc["cuda_visible_devices"] = ",".join(
            str(j.gpu.uuid) if args.uuid else str(j.gpu.index) for j in picked.gpus
        )
        doc["link"] = link_of([j.gpu for j in picked.gpus])
    doc["hosts"] = [
        {
            "host": h.host,
            "not_judged": h.why_not,
            "gpus": {
                str(j.gpu.index): {"ready": j.ready, "unready": [u.describe() for u in j.unready]}
                for j in h.gpus
            },
        }
        for h in judged
    ]
    return doc

"""`gputui clean --reset-gpu N`: the reset ladder of one GPU from the command line. A dry run first,
always: whether a reset is needed at all, what blocks it (one line each, with what to do), the
ladder's steps; then, confirmed and unblocked, the reset itself (gputui/probe/run/reset.py runs it;
gputui.kill.operate logs it ahead like a plan).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..kill.operate import Operations
from ..model import Event, Gpu, Sample
from ..model.textsafe import cut, printable
from ..text.units import fmt_bytes
from ..text.words import count, head, part_words, reset_advice, stage_line, unaccounted_words
from .console import Console
from .exits import Exit
from .gpuspec import UsageError
from .versions import CLEAN_JSON


@dataclass(frozen=True, slots=True)
class Blocker:
    """One thing that blocks a reset, as the probe names it (gputui/probe/run/reset.py), with what to do."""

    kind: str  # process, mig, display, nvlink, outside, root
    words: str
    pid: int | None
    advice: str

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "pid": self.pid, "words": self.words, "advice": self.advice}


MAX_BLOCKERS = 256  # listed one a line; a host that sends more is counted


def reset_blockers(
    events: Sequence[Event], host: str, gpu: int, sample: Sample | None
) -> tuple[list[Blocker], int]:
    """The blockers of a reset's `blockers` event (else its `done`), checked field by field, each
    with its advice; and how many more the probe sent than are listed."""
    raw: list[Any] = []
    for stage in ("blockers", "done"):
        found = next(
            (e for e in events if e.stage == stage and isinstance(e.data.get("blockers"), list)), None
        )
        if found is not None:
            raw = found.data["blockers"]
            break
    procs = {p.pid: p for p in sample.processes} if sample is not None else {}
    out = []
    for item in raw[:MAX_BLOCKERS]:
        if not isinstance(item, dict):
            continue
        kind = cut(item["kind"], 40) if isinstance(item.get("kind"), str) else "?"
        words = cut(item["words"], 400) if isinstance(item.get("words"), str) else "?"
        pid = item.get("pid")
        pid = pid if isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid < 1 << 31 else None
        advice = reset_advice(kind, host, gpu, pid, procs.get(pid) if pid is not None else None)
        out.append(Blocker(kind, words, pid, advice))
    return out, max(0, len(raw) - MAX_BLOCKERS)


def reset_need(host: str, gpu: Gpu, sample: Sample) -> tuple[bool, str]:
    """Whether a reset would free anything on `gpu`, and why, in words. Only orphaned memory (used,
    and no process holds it) needs a reset; memory that processes hold needs a clean."""
    account = gpu.accounting
    if account is not None and account.orphaned:
        return True, part_words(account, "orphaned")
    if sample.gpu_is_free(gpu):
        return False, f"GPU {gpu.index} is free (memory at idle, nothing holds it): it needs no reset"
    held = f"its {fmt_bytes(gpu.memory_used)} used" if gpu.memory_used else "it"
    why = f"GPU {gpu.index} needs no reset: nothing on it is orphaned; {held} is held by processes"
    others = unaccounted_words(account) if account is not None else ""
    if others:
        why += f" ({others})"
    return False, f"{why}: gputui clean {printable(host)} --gpu {gpu.index} frees it"


async def run_reset(args: argparse.Namespace, ops: Operations, con: Console) -> int:
    """`--reset-gpu N`: the reset ladder on the one named host (dry run, or confirmed).

    It first asks the probe for a dry run, whatever was asked, and prints what it says: whether a
    reset is needed at all (only orphaned memory needs one), each blocker on its own line with what to
    do about it, and the ladder's steps. Exit 0 when a reset could run (dry run) or ran; 4 while
    anything blocks it (refused, or would be); a free GPU needs no reset, and the dry run says so."""
    fleet = ops.fleet
    if len(fleet.sessions) != 1:
        raise UsageError("--reset-gpu resets a GPU of one host: name exactly one HOST")
    [host] = list(fleet.sessions)
    await fleet.wait_first_samples(args.timeout)
    run = _ResetRun(args, ops, con, host)
    trouble = ops.problem(host)
    if trouble is not None:
        con.say(f"== {printable(host)}: {trouble.status.upper()}: {printable(trouble.message)}")
        code = (
            Exit.NO_GPU
            if trouble.status == "no-gpu"
            else (Exit.REFUSED if trouble.status == "refused" else Exit.FAILED)
        )
        return run.finish(code, trouble.status, trouble.message)
    sample = fleet.view(host).sample
    gpu = next((g for g in sample.gpus if g.index == args.reset_gpu), None) if sample else None
    if gpu is None or sample is None:
        raise UsageError(f"{host} has no GPU {args.reset_gpu}")
    needed = run.say_need(gpu, sample)
    stopped = await run.preview(gpu, sample, needed)
    if stopped is not None:
        return stopped
    if not args.yes:
        answer = await con.confirm()
        if answer is not True:
            con.say(f"== {printable(host)}: NOTHING DONE: not confirmed")
            return run.finish(Exit.USAGE if answer is None else Exit.DECLINED, "aborted", "not confirmed")
    return await run.reset(gpu)


class _ResetRun:
    """One `--reset-gpu` run: what it prints, and the JSON report it ends with."""

    def __init__(self, args: argparse.Namespace, ops: Operations, con: Console, host: str) -> None:
        self.args, self.ops, self.con, self.host = args, ops, con, host
        self.report: dict[str, Any] = {"host": host, "gpu": args.reset_gpu}

    def finish(self, code: int, result: str, message: str) -> int:
        if self.con.json:
            self.report.update(result=result, message=message)
            self.con.document(
                {
                    "version": CLEAN_JSON,
                    "dry_run": bool(self.args.dry_run),
                    "ok": code == Exit.OK,
                    "exit_code": code,
                    "log": str(self.ops.audit.path),
                    "reset": self.report,
                }
            )
        return code

    def say_need(self, gpu: Gpu, sample: Sample) -> bool:
        """Say the GPU, its memory and whether it needs a reset at all (which is returned)."""
        orphaned = gpu.accounting.orphaned if gpu.accounting is not None else 0
        needed, need_words = reset_need(self.host, gpu, sample)
        self.report.update(
            name=gpu.name, memory_used=gpu.memory_used, orphaned=orphaned, needed=needed, why=need_words
        )
        self.con.say(
            f"== {printable(self.host)}: reset GPU {gpu.index} ({printable(gpu.name or '?')}, "
            f"{fmt_bytes(gpu.memory_used)} used, {fmt_bytes(orphaned)} orphaned)"
        )
        self.con.say(f"   {need_words}")
        return needed

    async def preview(self, gpu: Gpu, sample: Sample, needed: bool) -> int | None:
        """The ladder and its blockers first, whatever was asked: nothing is done on a dry run. The
        exit status where the run ends here (a dry run, a blocker, a probe that could not say), else
        None."""
        host, con = self.host, self.con
        seen: list[Event] = []
        preview = await self.ops.reset(host, gpu.index, dry_run=True, on_event=seen.append)
        blockers, more = reset_blockers(seen, host, gpu.index, sample)
        self.report.update(
            blockers=[b.describe() for b in blockers], blockers_omitted=more, ladder=list(preview.ladder)
        )
        if preview.result != "dry-run":  # the probe could not say (refused the request, link lost)
            for event in seen:
                con.say(stage_line(host, event))
            con.say(f"== {printable(host)}: {head(preview.result)}: {printable(preview.message)}")
            code = Exit.REFUSED if preview.result == "refused" else Exit.FAILED
            return self.finish(code, preview.result, preview.message)
        _print_ladder(con, blockers, more, preview.ladder)
        tally = count(len(blockers) + more, "blocker")
        if blockers or more:
            if self.args.dry_run:
                con.say(
                    f"== {printable(host)}: BLOCKED (dry run): {tally}; a reset now would be refused"
                    + ("" if needed else f"; GPU {gpu.index} needs none")
                    + "; nothing done"
                )
                return self.finish(Exit.REFUSED, "blocked", f"{tally}; a reset now would be refused")
            con.say(f"== {printable(host)}: REFUSED: {tally} remain (above: stop them first); nothing done")
            return self.finish(Exit.REFUSED, "refused", f"{tally} remain")
        if self.args.dry_run:
            con.say(
                f"== {printable(host)}: DRY RUN: nothing blocks a reset of GPU {gpu.index}"
                + ("" if needed else " (it needs none)")
                + "; nothing done"
            )
            return self.finish(Exit.OK, "dry-run", "nothing blocks a reset")
        return None

    async def reset(self, gpu: Gpu) -> int:
        """The reset itself, its stages as they come, then its verdict."""
        host, con, ops = self.host, self.con, self.ops
        events: list[Event] = []

        def show(event: Event) -> None:
            events.append(event)
            if not (event.stage == "blockers" and event.data.get("blockers")):
                con.say(stage_line(host, event))

        try:
            verdict = await ops.reset(host, gpu.index, on_event=show)
        except asyncio.CancelledError:
            con.warn(
                f"interrupted (Ctrl+C) during the reset of GPU {gpu.index} on {host}: outcome unknown; "
                f"recorded in {ops.audit.path}"
            )
            raise
        late, more = reset_blockers(events, host, gpu.index, ops.fleet.view(host).sample)
        if late or more:  # something took the GPU between the dry run and the reset
            _print_ladder(con, late, more, ())
            self.report.update(blockers=[b.describe() for b in late], blockers_omitted=more)
        con.say(f"== {printable(host)}: {verdict.result.upper()}: {printable(verdict.message)}")
        code = Exit.OK if verdict.ok else (Exit.REFUSED if verdict.result == "refused" else Exit.FAILED)
        return self.finish(code, verdict.result, verdict.message)


def _print_ladder(con: Console, blockers: Sequence[Blocker], more: int, ladder: Sequence[str]) -> None:
    """Each blocker on its own line with what to do about it, then the ladder's steps."""
    if blockers or more:
        con.say(f"   {count(len(blockers) + more, 'blocker')}: a reset is refused while any remains")
        for b in blockers:
            con.say(f"     {b.words}")
            con.say(f"       -> {b.advice}")
        if more:
            con.say(f"     and {more} more (the probe's list was cut)")
    else:
        con.say("   nothing blocks a reset")
    if ladder:
        con.say("   the ladder" + (", once nothing blocks it:" if blockers or more else ":"))
        for i, step in enumerate(ladder, 1):
            con.say(f"     {i}. {printable(step)}")
        con.say(
            "   a reset ends every context on the GPU, for every user of the host, and clears its volatile "
            "ECC counts"
        )

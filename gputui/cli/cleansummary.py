"""`gputui clean` over many hosts: one summary table at the end, a row a host, then the totals.

The per-host plans, stages and verdicts come first as always; with more than one host they scroll
by, so the end says it all once: each host's result, its GPUs and processes, the memory, the time
and what went wrong, in one line each (a dry run: what each plan would do).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..model.textsafe import cells, cut, pad, printable
from ..text.units import fmt_bytes
from ..text.words import count, head, took
from .outcome import HostOutcome

NOTE_CELLS = 70  # a host's note (the whole message is in its verdict above, and in the JSON)


def wanted(outcomes: Sequence[HostOutcome]) -> bool:
    """A table is for more than one host with something to say (a host with nothing asked of it,
    `skipped`, is only counted)."""
    return sum(1 for o in outcomes if o.status != "skipped") > 1


def summary_lines(outcomes: Sequence[HostOutcome], dry_run: bool) -> list[str]:
    """The table (a header, a row a host that was asked something) and a totals line."""
    skipped = [o for o in outcomes if o.status == "skipped"]
    outcomes = [o for o in outcomes if o.status != "skipped"]
    rows = [_row(o, dry_run) for o in outcomes]
    heads = ("HOST", "RESULT", "GPUS", "PROCESSES", "MEMORY", "TIME", "NOTE")
    widths = [max(cells(r[i]) for r in [heads, *rows]) for i in range(len(heads) - 1)]
    lines = [f"== summary: {count(len(outcomes), 'host')}" + (" (dry run: nothing done)" if dry_run else "")]
    for r in [heads, *rows]:
        shown = [pad(v, w) for v, w in zip(r[:-1], widths, strict=True)]
        lines.append("   " + "  ".join([*shown, r[-1]]).rstrip())
    totals = _totals(outcomes, dry_run)
    if skipped:
        totals += f"; {count(len(skipped), 'host')} with nothing asked"
    lines.append("   " + totals)
    return lines


def _row(o: HostOutcome, dry_run: bool) -> tuple[str, ...]:
    plan, verdict = o.plan, o.verdict
    gpus = procs = memory = spent = "-"
    if verdict is not None:
        if verdict.gpus:
            clean = sum(1 for g in verdict.gpus if g.ok)
            gpus = f"{clean}/{len(verdict.gpus)} ok"
        if verdict.processes:
            gone = sum(1 for p in verdict.processes if p.gone)
            procs = f"{gone}/{len(verdict.processes)} gone"
        before = sum(v or 0 for v in verdict.memory_before.values())
        after = sum(v or 0 for v in verdict.memory_after.values())
        if verdict.memory_before:
            memory = f"{fmt_bytes(before)} -> {fmt_bytes(after)}"
        if verdict.elapsed_ms is not None:
            spent = took(verdict.elapsed_ms)
    elif plan is not None:
        gpus = str(len(plan.gpus)) if plan.gpus else "-"
        procs = f"{len(plan.targets)} to stop" if plan.targets else "none"
        held = sum(t.memory for t in plan.targets)
        memory = fmt_bytes(held) if held else "-"
    result = "PLANNED" if o.status == "planned" and dry_run else head(o.status)
    return (printable(o.host), result, gpus, procs, memory, spent, cut(o.message or "", NOTE_CELLS))


def _totals(outcomes: Sequence[HostOutcome], dry_run: bool) -> str:
    results = Counter(("PLANNED" if o.status == "planned" and dry_run else head(o.status)) for o in outcomes)
    parts = [f"{n} {word.lower()}" for word, n in results.most_common()]
    stopped = sum(1 for o in outcomes if o.verdict for p in o.verdict.processes if p.gone)
    to_stop = sum(len(o.plan.targets) for o in outcomes if o.plan is not None and o.verdict is None)
    if stopped:
        parts.append(f"{count(stopped, 'process', 'processes')} stopped")
    if dry_run and to_stop:
        parts.append(f"{count(to_stop, 'process', 'processes')} to stop")
    return "total: " + ", ".join(parts)

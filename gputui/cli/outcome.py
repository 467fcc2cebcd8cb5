"""One host's part of a `gputui clean`, from planning to verdict, and the exit status of them all."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..kill.plan.record import Plan
from ..model import Event, PlanVerdict
from ..text.words import restart_words
from .exits import Exit


@dataclass
class HostOutcome:
    """One host's part of a clean, from planning to verdict."""

    host: str
    status: str = "pending"  # planned, clean, stopped, not-clean, not-stopped, refused, no-gpu, ...
    message: str | None = None
    plan: Plan | None = None
    verdict: PlanVerdict | None = None
    events: list[Event] = field(default_factory=list)

    @property
    def code(self) -> int:
        return {
            "clean": Exit.OK,
            "stopped": Exit.OK,
            "planned": Exit.OK,
            "skipped": Exit.OK,
            "no-gpu": Exit.NO_GPU,
            "refused": Exit.REFUSED,
            "aborted": Exit.DECLINED,
        }.get(self.status, Exit.FAILED)

    def describe(self) -> dict[str, Any]:
        verdict = self.verdict.describe() if self.verdict is not None else {}
        return {
            "host": self.host,
            "status": self.status,
            "message": self.message,
            "ok": self.code == Exit.OK,  # as the exit code says: done, planned (dry run) or nothing asked
            "plan": self.plan.describe() if self.plan is not None else None,
            "gpus": verdict.get("gpus", {}),
            "processes": verdict.get("processes", []),
            "elapsed_ms": verdict.get("elapsed_ms"),
            "memory_before": verdict.get("memory_before"),
            "memory_after": verdict.get("memory_after"),
            "problems": verdict.get("problems", []),
            "restarts": [
                dict(r.describe(), words=restart_words(r))
                for r in (self.verdict.restarts if self.verdict is not None else ())
            ],
        }


def exit_code(outcomes: Iterable[HostOutcome]) -> int:
    """The worst of the hosts, in this order: no GPU, refused, not done, declined."""
    codes = {o.code for o in outcomes}
    for code in (Exit.NO_GPU, Exit.REFUSED, Exit.FAILED, Exit.DECLINED):
        if code in codes:
            return code
    return Exit.OK

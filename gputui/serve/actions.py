"""`POST /api/v1/actions`: an attached operator's kill request, planned and run by the hub.

Only with `gputui serve --allow-actions` and an operator's token (a hub without tokens takes no
action: nobody could be named in its audit log). The request names the host, the scope (`pids`:
stop these processes; `gpus`: free these GPUs), the targets by PID and start time, and the ladder
(`term`, `int`, `kill`). The hub never runs a plan a client made: it takes a full holder scan of the
host itself, plans from that (gputui/kill/operate.py, as the dashboard and `gputui clean` do), and
runs the plan only when it is what the operator saw: every target still there (else 409: a PID
may have been reused), and, freeing GPUs, no process the operator was not shown (else 409: plan
again), and, as `gputui clean` refuses them (exit 4), naming no protected process and not of
zombies alone (409, in clean's words: `Plan.refusal`). The plan's events reach every client on the stream; its audit log names the operator.

    {"host": "gpu-a", "scope": "pids", "gpus": [], "targets": [[4121, 123456]], "ladder": "term"}
    -> 200 {"plan": "a1b2c3", "targets": [[4121, 123456]], "refused": [[4130, "protected: monitor"]]}
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from ..kill.auditlog import ActionLog
from ..kill.auditpath import default_log_path
from ..kill.operate import Operations, Request
from ..kill.plan.record import Plan
from ..model import Sample
from ..probe.common import SIGNAL_PLANS
from ..text.words import listed
from .app import HUB, SETTINGS, holder

LADDERS = ("term", "int", "kill")
SCOPES = ("pids", "gpus")
# A hub includes no monitor (it has no --include-monitor, and a viewer's plan that includes one is
# not sent to it): what does, said where clean says "--include-monitor stops it anyway".
HUB_MONITOR_HINT = (
    "a hub stops no monitor: `gputui clean HOST --pid PID --include-monitor`, run where the host is "
    "reached directly, does"
)
MAX_TARGETS = 1024  # processes one request may name (a host's bound on what a sample lists)

Identity = tuple[int, int]


@dataclass
class Actions:
    """The hub's kill flow: one Operations (and audit log) per operator, the plans running."""

    log_path: Path
    operations: dict[str, Operations] = field(default_factory=dict)
    running: dict[str, asyncio.Task[Any]] = field(default_factory=dict)  # plan id -> its run
    busy: set[str] = field(default_factory=set)  # hosts with a plan running

    def of(self, request: web.Request, operator: str) -> Operations:
        ops = self.operations.get(operator)
        if ops is None:
            fleet = request.app[HUB].fleet
            audit = ActionLog(self.log_path, operator=operator)
            ops = self.operations[operator] = Operations(fleet, audit, operator=operator)
        return ops


ACTIONS = web.AppKey("actions", Actions)


def add_routes(app: web.Application, log_path: str | Path | None = None) -> None:
    """The actions route on `app` (gputui/serve/app.py), its audit log at `log_path` (the user's)."""
    app[ACTIONS] = Actions(Path(log_path) if log_path is not None else default_log_path())
    app.router.add_post("/api/v1/actions", act)


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _answer(status: int, value: dict[str, Any]) -> web.Response:
    return web.Response(status=status, text=json.dumps(value), content_type="application/json")


async def act(request: web.Request) -> web.StreamResponse:
    try:
        operator = _operator(request)
        body = await _body(request)
        return await _run(request, operator, body)
    except Refused as exc:
        return _answer(exc.status, {"error": exc.message})


def _operator(request: web.Request) -> str:
    """The operator's name, or Refused (403): actions not allowed, no tokens, not an operator's."""
    settings = request.app[SETTINGS]
    if not settings.allow_actions:
        raise Refused(403, "this hub takes no actions (gputui serve --allow-actions)")
    if settings.tokens is None:
        raise Refused(403, "this hub has no tokens: an action needs an operator's token (--tokens)")
    who = holder(request)
    if who is None or not who.operator:
        raise Refused(403, "an operator's token is needed to act")
    return who.name


@dataclass(frozen=True)
class ActionRequest:
    host: str
    scope: str
    gpus: tuple[int, ...]
    targets: tuple[Identity, ...]
    ladder: str


async def _json(request: web.Request) -> Any:
    """The request's body as JSON, or Refused (400) for a body that cannot be read as JSON, whatever
    the client sent: a client's mistake is its answer, never a 500 and a traceback in the hub's log."""
    try:
        return await request.json()
    except web.RequestPayloadError:
        raise Refused(
            400, "the request's body cannot be read (is it what its Content-Encoding says?)"
        ) from None
    except LookupError:
        raise Refused(400, "the request's charset is not one this hub knows") from None
    except RecursionError:
        raise Refused(400, "the request nests too deeply") from None
    except ValueError:  # not JSON, or not text in its charset
        raise Refused(400, "the request is not JSON") from None


async def _body(request: web.Request) -> ActionRequest:
    value = await _json(request)
    if not isinstance(value, dict):
        raise Refused(400, "the request is not a JSON object")
    host, scope, ladder = value.get("host"), value.get("scope"), value.get("ladder", "term")
    if not isinstance(host, str) or host not in request.app[HUB].fleet.sessions:
        raise Refused(404, "no such host on this hub")
    if scope not in SCOPES:
        raise Refused(400, f"scope must be one of {', '.join(SCOPES)}")
    if ladder not in LADDERS or ladder not in SIGNAL_PLANS:
        raise Refused(400, f"ladder must be one of {', '.join(LADDERS)}")
    gpus, targets = value.get("gpus", []), value.get("targets", [])
    if not isinstance(gpus, list) or not all(_index(g) for g in gpus):
        raise Refused(400, "gpus must be a list of GPU indexes")
    if not isinstance(targets, list) or len(targets) > MAX_TARGETS or not all(_identity(t) for t in targets):
        raise Refused(400, "targets must be a list of [pid, start_time] pairs")
    if scope == "gpus" and not gpus:
        raise Refused(400, "scope gpus names no GPU")
    if scope == "pids" and not targets:
        raise Refused(400, "scope pids names no process")
    return ActionRequest(
        host, scope, tuple(dict.fromkeys(gpus)), tuple(dict.fromkeys((t[0], t[1]) for t in targets)), ladder
    )


def _index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1024


def _identity(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and 0 < v < 2**63 for v in value)
    )


async def _run(request: web.Request, operator: str, asked: ActionRequest) -> web.Response:
    actions = request.app[ACTIONS]
    ops = actions.of(request, operator)
    problem = ops.problem(asked.host)
    if problem is not None and problem.status != "busy":
        raise Refused(403 if problem.status == "refused" else 409, f"{asked.host}: {problem.message}")
    if asked.host in actions.busy or problem is not None:
        raise Refused(409, f"a plan is running on {asked.host}: wait for its verdict")
    samples, late = await ops.scans([asked.host])
    sample = samples.get(asked.host)
    if sample is None:
        raise Refused(409, f"{asked.host}: no sample to plan on")
    plan = _plan(ops, asked, sample, late)
    actions.busy.add(asked.host)
    task = asyncio.ensure_future(ops.run(plan))
    actions.running[plan.id] = task

    def finished(_: asyncio.Future[Any]) -> None:
        actions.busy.discard(asked.host)
        actions.running.pop(plan.id, None)

    task.add_done_callback(finished)
    refused = [[e.pid, e.why] for e in plan.excluded if e.chosen]
    targets = [[t.pid, t.start_time] for t in plan.targets]
    return _answer(200, {"plan": plan.id, "targets": targets, "refused": refused})


def _plan(ops: Operations, asked: ActionRequest, sample: Sample, late: set[str]) -> Plan:
    """The hub's plan from its own fresh sample, or Refused (409) when it is not what was asked."""
    processes = {p.key: p for p in sample.processes}
    roots = {j.key: j for j in sample.jobs}
    gone = [t for t in asked.targets if t not in processes and t not in roots]
    if gone:
        words = listed([f"{pid} (started {start})" for pid, start in gone])
        raise Refused(409, f"no longer there (exited, or the PID names another process now): {words}")
    procs = tuple(processes[t] for t in asked.targets if t in processes)
    jobs = tuple(roots[t] for t in asked.targets if t not in processes)
    request = Request(
        host=asked.host,
        scope="gpus" if asked.scope == "gpus" else "processes",
        gpus=asked.gpus,
        processes=procs if asked.scope == "pids" else (),
        jobs=jobs if asked.scope == "pids" else (),
        signals=asked.ladder,
    )
    planned = ops.build([request], {asked.host: sample}, late)
    if not planned.plans:
        raise Refused(409, "; ".join(planned.problems) or "nothing to plan")
    plan = planned.plans[0]
    shown = set(asked.targets)
    extra = [t for t in plan.targets if (t.pid, t.start_time) not in shown]
    if extra:
        words = listed([str(t.pid) for t in extra])
        raise Refused(409, f"processes you were not shown are on those GPUs now ({words}): plan again")
    refusal = plan.refusal(HUB_MONITOR_HINT)  # as `gputui clean` refuses it (exit 4)
    if refusal is not None:
        raise Refused(409, refusal)
    return plan

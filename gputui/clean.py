"""`gputui clean`: free GPUs from a script, with the same plans, engine and audit log as the dashboard.

    gputui clean [HOST ...] [--demo] [--gpu SPEC ...] [--pid PID ...] [--all] [--sweep]
                 [--sigint-first] [--term-timeout S] [--verify-timeout S] [--yes] [--dry-run]
                 [--json] [--log PATH] [--timeout S]

Made for `gputui clean --all --yes && ./run_benchmark.sh`: it prints the plan, asks on a terminal
(unless --yes), streams each stage as the probe runs it, prints the verdicts, and exits 0 only when
every targeted GPU was verified clean.

Exit codes: 0 clean; 1 not clean (or a host unreachable, or the outcome unknown); 2 bad usage
(including no terminal to ask on and no --yes); 3 no NVIDIA driver or GPU; 4 refused (read-only host,
a protected process named, permission denied).

A GPU SPEC is an NVML index (on every named host), a GPU UUID (or a unique prefix of one), HOST:INDEX
or HOST:all. `--all` cleans every GPU of the named hosts (every non-protected process that uses or
holds one, unattributed holders included); `--gpu` and `--pid` scope the clean, and `--sweep` adds the
unattributed hidden holders to a scoped one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from .actionlog import ActionLog, default_log_path, unfinished
from .fleet import Fleet, HostView
from .model import Event, Sample, gpu_verdict_words
from .plan import (
    DEFAULT_TERM_TIMEOUT,
    DEFAULT_VERIFY_TIMEOUT,
    Plan,
    PlanError,
    PlanOptions,
    brief_command,
    plan_for_host,
    plan_for_selection,
)
from .textsafe import printable
from .transport.base import TransportError
from .units import fmt_bytes

EXIT_CLEAN, EXIT_NOT_CLEAN, EXIT_USAGE, EXIT_NO_GPU, EXIT_REFUSED = 0, 1, 2, 3, 4
JSON_VERSION = 1
NO_GPU_CODES = ("no-driver", "no-gpu", "no-library", "no-permission")
MAX_POSITIONAL_GPU = 64  # HOST:N with N below this is a GPU; a larger N is an SSH port
FRESH_SAMPLE_TIMEOUT = 10.0


class UsageError(Exception):
    pass


# -- arguments ---------------------------------------------------------------------------------


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"{value:g} s is out of range (more than 0, at most 3600)")
    return value


def _pid(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a PID")
    return int(text)


EPILOG = """\
GPU SPEC: an NVML index (on every named host), a GPU UUID (or a unique prefix), HOST:INDEX or
HOST:all. A positional HOST:N with N < 64 is a GPU too (a larger N, or user@host:N, is an SSH port).

exit codes: 0 every targeted GPU verified clean; 1 not clean (or a host unreachable, or the
outcome unknown); 2 bad usage (also: no terminal to confirm on and no --yes); 3 no NVIDIA driver or
GPU; 4 refused (read-only host, protected process, permission denied).

Every plan, signal and verdict is recorded in the audit log, before the signal is sent and after."""


def add_clean_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `gputui clean` (HOST, --demo and --config come from the caller)."""
    if parser.epilog is None:
        parser.epilog = EPILOG
        if parser.formatter_class is argparse.HelpFormatter:
            parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "--gpu",
        action="append",
        metavar="SPEC",
        help="a GPU to clean: NVML index, UUID, HOST:INDEX or HOST:all (repeatable)",
    )
    parser.add_argument(
        "--pid", action="append", type=_pid, metavar="PID", help="a process to stop (repeatable)"
    )
    parser.add_argument(
        "--all", action="store_true", help="every GPU of the named hosts (all of them if none)"
    )
    parser.add_argument("--sweep", action="store_true", help="also stop unattributed hidden holders")
    parser.add_argument("--sigint-first", action="store_true", help="send SIGINT before SIGTERM")
    parser.add_argument(
        "--term-timeout",
        type=_seconds,
        default=DEFAULT_TERM_TIMEOUT,
        metavar="S",
        help="seconds to wait after SIGTERM before SIGKILL (default %(default)g)",
    )
    parser.add_argument(
        "--verify-timeout",
        type=_seconds,
        default=DEFAULT_VERIFY_TIMEOUT,
        metavar="S",
        help="seconds to wait for the GPUs to be verified free (default %(default)g)",
    )
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and stop")
    parser.add_argument("--json", action="store_true", help="print one JSON document (version 1)")
    parser.add_argument("--log", metavar="PATH", help="audit log (default: the user state dir)")
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=20.0,
        metavar="S",
        help="wait this long for each host (default 20)",
    )


def split_targets(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """Positional arguments: hosts, and GPU specs written as HOST:INDEX or HOST:all.

    A GPU spec also names its host. `user@host:port`, `[v6]:port` and HOST:N with N >= 64 stay
    hosts (SSH ports)."""
    hosts: list[str] = []
    specs: list[str] = []
    for name in names:
        host, sep, tail = name.rpartition(":")
        is_gpu = bool(sep and host) and "@" not in name and not name.startswith("[") and ":" not in host
        is_gpu = is_gpu and (tail == "all" or (tail.isdigit() and int(tail) < MAX_POSITIONAL_GPU))
        if is_gpu:
            specs.append(name)
            if host not in hosts:
                hosts.append(host)
        elif name not in hosts:
            hosts.append(name)
    return hosts, specs


def _usage_problem(args: argparse.Namespace) -> str | None:
    if not (args.all or args.gpu or args.pid):
        return "say what to clean: --all, --gpu SPEC or --pid PID (see gputui clean --help)"
    if args.all and (args.gpu or args.pid):
        return "--all cleans every GPU: it does not combine with --gpu or --pid"
    return None


# -- what the run produces ---------------------------------------------------------------------


@dataclass
class HostOutcome:
    """One host's part of a clean, from planning to verdict."""

    host: str
    status: str = "pending"  # planned, clean, not-clean, refused, no-gpu, unreachable, outcome-unknown, ...
    message: str | None = None
    plan: Plan | None = None
    done: Event | None = None
    events: list[Event] = field(default_factory=list)

    @property
    def code(self) -> int:
        return {
            "clean": EXIT_CLEAN,
            "planned": EXIT_CLEAN,
            "skipped": EXIT_CLEAN,
            "no-gpu": EXIT_NO_GPU,
            "refused": EXIT_REFUSED,
        }.get(self.status, EXIT_NOT_CLEAN)

    def describe(self) -> dict[str, Any]:
        data = self.done.data if self.done is not None else {}
        return {
            "host": self.host,
            "status": self.status,
            "message": self.message,
            "plan": self.plan.describe() if self.plan is not None else None,
            "clean": self.status == "clean",
            "gpus": data.get("gpus", {}),
            "processes": data.get("processes", []),
            "elapsed_ms": data.get("elapsed_ms"),
            "memory_before": data.get("memory_before"),
            "memory_after": data.get("memory_after"),
        }


def exit_code(outcomes: Iterable[HostOutcome]) -> int:
    """The worst of the hosts, in this order: no GPU, refused, not clean."""
    codes = {o.code for o in outcomes}
    for code in (EXIT_NO_GPU, EXIT_REFUSED, EXIT_NOT_CLEAN):
        if code in codes:
            return code
    return EXIT_CLEAN


# -- the command -------------------------------------------------------------------------------


@dataclass
class Console:
    out: TextIO
    err: TextIO
    stdin: TextIO
    json: bool

    @property
    def human(self) -> TextIO:
        """Where the plan and the stages go: stdout, or stderr when stdout carries the JSON."""
        return self.err if self.json else self.out

    def say(self, text: str = "") -> None:
        # Every line may carry text from a host: escape once more as a last guard (idempotent).
        print(printable(text), file=self.human, flush=True)

    def warn(self, text: str) -> None:
        print(f"gputui: {text}", file=self.err, flush=True)


async def run_clean(
    args: argparse.Namespace,
    fleet: Fleet,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    operator: str | None = None,
) -> int:
    """Run `gputui clean` on the hosts of `fleet` (built by the caller, not started); return the exit code.

    Starts the fleet and stops it before returning."""
    con = Console(stdout or sys.stdout, stderr or sys.stderr, stdin or sys.stdin, bool(args.json))
    problem = _usage_problem(args)
    if problem is not None:
        con.warn(problem)
        return EXIT_USAGE
    log = ActionLog(args.log or default_log_path(), operator=operator)
    _report_unfinished(log, con)
    fleet.start()
    try:
        return await _clean(args, fleet, log, con)
    except UsageError as exc:
        con.warn(str(exc))
        return EXIT_USAGE
    finally:
        await fleet.stop()
        log.close()


def _report_unfinished(log: ActionLog, con: Console) -> None:
    """Actions a previous gputui started and never saw finish (it died): say so once."""
    try:
        lost = unfinished(log.path)
    except OSError as exc:
        con.warn(f"cannot read the audit log {log.path}: {exc.strerror or exc}")
        return
    for action in lost:
        con.warn("WARNING: " + printable(action.describe()))
    if lost:
        con.warn(f"(check those processes and GPUs; details in {log.path})")
        log.acknowledge(lost)


async def _clean(args: argparse.Namespace, fleet: Fleet, log: ActionLog, con: Console) -> int:
    await fleet.wait_first_samples(args.timeout)
    outcomes = {name: HostOutcome(name) for name in _hosts_in_scope(args, fleet)}
    usable = [name for name, o in outcomes.items() if _usable(fleet.view(name), o)]
    samples = await _fresh_samples(fleet, usable)
    _make_plans(args, fleet, samples, outcomes, log.operator)
    for outcome in outcomes.values():
        _print_plan(con, outcome)
    runnable = [o for o in outcomes.values() if o.status == "planned"]
    if args.dry_run or not runnable:
        return _finish(con, outcomes.values(), log, dry_run=args.dry_run)
    # Verification alone signals nothing: no need to ask.
    if not args.yes and any(o.plan is not None and not o.plan.is_empty for o in runnable):
        answer = await _confirm(con)
        if answer is not True:
            for o in runnable:
                o.status, o.message = "aborted", "not confirmed: nothing done"
            if answer is None:
                con.warn("refusing to act without confirmation: stdin is not a terminal (pass --yes)")
                return _finish(con, outcomes.values(), log, dry_run=False, code=EXIT_USAGE)
            return _finish(con, outcomes.values(), log, dry_run=False)
    # Hosts that cannot be cleaned (down, no GPU, refused) do not hold back the others.
    await asyncio.gather(*(_execute(fleet, o, log, con) for o in runnable))
    return _finish(con, outcomes.values(), log, dry_run=False)


def _hosts_in_scope(args: argparse.Namespace, fleet: Fleet) -> list[str]:
    """The hosts named on the command line that the fleet has (--demo builds more), else all."""
    names, _ = split_targets(getattr(args, "hosts", None) or [])
    return [n for n in names if n in fleet.sessions] or list(fleet.sessions)


def _usable(view: HostView, outcome: HostOutcome) -> bool:
    """Whether a host can be planned for; otherwise the outcome says why not."""
    facts = view.facts
    if facts is not None and facts.error_code in NO_GPU_CODES:
        outcome.status = "no-gpu"
        outcome.message = f"{facts.error_message or facts.error_code} (try `gputui clean --demo --all`)"
        return False
    if view.sample is None:
        outcome.status = "unreachable"
        outcome.message = view.detail or view.reason or "no sample arrived in time"
        return False
    if not view.can_kill:
        outcome.status = "refused"
        outcome.message = "read-only host: kill actions are disabled here"
        return False
    return True


async def _fresh_samples(fleet: Fleet, names: list[str]) -> dict[str, Sample]:
    """A sample after a full holder scan from each host: plans trust no incremental view."""
    waiting: dict[str, asyncio.Future[Sample]] = {}
    loop = asyncio.get_running_loop()

    def on_change(view: HostView, what: str, payload: Any) -> None:
        future = waiting.get(view.name)
        if what == "sample" and future is not None and not future.done() and _is_full(view):
            future.set_result(payload)

    fleet.listen(on_change)
    for name in names:
        waiting[name] = loop.create_future()
        with contextlib.suppress(TransportError):
            await fleet.sessions[name].send({"type": "sample", "v": 1, "full": True})
    if waiting:
        await asyncio.wait(list(waiting.values()), timeout=FRESH_SAMPLE_TIMEOUT)
    out = {}
    for name in names:
        future = waiting[name]
        sample = future.result() if future.done() else fleet.view(name).sample
        if sample is not None:
            out[name] = sample
    return out


def _is_full(view: HostView) -> bool:
    scan = (view.raw_sample or {}).get("scan")
    return bool(scan.get("full")) if isinstance(scan, dict) else True


# -- planning ----------------------------------------------------------------------------------


def _make_plans(
    args: argparse.Namespace,
    fleet: Fleet,
    samples: dict[str, Sample],
    outcomes: dict[str, HostOutcome],
    operator: str,
) -> None:
    gpus = resolve_gpu_specs(args.gpu or [], samples, list(outcomes))
    pids = _pids_by_host(args.pid or [], samples)
    for name, sample in samples.items():
        outcome = outcomes[name]
        facts = fleet.view(name).facts
        options = PlanOptions(
            operator=operator,
            sigint_first=bool(getattr(args, "sigint_first", False)),
            term_timeout=args.term_timeout,
            verify_timeout=args.verify_timeout,
            probe_uid=facts.uid if facts is not None else None,
        )
        try:
            if args.all:
                plan = plan_for_host(sample, host=name, options=options)
            elif name in gpus or name in pids:
                plan = plan_for_selection(
                    sample,
                    host=name,
                    gpu_indexes=gpus.get(name, ()),
                    pids=pids.get(name, ()),
                    sweep=args.sweep,
                    options=options,
                )
            else:
                outcome.status, outcome.message = "skipped", "nothing asked on this host"
                continue
        except PlanError as exc:
            raise UsageError(str(exc)) from None
        outcome.plan, outcome.status = plan, "planned"
        refused = [e for e in plan.excluded if e.pid in pids.get(name, ()) and e.protected]
        if refused:
            outcome.status = "refused"
            outcome.message = "; ".join(f"{e.pid} ({printable(e.name or '?')}) is {e.why}" for e in refused)
    asked = {pid for host_pids in pids.values() for pid in host_pids}
    missing = sorted(set(args.pid or []) - asked)
    if missing:
        raise UsageError(f"PID {', '.join(map(str, missing))} is not a GPU process on any of the hosts")


def resolve_gpu_specs(
    specs: Sequence[str], samples: dict[str, Sample], hosts: Sequence[str]
) -> dict[str, set[int]]:
    """GPU SPECs to {host: GPU indexes}. Raises UsageError for a spec that names nothing."""
    out: dict[str, set[int]] = {}
    for spec in specs:
        for host, indexes in _resolve_one(spec.strip(), samples, hosts).items():
            out.setdefault(host, set()).update(indexes)
    return out


def _resolve_one(spec: str, samples: dict[str, Sample], hosts: Sequence[str]) -> dict[str, set[int]]:
    # HOST:INDEX first: a host may well be named like a UUID prefix ("gpu-a:3"); a UUID has no ":".
    if spec.upper().startswith(("GPU-", "MIG-")) and spec.rpartition(":")[0] not in hosts:
        found = {
            host: {g.index for g in s.gpus if g.uuid and g.uuid.lower().startswith(spec.lower())}
            for host, s in samples.items()
        }
        found = {h: i for h, i in found.items() if i}
        if sum(len(i) for i in found.values()) != 1:
            what = "no GPU has" if not found else "several GPUs match"
            raise UsageError(f"--gpu {printable(spec)}: {what} that UUID")
        return found
    host, sep, index = spec.rpartition(":")
    if sep:
        if host not in hosts:
            raise UsageError(
                f"--gpu {printable(spec)}: {printable(host)} is not one of the hosts (name it as HOST)"
            )
        if host not in samples:
            return {}  # the host is down or has no GPU: its outcome says so
        return {host: _indexes_of(spec, index, samples[host], host)}
    return {h: _indexes_of(spec, spec, s, h) for h, s in samples.items()}


def _indexes_of(spec: str, index: str, sample: Sample, host: str) -> set[int]:
    have = {g.index for g in sample.gpus}
    if index == "all":
        return have
    if not index.isdigit():
        raise UsageError(f"--gpu {printable(spec)}: expected an index, a UUID, HOST:INDEX or HOST:all")
    if int(index) not in have:
        listed = ", ".join(map(str, sorted(have))) or "none"
        raise UsageError(
            f"--gpu {printable(spec)}: {printable(host)} has no GPU {index} (its GPUs: {listed})"
        )
    return {int(index)}


def _pids_by_host(pids: Sequence[int], samples: dict[str, Sample]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for pid in pids:
        hosts = [h for h, s in samples.items() if any(p.pid == pid for p in s.processes)]
        if len(hosts) > 1:
            raise UsageError(f"PID {pid} is on {', '.join(hosts)}: name one HOST to say which")
        for host in hosts:
            out.setdefault(host, set()).add(pid)
    return out


# -- asking ------------------------------------------------------------------------------------


async def _confirm(con: Console) -> bool | None:
    """True or False from the operator; None when there is no terminal to ask on."""
    isatty = getattr(con.stdin, "isatty", None)
    if not (isatty and isatty()):
        return None
    print("Proceed? [y/N] ", end="", file=con.human, flush=True)
    line = await asyncio.to_thread(con.stdin.readline)
    return line.strip().lower() in ("y", "yes")


# -- running -----------------------------------------------------------------------------------


async def execute_plan(
    fleet: Fleet, plan: Plan, log: ActionLog, on_event: Callable[[Event], None] | None = None
) -> Event:
    """Send `plan` to its host's probe with write-ahead logging; return the `done` event.

    The plan and its intents are on disk before the probe can act; every event is logged as it
    comes. Raises TransportError when the plan could not be sent (recorded as `not-sent`). The
    dashboard's dialog uses this too."""
    log.plan(plan)
    done: Event | None = None
    try:
        async for event in fleet.execute(plan.host, plan.to_wire()):
            log.event(plan.host, event)
            if on_event is not None:
                on_event(event)
            if event.stage == "done":
                done = event
    except TransportError as exc:
        log.write("done", plan.id, host=plan.host, stage="done", result="not-sent", message=exc.message)
        raise
    if done is None:  # the stream ended without a verdict: nobody knows what happened
        done = Event(plan=plan.id, time=time.time(), stage="done", result="outcome-unknown",
                     message="the probe sent no verdict", data={"clean": False})  # fmt: skip
        log.event(plan.host, done)
    return done


async def _execute(fleet: Fleet, outcome: HostOutcome, log: ActionLog, con: Console) -> None:
    plan = outcome.plan
    assert plan is not None

    def show(event: Event) -> None:
        outcome.events.append(event)
        con.say(stage_line(outcome.host, event))

    try:
        outcome.done = await execute_plan(fleet, plan, log, show)
    except TransportError as exc:
        outcome.status, outcome.message = "unreachable", f"plan not sent: {exc.message}"
        return
    outcome.status, outcome.message = _judge(outcome.done)


def _judge(done: Event | None) -> tuple[str, str | None]:
    if done is None:
        return "outcome-unknown", "the probe sent no verdict"
    data = done.data
    if data.get("clean") is True:
        return "clean", None
    if done.result == "outcome-unknown":
        return "outcome-unknown", done.message
    if done.result == "refused":
        error = data.get("error")
        status = "no-gpu" if error == "no-gpu" else "refused"
        return status, done.message
    denied = [p for p in data.get("processes", []) if p.get("result") == "permission-denied"]
    if denied:
        allow = denied[0].get("allow") or "run the probe as root"
        pids = ", ".join(str(p.get("pid")) for p in denied)
        return "refused", f"permission denied for {pids}: {allow}"
    return "not-clean", done.message


# -- printing ----------------------------------------------------------------------------------


def clock(t: float) -> str:
    """Local wall time with milliseconds: 12:01:03.120."""
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int((t % 1) * 1000):03d}"


def stage_line(host: str, event: Event) -> str:
    """`12:01:03.120 demo-a GPU3 SIGTERM -> 4121 python train.py` (remote text escaped)."""
    return f"{clock(event.time)} {printable(host)} {stage_text(event)}".rstrip()


def stage_text(event: Event) -> str:
    """A stage line without its time and host (`GPU3  SIGTERM -> 4121 python train.py`): the
    dashboard's log pane styles those apart."""
    if event.gpu is not None:
        where = f"GPU{event.gpu}"
    else:
        gpus = event.data.get("gpus")
        where = "GPU" + ",".join(str(g) for g in gpus) if isinstance(gpus, list) and gpus else ""
    return f"{where:<5} {printable(event.message)}".rstrip()


def _print_plan(con: Console, outcome: HostOutcome) -> None:
    plan = outcome.plan
    if plan is None:
        return  # a host without a plan (down, no GPU, read-only) is reported with the verdicts
    for line in plan_lines(plan):
        con.say(line)
    if outcome.status == "refused":
        con.say(f"   REFUSED: {printable(outcome.message or '')}")
    con.say()


def plan_lines(plan: Plan) -> list[str]:
    """The plan as a readable table (also what the dashboard's dialog shows, in words)."""
    gpus = ", ".join(
        f"GPU{g.index} {fmt_bytes(g.memory_used)}/{fmt_bytes(g.memory_total)}" for g in plan.gpus
    )
    lines = [
        f"== {printable(plan.host)}: plan {plan.id} ({plan.scope}) by {printable(plan.operator)}: {gpus or '-'}"
    ]
    if plan.signalled:
        lines.append(f"   {'PID':>7}  {'user':<10} {'GPUs':<6} {'GPU mem':>8}  command  (why)")
    for t in plan.targets:
        lines.append(_target_line(t.pid, t.user, t.gpus, t.memory, t.brief, t.why))
    if plan.sweep:
        head = (
            "sweep (included)"
            if plan.sweep_included
            else "sweep candidates (not included; --sweep adds them)"
        )
        lines.append(f"   {head}:")
        for t in plan.sweep:
            lines.append(_target_line(t.pid, t.user, t.gpus, t.memory, t.brief, t.why))
    if plan.excluded:
        lines.append("   left alone:")
        for e in plan.excluded:
            lines.append(
                f"   {e.pid:>7}  {printable(e.user or '-')[:10]:<10} {printable(e.brief)[:60]}  ({printable(e.why)})"
            )
    for w in plan.warnings:
        lines.append(f"   ! {printable(w.message)}")
    lines.append("   stages: " + "; ".join(plan.stages))
    return lines


def _target_line(
    pid: int, user: str | None, gpus: tuple[int, ...], memory: int, command: str, why: str
) -> str:
    where = ",".join(map(str, gpus)) or "-"
    mem = fmt_bytes(memory) if memory else "-"
    return (
        f"   {pid:>7}  {printable(user or '-')[:10]:<10} {where:<6} {mem:>8}  "
        f"{printable(command)[:70]}  ({printable(why)})"
    )


def _finish(
    con: Console, outcomes: Iterable[HostOutcome], log: ActionLog, dry_run: bool, code: int | None = None
) -> int:
    items = list(outcomes)
    code = exit_code(items) if code is None else code
    for o in items:
        if o.status != "planned":  # a dry run's plans were printed already
            for line in verdict_lines(o):
                con.say(line)
    if con.json:
        doc = {
            "version": JSON_VERSION,
            "dry_run": dry_run,
            "clean": code == EXIT_CLEAN and not dry_run,
            "exit_code": code,
            "log": str(log.path),
            "hosts": [o.describe() for o in items],
        }
        print(json.dumps(doc, indent=2, ensure_ascii=True), file=con.out, flush=True)
    return code


def verdict_lines(outcome: HostOutcome) -> list[str]:
    if outcome.status == "skipped":
        return []
    head = {"clean": "CLEAN", "not-clean": "NOT CLEAN", "refused": "REFUSED", "no-gpu": "NO GPU"}.get(
        outcome.status, outcome.status.upper()
    )
    done = outcome.done
    took = (
        f" in {done.data.get('elapsed_ms', 0):.0f} ms"
        if done is not None and "elapsed_ms" in done.data
        else ""
    )
    lines = [
        f"== {printable(outcome.host)}: {head}{took}"
        + (f": {printable(outcome.message)}" if outcome.message else "")
    ]
    if done is None:
        return lines
    for index, g in sorted(done.data.get("gpus", {}).items(), key=lambda kv: int(kv[0])):
        lines.append(
            f"   GPU{index:<3} {g.get('result', '?'):<13} {fmt_bytes(g.get('memory_before'))} -> "
            f"{fmt_bytes(g.get('memory_after'))}{_gpu_note(g)}"
        )
    for p in done.data.get("processes", []):
        signals = ",".join(p.get("signals") or []) or "-"
        command = p.get("command")
        cmd = (
            brief_command(tuple(str(a) for a in command))
            if isinstance(command, list) and command
            else p.get("name") or "?"
        )
        note = p.get("why") or ""
        if p.get("allow"):
            note = f"{note}; {p['allow']}"
        lines.append(
            f"   {p.get('pid', '?'):>7}  {p.get('result', '?'):<18} {signals:<16} {printable(str(cmd))[:60]}"
            + (f"  ({printable(note)})" if note else "")
        )
    return lines


def _gpu_note(g: dict[str, Any]) -> str:
    result = g.get("result")
    held, ghosts, suspects = gpu_verdict_words(g)
    if result == "held":
        return f"  held by {held}"
    if result == "ghost-memory":
        return f"  NVML lists {ghosts} (dead); suspected holders: {suspects}"
    idle = g.get("idle_ms")
    return f"  (memory back at {idle:.0f} ms)" if isinstance(idle, (int, float)) else ""

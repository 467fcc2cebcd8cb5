"""`gputui clean`: free GPUs (or stop processes) from a script, with the dashboard's plans, engine and
audit log.

    gputui clean HOST ... [--demo] [--gpu SPEC ...] [--pid PID ...] [--job ID ...] [--slurm-job ID ...]
                 [--container NAME ...] [--pod NAMESPACE/NAME ...] [--user NAME ...] [--all] [--sweep]
                 [--include-monitor] [--signals term|int|kill|hup|usr1] [--sigint-first] [--term-timeout S]
                 [--verify-timeout S] [--yes] [--dry-run] [--json] [--log PATH] [--timeout S]

Made for `gputui clean --all --yes && ./run_benchmark.sh`: it prints the plan, asks on a terminal
(unless --yes), streams each stage as the probe runs it, prints the verdicts, and exits 0 only when
every plan did what it was for: every targeted GPU verified clean (--all, --gpu), or every chosen
process gone with its GPU memory released (--pid), or every chosen job gone, root first, then its
members (--pid of a launcher, --job, --slurm-job, --container, --pod, --user; gputui/cli/jobspec.py).

This module prints and runs (its options are gputui/cli/commands/clean.py's); gputui.kill.operate does the rest (the same code the
dashboard runs). Exit codes: README "Exit codes", and the EPILOG of gputui/cli/commands/clean.py.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TextIO

from ..config.file import Config, load
from ..config.file import idle_threshold as threshold
from ..config.killoptions import KillOptions
from ..fleet.fleet import Fleet
from ..kill.auditlog import UnsafeLog
from ..kill.operate import Operations, Request, RequestScope, UnfinishedReport, status_of
from ..kill.plan.entries import STOP_JOB_FLAG, Target
from ..kill.plan.record import SIGNAL_WORDS, Plan
from ..model import Event, Job, Sample
from ..model.textsafe import fit, pad, printable
from ..text.units import fmt_bytes, fmt_bytes_of
from ..text.words import DEFAULT_COLUMNS, count, signals_sent, stage_line, verdict_lines
from .cleansummary import summary_lines, wanted
from .console import Console
from .demo import demo_names
from .exits import Exit
from .fleets import build_fleet, resolve_hosts
from .gpuspec import NotFound, UsageError, resolve_gpu_specs, take_positional_gpus
from .jobspec import choose
from .options import idle_after
from .outcome import HostOutcome, exit_code
from .quick import INTERVALS
from .recheck import Recheck, snapshot_command, snapshot_commands
from .reset import run_reset
from .streams import for_a_person
from .versions import CLEAN_JSON


def kill_options(args: argparse.Namespace, base: KillOptions) -> KillOptions:
    """The config's [kill] options (`base`) with the command line's flags on top."""
    signals = args.signals or ("int" if args.sigint_first else base.signals)
    if args.sigint_first and args.signals not in (None, "int"):
        raise UsageError(f"--sigint-first and --signals {args.signals} say different things")
    if signals == "kill" and args.term_timeout is not None:
        # Dropped without a word, the operator would believe the job got its 30 s to save.
        raise UsageError(
            "--term-timeout is the wait after a soft signal: --signals kill (here or in [kill]) sends "
            "SIGKILL at once, with nothing to wait after"
        )
    return KillOptions(
        signals=signals,
        term_timeout=args.term_timeout if args.term_timeout is not None else base.term_timeout,
        verify_timeout=args.verify_timeout if args.verify_timeout is not None else base.verify_timeout,
    )


def hosts_problem(
    named: Sequence[str], configured: Sequence[str], demo: bool, config_path: str | None
) -> str | None:
    """A destructive command names its hosts: why this one must, or None (this machine, or named)."""
    if named:
        return None
    if demo:
        return (
            f"name the hosts to clean: the demo has {', '.join(configured)} "
            f"(e.g. gputui clean --demo {configured[0]} --all)"
        )
    if configured:
        where = f"the config {config_path}" if config_path else "the config"
        return (
            f"name the hosts to clean: {where} lists {', '.join(configured)}; gputui clean acts only on "
            "the hosts you name (`local` is this machine)"
        )
    return None


JOB_OPTIONS = ("job", "slurm_job", "container", "pod", "user")
DEFAULT_IDLE_AFTER = threshold(None)  # seconds at 0 % SM that make an idle holder (gputui/fleet/idle.py)


def _named_jobs(args: argparse.Namespace) -> bool:
    return any(getattr(args, name, None) for name in JOB_OPTIONS)


def _usage_problem(args: argparse.Namespace) -> str | None:
    jobs = _named_jobs(args)
    if getattr(args, "idle_minutes", None) is not None and not getattr(args, "idle", False):
        return "--idle-minutes is how long --idle watches for idle holders: it does nothing without --idle"
    if args.reset_gpu is not None:
        if args.all or args.gpu or args.pid or args.sweep or jobs or getattr(args, "idle", False):
            return (
                "--reset-gpu is a plan of its own: it does not combine with --all, --gpu, --pid, the job "
                "options, --idle or --sweep"
            )
        return None
    if getattr(args, "idle", False):
        others = args.all or args.gpu or args.pid or args.job or args.slurm_job or args.container or args.pod
        if others or args.reset_gpu is not None:
            return (
                "--idle stops the idle holders (of --user NAME, if named): it does not combine with --all, "
                "--gpu, --pid, --job, --slurm-job, --container, --pod or --reset-gpu"
            )
        return None
    if not (args.all or args.gpu or args.pid or jobs):
        return (
            "say what to clean: --all, --gpu SPEC, --pid PID, --job ID, --slurm-job ID, --container NAME, "
            "--pod NAMESPACE/NAME, --user NAME or --idle (see gputui clean --help)"
        )
    if args.all and (args.gpu or args.pid or jobs):
        return "--all cleans every GPU: it does not combine with --gpu, --pid or the job options"
    for name in JOB_OPTIONS:
        for value in getattr(args, name, None) or ():
            if not value or not value.strip() or not value.isprintable():
                return f"--{name.replace('_', '-')}: {value!r} is not a name"
    if args.include_monitor and not args.pid:
        return "--include-monitor includes the monitors named by --pid: name them"
    return None


# -- the command -------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """`gputui clean` with its parsed arguments: its hosts, their fleet, then the plans."""
    config = load(args.config)
    take_positional_gpus(args)
    refused = _refused_before_starting(args, config.kill)
    if refused is not None:
        return refused
    hosts = args.hosts
    if not hosts:
        # A destructive command names its hosts: without one, this machine, unless a config (or
        # the demo) lists hosts, which must then be named.
        listed = demo_names() if args.demo else [s.name for s in config.hosts]
        problem = hosts_problem(hosts, listed, args.demo, config.path)
        if problem is not None:  # said as every refusal of clean's is: with --json, its document too
            return _bad_usage(Console(sys.stdout, sys.stderr, sys.stdin, bool(args.json)), args, problem)
        hosts = ["local"]
    specs = resolve_hosts(hosts, args.demo, config)
    fleet = build_fleet(specs, interval=INTERVALS["clean"])
    recheck = snapshot_commands(specs, hosts, args.demo, config)
    return asyncio.run(
        run_clean(args, fleet, kill=config.kill, idle_after=idle_after(args, config), recheck=recheck)
    )


def _refused_before_starting(args: argparse.Namespace, kill: KillOptions) -> int | None:
    """The exit of a usage error the command line alone shows (run_clean's own checks), said before
    anything is started for it (the demo, a host's probe); None when there is none."""
    con = Console(sys.stdout, sys.stderr, sys.stdin, bool(args.json))
    problem = _usage_problem(args)
    if problem is None:
        try:
            kill_options(args, kill)
        except UsageError as exc:
            problem = str(exc)
    return None if problem is None else _bad_usage(con, args, problem)


async def run_clean(
    args: argparse.Namespace,
    fleet: Fleet,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    operator: str | None = None,
    kill: KillOptions | None = None,
    idle_after: float = DEFAULT_IDLE_AFTER,
    recheck: Recheck | None = None,
) -> int:
    """Run `gputui clean` on the hosts of `fleet` (built by the caller, not started); return the exit code.

    Starts the fleet and stops it before returning. `kill`: the config's [kill] options;
    `idle_after`: seconds at 0 % SM that make an idle holder (--idle); `recheck`: a host's name to
    the command that shows it again, as the caller named it (recheck.py; default: the name, with
    --demo if given)."""
    con = Console(stdout or sys.stdout, stderr or sys.stderr, stdin or sys.stdin, bool(args.json))
    problem = _usage_problem(args)
    if problem is not None:
        return _bad_usage(con, args, problem)
    try:
        options = kill_options(args, kill or KillOptions())
    except UsageError as exc:
        return _bad_usage(con, args, str(exc))
    ops = Operations.open(fleet, args.log, kill=options, operator=operator)
    log = ops.audit
    try:
        _report_unfinished(await ops.report_unfinished(), ops, con)
    except UnsafeLog as exc:  # a log path that is not safe to use: refused before anything starts
        return _bad_usage(con, args, exc.strerror or str(exc))
    fleet.start()
    try:
        if args.reset_gpu is not None:
            return await run_reset(args, ops, con)
        again = recheck or (lambda host: snapshot_command(host, {}, (), bool(args.demo), Config()))
        return await _clean(args, ops, con, idle_after, again)
    except UsageError as exc:
        return _bad_usage(con, args, str(exc), str(log.path))
    finally:
        await fleet.stop()
        log.close()
        con.report(log.path)


def _bad_usage(con: Console, args: argparse.Namespace, message: str, log: str | None = None) -> int:
    """Exit 2, said on stderr; with --json the document too (nothing done, `error` saying why), as
    `wait --json` does: a script that reads stdout (`| jq .ok`) learns why instead of parsing
    nothing. `log`: the audit log, once one was opened."""
    con.warn(message)
    if con.json:
        con.document(
            {
                "version": CLEAN_JSON,
                "dry_run": bool(args.dry_run),
                "ok": False,
                "exit_code": Exit.USAGE,
                "error": printable(message),
                "log": log,
                "hosts": [],
            }
        )
    return Exit.USAGE


def _report_unfinished(report: UnfinishedReport, ops: Operations, con: Console) -> None:
    """Actions a previous gputui started and never saw finish (it died): said once."""
    for action in report.actions:
        con.warn("WARNING: " + action.describe())
    if report.actions:
        con.warn(f"(check those processes and GPUs; details in {ops.audit.path})")
    for problem in (report.read_problem, report.write_problem):
        if problem is not None:
            con.warn(problem)


async def _clean(
    args: argparse.Namespace,
    ops: Operations,
    con: Console,
    idle_after: float,
    recheck: Recheck,
) -> int:
    fleet = ops.fleet
    await fleet.wait_first_samples(args.timeout)
    if args.idle:
        await _watch_for_idle(fleet, con, idle_after)
    outcomes = {name: HostOutcome(name) for name in fleet.sessions}
    usable = []
    for name, outcome in outcomes.items():
        trouble = ops.problem(name)
        if trouble is None:
            usable.append(name)
        else:
            outcome.status, outcome.message = trouble.status, trouble.message
            if trouble.status == "no-gpu" and for_a_person(con.err_guard, con.json):
                outcome.message = f"{trouble.message} (try `gputui clean --demo demo-a --all`)"
    samples, late = await ops.scans(usable)
    idle = _idle_holders(fleet, samples, idle_after, args.user or ()) if args.idle else None
    requests = _requests_of_answers(args, samples, list(outcomes), idle, con)
    planned = ops.build(requests, samples, late)
    if planned.problems:
        raise UsageError("; ".join(planned.problems))
    for name in usable:
        if name not in {r.host for r in requests}:
            outcomes[name].status, outcomes[name].message = "skipped", "nothing asked on this host"
            if idle is not None:
                minutes = f"{idle_after / 60:g}"
                outcomes[name].message = f"no idle holder (GPU memory at 0% SM for {minutes} min)"
    for plan in planned.plans:
        outcome = outcomes[plan.host]
        outcome.plan, outcome.status = plan, "planned"
        refusal = plan.refusal()  # nothing is done (exit 4): a protected process named, or zombies alone
        if refusal is not None:
            outcome.status, outcome.message = "refused", refusal
    for outcome in outcomes.values():
        _print_plan(con, outcome)
    runnable = [o for o in outcomes.values() if o.status == "planned"]
    if args.dry_run or not runnable:
        return _finish(con, outcomes.values(), ops, dry_run=args.dry_run)
    # Verification alone signals nothing: no need to ask.
    if not args.yes and any(o.plan is not None and not o.plan.is_empty for o in runnable):
        answer = await con.confirm()
        if answer is not True:
            for o in runnable:
                o.status, o.message = "aborted", "not confirmed: nothing done"
            if answer is None:
                con.warn("refusing to act without confirmation: stdin is not a terminal (pass --yes)")
                return _finish(con, outcomes.values(), ops, dry_run=False, code=Exit.USAGE)
            return _finish(con, outcomes.values(), ops, dry_run=False)

    def show(plan: Plan, event: Event) -> None:
        outcomes[plan.host].events.append(event)
        con.say(stage_line(plan.host, event))

    plans = [o.plan for o in runnable if o.plan is not None]
    # Hosts that cannot be cleaned (down, no GPU, refused) do not hold back the others.
    try:
        results = await ops.run_all(plans, show, limit=args.parallel)
    except asyncio.CancelledError:  # Ctrl+C: each running plan's outcome-unknown line is written
        _say_interrupted(con, [o for o in runnable if o.plan is not None], ops, recheck)
        raise
    for plan, result in zip(plans, results, strict=True):
        outcome = outcomes[plan.host]
        outcome.verdict = result
        outcome.status, outcome.message = status_of(result)
        if plan.instances and outcome.message is None:  # how each instance was judged, either way
            outcome.message = result.message
    return _finish(con, outcomes.values(), ops, dry_run=False)


def _say_interrupted(con: Console, running: Sequence[HostOutcome], ops: Operations, recheck: Recheck) -> None:
    """Ctrl+C while plans ran: each plan's outcome-unknown `done` line in the audit log, saying what
    it sent (Operations.abandon: the dashboard's last words), then the same on stderr (which a
    script's `2>` keeps apart from the JSON), with the command that shows the host again as this
    command line named it (`recheck`)."""
    for o in running:
        if o.plan is None or any(e.stage == "done" for e in o.events):
            continue  # its verdict came before the Ctrl+C: printed as usual
        sent = signals_sent(o.events)
        ops.abandon(
            o.host, o.plan.id, f"interrupted (Ctrl+C) after {sent}" if sent else "interrupted (Ctrl+C)"
        )
        gpus = ",".join(str(i) for i in sorted({g.index for g in o.plan.gpus + o.plan.touched})) or "-"
        what = f"after {sent} was sent" if sent else "before any signal was seen sent"
        con.warn(
            f"interrupted (Ctrl+C) during plan {o.plan.id} on {o.host}, {what}: outcome unknown (the probe "
            f"is ended now; what it did after is not known here). Check GPU {gpus} (`{recheck(o.host)}`); "
            f"recorded as outcome unknown in {ops.audit.path}"
        )


def _requests_of_answers(
    args: argparse.Namespace,
    samples: dict[str, Sample],
    hosts: list[str],
    idle: Mapping[str, tuple[int, ...]] | None,
    con: Console,
) -> list[Request]:
    """`_requests`; where a name matches nothing on the hosts that answered while another did not,
    what it names may be there: an outcome not known (said, nothing asked), not the user's mistake."""
    try:
        return _requests(args, samples, hosts, idle)
    except NotFound as exc:
        unheard = [name for name in hosts if name not in samples]
        if not unheard:
            raise  # every host answered: the name is the user's mistake
        con.warn(f"{exc}; {', '.join(unheard)} did not answer, so it may be there: nothing done")
        return []


def _requests(
    args: argparse.Namespace,
    samples: dict[str, Sample],
    hosts: list[str],
    idle: Mapping[str, tuple[int, ...]] | None = None,
) -> list[Request]:
    """The command line as one request per host that has something to do. `idle`: with --idle, the
    PIDs of each host's idle holders (what is stopped)."""
    # --user names whose work the errand is: the sweep takes only those users' holders, not another
    # user's exporter that happens to hold /dev/nvidia* with no link to a GPU.
    users = tuple(args.user or ())
    if idle is not None:
        return [
            Request(name, "processes", pids=pids, sweep=args.sweep, sweep_users=users)
            for name, pids in idle.items()
            if pids
        ]
    gpus = resolve_gpu_specs(args.gpu or [], samples, hosts)
    chosen = choose(
        samples,
        pids=args.pid or [],
        jobs=args.job or [],
        slurm_jobs=args.slurm_job or [],
        containers=args.container or [],
        users=args.user or [],
        pods=args.pod or [],
    )
    out = []
    for name in samples:
        here = chosen.get(name)
        pids = tuple(sorted(here.pids)) if here is not None else ()
        jobs = tuple(here.jobs.values()) if here is not None else ()
        include = pids if args.include_monitor else ()
        named = gpus.get(name)
        if args.all:
            out.append(Request(name, "host", sweep=args.sweep))
        elif named is not None or pids or jobs:
            scope: RequestScope = "gpus" if named is not None else ("processes" if pids else "jobs")
            out.append(
                Request(
                    name,
                    scope,
                    gpus=tuple(sorted(named.gpus)) if named is not None else (),
                    instances=tuple(sorted(named.instances, key=lambda p: p.order))
                    if named is not None
                    else (),
                    pids=pids,
                    jobs=jobs,
                    sweep=args.sweep,
                    include=include,
                    sweep_users=users,
                )
            )
    return out


async def _watch_for_idle(fleet: Fleet, con: Console, idle_after: float) -> None:
    """Sample the hosts for `idle_after` seconds (and one interval more, so that a process idle all
    along has a streak that long): who holds GPU memory at 0 % SM is history, which a clean's one
    scan does not have (gputui/fleet/idle.py)."""
    hosts = len(fleet.sessions)
    interval = max((v.interval for v in fleet.hosts), default=1.0)
    con.warn(
        f"watching {count(hosts, 'host')} for {idle_after / 60:g} min for idle holders "
        "(GPU memory at 0% SM all that time); Ctrl+C stops"
    )
    await asyncio.sleep(idle_after + 1.5 * interval)


def _idle_holders(
    fleet: Fleet, samples: Mapping[str, Sample], idle_after: float, users: Sequence[str]
) -> dict[str, tuple[int, ...]]:
    """The PIDs of each host's idle holders in its scan (`samples`), of `users` where named."""
    out: dict[str, tuple[int, ...]] = {}
    for name, sample in samples.items():
        holders = fleet.view(name).idle.holders(name, sample, idle_after)
        out[name] = tuple(sorted(h.proc.pid for h in holders if not users or h.proc.user in users))
    return out


# -- asking ------------------------------------------------------------------------------------


# -- printing ----------------------------------------------------------------------------------

# The fewest cells a plan's command is cut to (a target's, one left alone's): a narrower terminal
# wraps the row rather than cut the command shorter.
PLAN_COMMAND = 70
LEFT_COMMAND = 60


def _print_plan(con: Console, outcome: HostOutcome) -> None:
    plan = outcome.plan
    if plan is None:
        return  # a host without a plan (down, no GPU, read-only) is reported with the verdicts
    for line in plan_lines(plan, con.width):
        con.say(line)
    if outcome.status == "refused":
        con.say(f"   REFUSED: {printable(outcome.message or '')}")
    con.say()


def plan_lines(plan: Plan, width: int = DEFAULT_COLUMNS) -> list[str]:
    """The plan as a readable table (the dashboard's dialog shows the same, in its own layout), a
    terminal of `width` cells wide: each command takes the room its row leaves (at least
    PLAN_COMMAND cells; a narrower terminal wraps the row), cut with a mark where it must be."""
    gpus = ", ".join(
        [f"MIG instance {i.label}" for i in plan.instances]
        + [f"GPU {g.index}: {fmt_bytes_of(g.memory_used, g.memory_total)}" for g in plan.gpus + plan.touched]
    )
    lines = [
        f"== {printable(plan.host)}: plan {plan.id} ({plan.scope}) by {printable(plan.operator)}: {gpus or '-'}",
    ]
    title = plan.describe_jobs()
    if title is not None:
        lines.append(f"   {printable(title)}")
        for job in plan.jobs:
            lines.append("   " + job_line(plan, job))
    lines.append(f"   proves: {plan.proves}")
    if plan.signalled:
        lines.append(f"   {'PID':>7}  {'user':<10} {'GPUs':<6} {'GPU mem':>8}  command  (why)")
    for t in plan.targets:
        lines.append(_target_line(t.pid, t.user, t.gpus, t.memory, t.brief, t.why, width))
    if plan.sweep:
        head = (
            "sweep (included)"
            if plan.sweep_included
            else "sweep candidates (not included; --sweep adds them)"
        )
        lines.append(f"   {head}:")
        for t in plan.sweep:
            lines.append(_target_line(t.pid, t.user, t.gpus, t.memory, t.brief, t.why, width))
    if plan.excluded:
        lines.append("   left alone:")
        for e in plan.excluded:
            lead = f"   {e.pid:>7}  {pad(e.user or '-', 10)} "
            lines.append(fit(lead, e.brief, f"  ({printable(e.why)})", width, LEFT_COMMAND))
    for w in plan.warnings:
        lines.append(f"   ! {printable(w.said(STOP_JOB_FLAG))}")
    lines.append(f"   signals: {SIGNAL_WORDS[plan.kill.signals]}")
    lines.append("   stages: " + "; ".join(plan.stages))
    return lines


def job_line(plan: Plan, job: Job) -> str:
    """`job 4242: root 4242 (alice); 2 members: 4250 GPU 0 18.0 GiB, 4251 GPU 1 18.0 GiB [slurm 4711]`;
    a root that holds a GPU itself says what (`root 4300 (bob) GPU 3 24.0 GiB; no member below it`)."""

    def held(t: Target) -> str:
        return f"GPU {','.join(map(str, t.gpus)) or '-'} {fmt_bytes(t.memory) if t.memory else '-'}"

    mine = plan.job_targets(job)
    members = [t for t in mine if t.role == "member"]
    roots = [t for t in mine if t.role == "root"]
    root = f"root {job.root} ({printable(job.user or '?')})"
    if roots and roots[0].gpus:
        root += " " + held(roots[0])
    shown = ", ".join(f"{t.pid} {held(t)}" for t in members[:16])
    if len(members) > 16:
        shown += f" and {len(members) - 16} more"
    below = f"{count(len(members), 'member', 'members')}: {shown}" if members else "no member below it"
    where = f" [{printable(job.where)}]" if job.where else ""
    return f"job {printable(job.id)}: {root}; {below}{where}"


def _target_line(
    pid: int, user: str | None, gpus: tuple[int, ...], memory: int, command: str, why: str, width: int
) -> str:
    where = ",".join(map(str, gpus)) or "-"
    mem = fmt_bytes(memory) if memory else "-"
    lead = f"   {pid:>7}  {pad(user or '-', 10)} {where:<6} {mem:>8}  "
    return fit(lead, command, f"  ({printable(why)})", width, PLAN_COMMAND)


def _finish(
    con: Console, outcomes: Iterable[HostOutcome], ops: Operations, dry_run: bool, code: int | None = None
) -> int:
    items = list(outcomes)
    code = exit_code(items) if code is None else code
    for o in items:
        if o.status not in ("planned", "skipped"):  # a dry run's plans were printed already
            for line in verdict_lines(o.host, o.status, o.message, o.verdict, con.width):
                con.say(line)
    if not dry_run:
        done = [o for o in items if o.verdict is not None]
        if done and any(o.verdict is not None and o.verdict.processes for o in done):
            stopped = sum(1 for o in done for p in (o.verdict.processes if o.verdict else ()) if p.gone)
            con.say(
                f"({count(stopped, 'process', 'processes')} stopped; every signal is in {ops.audit.path})"
            )
    if wanted(items):  # many hosts: their verdicts scrolled by; one table says them all
        for line in summary_lines(items, dry_run):
            con.say(line)
    if con.json:
        con.document(
            {
                "version": CLEAN_JSON,
                "dry_run": dry_run,
                "ok": code == Exit.OK,  # a dry run is ok when every plan could be made
                "exit_code": code,
                "log": str(ops.audit.path),
                "hosts": [o.describe() for o in items],
            }
        )
    return code

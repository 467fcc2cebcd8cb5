"""`gputui clean`: free GPUs (or stop processes) from a script, with the dashboard's plans, engine and
audit log (gputui/cli/clean.py runs it; EPILOG below is its --help).

    gputui clean HOST ... [--demo] [--gpu SPEC ...] [--pid PID ...] [--job ID ...] [--slurm-job ID ...]
                 [--container NAME ...] [--pod NAMESPACE/NAME ...] [--user NAME ...] [--all] [--sweep]
                 [--include-monitor] [--signals term|int|kill|hup|usr1] [--sigint-first] [--term-timeout S]
                 [--verify-timeout S] [--yes] [--dry-run] [--json] [--log PATH] [--timeout S]
"""

from __future__ import annotations

import argparse

from ...probe.common import SIGNAL_PLANS
from .. import argtypes, options
from ..versions import CLEAN_JSON
from . import command_parser, runner

PARALLEL = 16  # hosts acting at once (--parallel): a fleet's plans do not all signal in one instant


EPILOG = """\
HOST: name the hosts to act on (config names, ssh-style hosts, `local` for this machine). Without a
HOST, clean acts on this machine; with a config that lists hosts, or with --demo, name them.

JOBS: --pid of a job's root (a launcher or supervisor that holds no GPU itself) stops its job: the
root first (it passes SIGTERM on to its ranks), then any member left, and proves every member gone
with its memory released and the root gone too. --job ID (as `gputui snapshot` lists jobs),
--slurm-job ID, --container NAME, --pod NAMESPACE/NAME and --user NAME choose jobs by exact name;
--dry-run lists the members. A verdict names a parent that still runs and may start a stopped process again.

GPU SPEC: an NVML index (on every named host), a GPU UUID (or a unique prefix), HOST:INDEX or
HOST:all. A positional HOST:N with N < 64 is a GPU too (a larger N, or user@host:N, is an SSH port).
A MIG instance's UUID (MIG-..., or a unique prefix) names that instance alone: the processes in it
are stopped, its GPU's other instances left alone, and the instance proved clean.

exit codes: 0 done: every targeted GPU verified clean, or every chosen process stopped with its
memory released; 1 not done (still held, ghost memory, survived), a host unreachable, or the outcome
unknown; 2 bad usage (also: no terminal to confirm on and no --yes, an audit log path that is not safe); 3 no NVIDIA driver or GPU;
4 refused (read-only host, protected process, permission denied, zombies alone: nothing to signal);
5 not confirmed at the prompt: nothing done; 130 interrupted (Ctrl+C): what was sent is said on stderr, the outcome is unknown.
With --json, "ok" is true exactly when the exit code is 0 (a dry run: every plan could be made).

IDLE: --idle stops the idle holders: processes that hold GPU memory at 0% SM for --idle-minutes (the
config's [idle] minutes, else 10). A clean has no history: it watches the hosts that long first,
sampling once a second, and stops what stayed idle all that time (with --user, only that user's).

RESET: --reset-gpu N says whether GPU N needs a reset at all (only orphaned memory does), each
blocker on its own line with what to do about it, and the ladder's steps; exit 4 while anything
blocks it (the dry run too), else 0.

Every plan, signal and verdict is recorded in the audit log, before the signal is sent and after."""


def parser() -> argparse.ArgumentParser:
    parts = (options.add_hosts, options.add_ascii, add_clean_arguments, options.add_idle_minutes)
    return command_parser("clean", EPILOG, *parts, formatter_class=argparse.RawDescriptionHelpFormatter)


run = runner("clean", parser)


def add_clean_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `gputui clean` (HOST, --demo and --config come from the caller)."""
    if parser.epilog is None:
        parser.epilog = EPILOG
        if parser.formatter_class is argparse.HelpFormatter:
            parser.formatter_class = argparse.RawDescriptionHelpFormatter
    _add_targets(parser)
    _add_how(parser)


def _add_targets(parser: argparse.ArgumentParser) -> None:
    """What to clean: GPUs, processes, jobs, idle holders, a reset."""
    options.add_gpus(parser, "a GPU to clean: NVML index, UUID, HOST:INDEX or HOST:all (repeatable)")
    parser.add_argument(
        "--pid", action="append", type=argtypes.pid, metavar="PID", help="a process to stop (repeatable)"
    )
    parser.add_argument(
        "--job", action="append", metavar="ID", help="a job to stop, by id (its root's PID; repeatable)"
    )
    parser.add_argument(
        "--slurm-job", action="append", metavar="ID", help="stop the jobs of this Slurm job (repeatable)"
    )
    parser.add_argument(
        "--container",
        action="append",
        metavar="NAME",
        help="stop the jobs of this container (LXC id, Docker name, pod; as snapshot shows it; repeatable)",
    )
    parser.add_argument(
        "--pod",
        action="append",
        metavar="NAMESPACE/NAME",
        help="stop the jobs of this Kubernetes pod (its processes' container pod/NAMESPACE/NAME, named from "
        "the node's /var/log/pods; its uid where the node keeps no name; repeatable)",
    )
    parser.add_argument(
        "--user", action="append", metavar="NAME", help="stop this user's jobs and GPU processes (repeatable)"
    )
    options.flag(
        parser,
        "--idle",
        help="stop the idle holders (GPU memory at 0%% SM for --idle-minutes): the hosts are watched "
        "that long first",
    )
    options.flag(parser, "--all", help="every GPU of the named hosts")
    options.flag(
        parser, "--sweep", help="also stop unattributed hidden holders (with --user, only those users')"
    )
    parser.add_argument(
        "--reset-gpu",
        type=argtypes.parse_index_arg,
        metavar="INDEX",
        help="reset this GPU of the named host (for memory no process holds; lists what blocks it first)",
    )
    options.flag(
        parser, "--include-monitor", help="stop the GPU monitors named by --pid too (protected otherwise)"
    )


def _add_how(parser: argparse.ArgumentParser) -> None:
    """How: the signals and their timeouts, how many hosts at once, asking, printing, the log."""
    parser.add_argument(
        "--signals",
        choices=tuple(SIGNAL_PLANS),
        default=None,
        help="term: SIGTERM then SIGKILL (default); int: SIGINT first; kill: SIGKILL at once; "
        "hup, usr1: SIGHUP or SIGUSR1 first (a server that shuts down on it)",
    )
    options.flag(parser, "--sigint-first", help="send SIGINT before SIGTERM (same as --signals int)")
    for flag, what in (  # the config's [kill] timeouts, each a flag
        ("--term-timeout", "after each soft signal before the next (default 5"),
        ("--verify-timeout", "for the outcome to be verified (default 10"),
    ):
        parser.add_argument(
            flag,
            type=argtypes.seconds,
            default=None,
            metavar="S",
            help=f"seconds to wait {what}, or [kill] in the config)",
        )
    options.add_count(
        parser,
        "--parallel",
        4096,
        "a number of hosts",
        PARALLEL,
        "at most N hosts acting at once, the others waiting their turn",
    )
    options.flag(parser, "--yes", "-y", help="do not ask for confirmation")
    options.flag(parser, "--dry-run", help="print the plan and stop")
    options.add_json(parser, CLEAN_JSON)
    options.add_log(parser, "audit log (default: the user state dir)")
    options.add_timeout(parser, "wait this long for each host (default 20)")

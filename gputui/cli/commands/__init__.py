"""The commands of `gputui`, one module each (its options and its run), and the registry that names
them: what `gputui.cli.main` dispatches to, what `gputui --help` lists, what a mistyped first word is
matched against. A command's module is imported only when it runs (`load`): `gputui --help` and each
command's start pay for no other command's imports.

Every command module has `run(argv)` (its exit status) and, but `probe`, `parser()` (its argparse
parser, an `argtypes.Parser`, made by `command_parser`). `dashboard` is what `gputui` runs with no
command. Most commands parse their options, then `run_in` the module that does the work.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

from .. import argtypes


class Command(Protocol):
    """What a command module offers (and, all but `probe`, whose options are the probe's own,
    `parser()`)."""

    def run(self, argv: list[str]) -> int: ...


class ParsedCommand(Command, Protocol):
    def parser(self) -> argparse.ArgumentParser: ...


class Runner(Protocol):
    """What a command runs (a module of gputui.cli): `run(args)`, its exit status."""

    def run(self, args: argparse.Namespace) -> int: ...


@dataclass(frozen=True, slots=True)
class CommandInfo:
    module: str  # under gputui.cli.commands
    summary: str  # the top-level --help's line, and the command's own --help description


# Every command, in the one place (the dashboard, `gputui` alone, is not listed).
SUBCOMMANDS: dict[str, CommandInfo] = {
    "snapshot": CommandInfo("snapshot", "One sample of each host, then exit."),
    "clean": CommandInfo("clean", "Free GPUs: staged kill, then verify."),
    "wait": CommandInfo("wait", "Wait until every chosen GPU is ready for the next run."),
    "pick": CommandInfo("pick", "Choose N GPUs ready for the next run: a CUDA_VISIBLE_DEVICES line."),
    "record": CommandInfo("record", "Record the hosts' samples and plans to a file, for --replay."),
    "export": CommandInfo("export", "The fleet in Prometheus' text format: once, a textfile, or /metrics."),
    "serve": CommandInfo(
        "serve", "Serve the fleet over HTTP: a web page, its API and event stream, /metrics."
    ),
    "demo": CommandInfo("demo", "The simulated cluster that --demo attaches to: start, stop, status."),
    "hosts": CommandInfo("hosts", "List the hosts that specs name (gpu[001-128], @slurm:P...)."),
    "probe": CommandInfo("probe", "The probe itself, as gputui runs it on each host (JSON lines)."),
}
COMMANDS = tuple(SUBCOMMANDS)
DASHBOARD = "dashboard"


def load(name: str) -> Command:
    """The module of command `name` (a key of SUBCOMMANDS, or DASHBOARD), imported now."""
    module = SUBCOMMANDS[name].module if name in SUBCOMMANDS else DASHBOARD
    return cast(Command, importlib.import_module(f"{__name__}.{module}"))


def parser_of(name: str) -> argparse.ArgumentParser:
    """The parser of command `name` (any but `probe`)."""
    return cast(ParsedCommand, load(name)).parser()


def summary(name: str) -> str:
    return SUBCOMMANDS[name].summary


def commands_help() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  gputui {name:<{width}}  {c.summary}" for name, c in SUBCOMMANDS.items()]
    return "\n".join(["other commands (each with --help):", *lines])


Part = Callable[[argparse.ArgumentParser], None]  # adds some options (gputui/cli/options.py's add_*)


def command_parser(
    name: str, exits: str, *parts: Part, description: str | None = None, **kwargs: Any
) -> argtypes.Parser:
    """The parser of `gputui NAME`: its summary (or `description`) first, `exits` (its exit codes
    and what else its --help ends with) last, its options added by each of `parts` in turn (the
    order --help lists them in); `kwargs` as argparse takes them (formatter_class)."""
    p = argtypes.Parser(
        prog=f"gputui {name}", description=description or summary(name), epilog=exits, **kwargs
    )
    for add in parts:
        add(p)
    return p


def runner(name: str, parser: Callable[[], argparse.ArgumentParser]) -> Callable[[list[str]], int]:
    """A command's `run(argv)` where all it does is parse and `run_in` gputui.cli.NAME."""

    def run(argv: list[str]) -> int:
        return run_in(name, parser().parse_args(argv))

    return run


def run_in(runner: str, args: argparse.Namespace) -> int:
    """Run gputui.cli.RUNNER on a command's parsed `args`.

    Imported now, not at the top of the command's module: what a command runs (the fleet, the
    transport, asyncio; Textual, aiohttp or prometheus_client for some) is most of its start, and
    `--help`, `--version` or a usage error need none of it. For the commands with a head start
    (gputui/cli/main.py), this machine's probe starts while it loads."""
    return cast(Runner, importlib.import_module(f"gputui.cli.{runner}")).run(args)

"""`gputui` (the dashboard) and its commands (gputui/cli/commands/: one module each, loaded when it
runs), as cli/entry.py runs them. What is here is dispatch only: the head start of this machine's probe, the
guarded output of the quick commands, the errors every command may end in, a mistyped command.

Exit codes (README "Exit codes", gputui/cli/exits.py): 0 ok; 1 not clean / a host down; 2 bad usage
or config; 3 no NVIDIA driver or GPU; 4 refused (read-only, protected, permission).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Sequence

from ..config.file import ConfigError, HostSpec, default_config_path, load
from ..config.location import ENV_CONFIG
from ..inventory.base import InventoryError
from ..transport import headstart
from . import commands, streams
from .commands import COMMANDS, DASHBOARD, SUBCOMMANDS
from .demo import DemoError
from .exits import Exit
from .quick import INTERVALS, NO_HEAD_START, QUICK_EXIT
from .streams import fail


def value_options(parser: argparse.ArgumentParser) -> frozenset[str]:
    """The options of `parser` that take a value: a word after one is its value, any other word a HOST."""
    return frozenset(
        o for a in parser._actions if a.option_strings and a.nargs != 0 for o in a.option_strings
    )


def head_start(
    args: Sequence[str], environ: os._Environ[str] | dict[str, str] = os.environ
) -> list[str] | None:
    """Start this machine's probe now when `args` (`clean`, `wait` or `snapshot`, no HOST, no demo,
    no config anywhere, the default interval) will need it, so that it starts while the command
    imports the rest (transport/headstart.py). Returns the probe's argv, or None when the command
    line is anything else (then the transport starts the probe, as always). Exact where cli/entry.py
    guessed: a probe the guess started that this command line does not need is told to end."""
    argv = _exact_head_start(args, environ)
    headstart.keep_only(argv)
    if argv is not None:
        headstart.begin(argv)  # nothing to do where the guess started this very probe
    return argv


def _exact_head_start(args: Sequence[str], environ: os._Environ[str] | dict[str, str]) -> list[str] | None:
    if not args or args[0] not in INTERVALS:
        return None
    takes_value = value_options(commands.parser_of(args[0]))
    words = iter(args[1:])
    for word in words:
        if word.partition("=")[0] in NO_HEAD_START:
            return None
        if word in takes_value:
            next(words, None)
        elif not word.startswith("-"):
            return None  # a HOST (or a mistake argparse will explain)
    if environ.get(ENV_CONFIG) or default_config_path().exists():
        return None
    spec = HostSpec(name="local", read_only=args[0] == "wait")  # as the command's resolve_hosts makes it
    if not headstart.direct(sys.executable, spec.sudo, spec.wrap_argv()):
        return None
    return headstart.local_argv(sys.executable, headstart.probe_argv(spec, INTERVALS[args[0]]))


def mistyped_command(args: Sequence[str]) -> str | None:
    """`gputui snapshto`: the first word is no command and no configured host, but close to a
    command; what to say instead of opening an SSH connection to a host named "snapshto"."""
    if not args:
        return None
    word = args[0]
    if word in COMMANDS or word.startswith("-") or any(c in word for c in "@:.[/"):
        return None
    close = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.75)
    if not close or word in _configured_hosts(args):
        return None
    return (
        f"{word!r} is no command (did you mean `gputui {close[0]}`?). To watch a host of that name, "
        f"write `gputui -- {word}` or name it in the config."
    )


def _configured_hosts(args: Sequence[str]) -> set[str]:
    """The host and group names of the config these arguments would load (none when it does not load)."""
    path: str | None = None
    for i, arg in enumerate(args):
        if arg == "--config" and i + 1 < len(args):
            path = args[i + 1]
        elif arg.startswith("--config="):
            path = arg.partition("=")[2]
    try:
        config = load(path)
        return {h.name for h in config.hosts} | set(config.groups)
    except ConfigError:
        return set()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["probe"]:  # its stdout is its protocol, not text for a person: never ASCII mode
        return _main(args)
    with streams.output_mode(args):  # --ascii, or a locale that is not UTF-8
        return _quick_or_not(args)


def _quick_or_not(args: list[str]) -> int:
    if not args or args[0] not in QUICK_EXIT:
        return _main(args)
    # `clean`, `wait` and `snapshot` write through guarded streams (gputui/cli/streams.py): output
    # trouble never stops a plan nor changes its outcome; it is said once, at the end.
    with streams.guard_std() as (out, _err):
        code = _main(args)
    problem = None if out.reported else out.problem()
    if args[0] == "snapshot" and out.trouble is not None:
        code = code or 1  # a snapshot is its output: lost, it failed (as a closed pipe always did)
    if problem is not None:
        if args[0] == "snapshot":
            streams.say(f"gputui: {problem}: the snapshot was not written whole (exit {code})")
        else:
            streams.say(f"gputui: {problem}: output lost; exit {code} is the {args[0]}'s own outcome")
    return code


def _main(args: list[str]) -> int:
    try:
        head_start(args)
        if args and args[0] in SUBCOMMANDS:
            return commands.load(args[0]).run(args[1:])
        mistyped = mistyped_command(args)
        if mistyped is not None:
            return fail(mistyped)
        return commands.load(DASHBOARD).run(args)
    except ConfigError as exc:
        return fail(f"config error: {exc}")
    except InventoryError as exc:  # a host spec that names no hosts, or its source did not answer
        return fail(exc.message, Exit.FAILED if exc.unavailable else Exit.USAGE)
    except DemoError as exc:  # the live demo cannot run: its directory is not private, it did not start
        return fail(str(exc), exc.code)
    except KeyboardInterrupt:
        return Exit.INTERRUPTED
    except BrokenPipeError:
        # Our stdout went away (`gputui snapshot | head -2`): nothing more to say, and nothing that
        # may raise again when the interpreter flushes it at exit.
        _devnull_stdout()
        return 1


def _devnull_stdout() -> None:
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):  # AttributeError: stdout was closed at start (None)
        pass

"""Entry points: `gputui` (the dashboard) and its commands (SUBCOMMANDS: snapshot, clean, wait, record, demo, hosts,
probe).

Exit codes (README "Exit codes"): 0 ok; 1 not clean / a host down; 2 bad usage or config;
3 no NVIDIA driver or GPU; 4 refused (read-only, protected, permission).
"""

from __future__ import annotations

import argparse
import atexit
import difflib
import gc
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from .. import __version__
from ..config.file import ENV_CONFIG, Config, ConfigError, HostSpec, default_config_path, load
from ..inventory.base import InventoryError
from ..model.textsafe import printable
from ..transport import headstart
from . import argtypes, streams
from .demo import DemoError
from .exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NO_GPU, EXIT_USAGE

if TYPE_CHECKING:  # imported where used: `clean`, `wait` and `snapshot` import them while their probe starts
    from ..fleet.fleet import Fleet
    from ..fleet.session import HostView
    from ..recording.player import ReplayPlayer

# The sample interval of each command's fleet; a head start (below) starts the probe with it.
INTERVALS = {"snapshot": 1.0, "clean": 1.0, "wait": 0.25}
# The options of `snapshot`, `clean` and `wait` that take a value (tests/cli/test_headstart.py checks
# this against their parsers): any other word on such a command line is a HOST.
VALUE_OPTIONS = frozenset(
    {
        "--config", "--timeout", "--gpu", "--pid", "--reset-gpu", "--signals", "--term-timeout",
        "--verify-timeout", "--log", "--settle", "--temp-below", "--memory-below", "--util-below",
        "--interval", "--job", "--slurm-job", "--container", "--user", "--watch", "--replay", "--at",
        "--parallel", "--idle-minutes",
    }
)  # fmt: skip
NO_TERMINAL = (
    "the dashboard draws on a terminal, and {what} is not one (a file or a pipe?): it would write "
    "escape codes there until stopped. For the GPUs and processes as text, run `gputui snapshot` "
    "(or `gputui snapshot --json`); to draw anyway, pass --force-tty."
)


# `--demo` without [idle] in the config or --idle-minutes: its notebook kernels hold memory at 0 % SM
# from the start, and a demo should show an idle holder within a minute, not ten.
DEMO_IDLE_MINUTES = 1.0


def _idle_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--idle-minutes",
        type=argtypes.minutes,
        default=None,
        metavar="M",
        help="a process holding GPU memory at 0%% SM this long is an idle holder (default: [idle] "
        "minutes in the config, else 10; 1 with --demo)",
    )


def idle_after(args: argparse.Namespace, config: Config) -> float:
    """Seconds at 0 % SM that make an idle holder: --idle-minutes, the config's [idle] minutes, 1 for
    the demo, else the default (gputui/fleet/idle.py)."""
    from ..fleet.idle import threshold

    minutes = getattr(args, "idle_minutes", None) or config.idle_minutes
    if minutes is None and getattr(args, "demo", False):
        minutes = DEMO_IDLE_MINUTES
    return threshold(minutes)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("hosts", nargs="*", metavar="HOST", help="local, a config name, alias, user@host[:port]")
    p.add_argument("--demo", action="store_true", help="a simulated cluster: real processes, no GPU needed")
    p.add_argument(
        "--config", metavar="PATH", help="TOML config (default: $GPUTUI_CONFIG, then the user dir)"
    )


def ui_parser() -> argparse.ArgumentParser:
    p = argtypes.Parser(
        prog="gputui",
        description="Live GPU memory, utilization and device-file holders; staged kill-and-verify.",
        epilog=commands_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the epilog's table as written
    )
    _common(p)
    p.add_argument("--read-only", action="store_true", help="watch only: no kill action anywhere")
    p.add_argument(
        "--interval",
        type=argtypes.interval,  # the protocol's bounds, as the probe and the config check them
        default=None,
        metavar="S",
        help="seconds between samples (0.1 to 3600)",
    )
    p.add_argument(
        "--no-pace",
        action="store_true",
        help="keep the interval when the app cannot keep up with its hosts (by default the samples "
        "come slower then, up to 8 times, and the status line says so; 64 hosts or more)",
    )
    p.add_argument("--theme", metavar="NAME", help="colour theme (see themes/)")
    p.add_argument("--log", metavar="PATH", help="audit log file (default: the user state dir)")
    p.add_argument(
        "--replay",
        metavar="FILE",
        help="the dashboard on a recording (gputui record): p pause, n step, + and - speed",
    )
    p.add_argument(
        "--force-tty",
        action="store_true",
        help="draw even when stdin or stdout is not a terminal (it is refused otherwise, exit 2)",
    )
    _idle_option(p)
    p.add_argument("--version", action="version", version=f"gputui {__version__}")
    return p


def snapshot_parser() -> argparse.ArgumentParser:
    p = argtypes.Parser(prog="gputui snapshot", description=SUBCOMMANDS["snapshot"].summary)
    _common(p)
    p.add_argument("--json", action="store_true", help="print versioned JSON (schema in README)")
    p.add_argument(
        "--timeout", type=argtypes.seconds, default=20.0, metavar="S", help="wait this long for each host"
    )
    p.add_argument(
        "--watch",
        type=argtypes.interval,
        metavar="S",
        help="again every S seconds (0.1 to 3600) until Ctrl+C: in place on a terminal, else appended",
    )
    p.add_argument("--replay", metavar="FILE", help="from a recording (gputui record), not the hosts")
    p.add_argument(
        "--at",
        metavar="TIME",
        help="with --replay: the state at TIME (HH:MM[:SS], an ISO timestamp, +SECONDS; default: the end)",
    )
    _idle_option(p)
    return p


def resolve_hosts(
    names: Sequence[str], demo: bool, config: Config, read_only: bool = False
) -> list[HostSpec]:
    """Hosts named on the command line (config names first, then ssh-style), else the config's, else
    local (gputui.api.hosts); with --demo, the live demo's."""
    from ..api import hosts

    if demo:
        from dataclasses import replace

        from .demo import demo_hosts

        specs = demo_hosts(names)  # attached to the live demo, started if need be (gputui/cli/demod.py)
        return [replace(s, read_only=True) for s in specs] if read_only or config.read_only else specs
    return hosts(names, config, read_only)


def build_fleet(specs: Sequence[HostSpec], interval: float) -> Fleet:
    from ..api import fleet

    return fleet(specs, interval)


def head_start(
    args: Sequence[str], environ: os._Environ[str] | dict[str, str] = os.environ
) -> list[str] | None:
    """Start this machine's probe now when `args` (`clean`, `wait` or `snapshot`, no HOST, no demo,
    no config anywhere, the default interval) will need it, so that it starts while the command
    imports the rest (transport/headstart.py). Returns the probe's argv, or None when the command
    line is anything else (then the transport starts the probe, as always)."""
    if not args or args[0] not in INTERVALS:
        return None
    words = iter(args[1:])
    for word in words:
        if word in ("--demo", "--config", "--interval", "-h", "--help") or word.startswith(
            ("--config=", "--interval=")
        ):
            return None
        if word.partition("=")[0] in ("--replay", "--at"):  # a recording: no probe at all
            return None
        if word in VALUE_OPTIONS:
            next(words, None)
        elif not word.startswith("-"):
            return None  # a HOST (or a mistake argparse will explain)
    if environ.get(ENV_CONFIG) or default_config_path().exists():
        return None
    spec = HostSpec(name="local", read_only=args[0] == "wait")  # as resolve_hosts makes it, below
    if not headstart.direct(sys.executable, spec.sudo, spec.wrap_argv()):
        return None
    argv = headstart.local_argv(sys.executable, headstart.probe_argv(spec, INTERVALS[args[0]]))
    headstart.begin(argv)
    return argv


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    # Messages quote the user's words and what sources said: escaped here, whoever made them.
    streams.say(f"gputui: {printable(message)}")
    return code


def run_snapshot(argv: list[str]) -> int:
    import asyncio

    from . import snapshot

    args = snapshot_parser().parse_args(argv)
    if args.replay is not None or args.at is not None:
        from .record import run_snapshot_replay

        return run_snapshot_replay(args)
    config = load(args.config)
    specs = resolve_hosts(args.hosts, args.demo, config)
    fleet = build_fleet(specs, interval=INTERVALS["snapshot"])
    after = idle_after(args, config)
    if args.watch is not None:
        return asyncio.run(
            snapshot.watch(
                fleet, args.watch, args.timeout, json_lines=args.json, out=sys.stdout, idle_after=after
            )
        )
    views = asyncio.run(snapshot.take(fleet, args.timeout))
    if args.json:
        print(snapshot.dumps(views, idle_after=after))
    else:
        snapshot.render(views, sys.stdout, idle_after=after)
    code = snapshot.exit_code(views)
    if code == EXIT_NO_GPU:
        from ..text.words import no_gpu_words
        from ..views.report import host_status

        names = [v.name for v in views if host_status(v)[0] == "no-gpu"]
        where = no_gpu_words(names, {s.name for s in specs if s.is_local()})
        print(f"gputui: {where}; `gputui snapshot --demo` shows a simulated cluster", file=sys.stderr)
    return code


def clean_parser() -> argparse.ArgumentParser:
    from . import clean

    p = argtypes.Parser(prog="gputui clean", description=SUBCOMMANDS["clean"].summary)
    _common(p)
    clean.add_clean_arguments(p)
    _idle_option(p)
    return p


def wait_parser() -> argparse.ArgumentParser:
    from . import wait

    p = argtypes.Parser(
        prog="gputui wait",
        description=SUBCOMMANDS["wait"].summary,
        epilog="exit codes: 0 ready; 1 timeout (or every host down); 2 bad usage; 3 no NVIDIA driver or GPU",
    )
    _common(p)
    wait.add_wait_arguments(p)
    _idle_option(p)
    return p


def run_clean(argv: list[str]) -> int:
    import asyncio

    from . import clean
    from .recheck import snapshot_commands  # here, as `clean`: imported after the probe's head start

    args = clean_parser().parse_args(argv)
    config = load(args.config)
    hosts, gpu_specs = clean.split_targets(args.hosts)
    args.gpu = list(args.gpu or []) + gpu_specs
    if not hosts:
        # A destructive command names its hosts: without one, this machine, unless a config (or
        # the demo) lists hosts, which must then be named.
        from .demo import demo_names

        listed = demo_names() if args.demo else [s.name for s in config.hosts]
        problem = clean.hosts_problem(hosts, listed, args.demo, config.path)
        if problem is not None:
            return _fail(problem)
        hosts = ["local"]
    specs = resolve_hosts(hosts, args.demo, config)
    fleet = build_fleet(specs, interval=INTERVALS["clean"])
    recheck = snapshot_commands(specs, hosts, args.demo, config)
    return asyncio.run(
        clean.run_clean(args, fleet, kill=config.kill, idle_after=idle_after(args, config), recheck=recheck)
    )


def export_parser() -> argparse.ArgumentParser:
    from . import export as exportcmd

    p = argtypes.Parser(prog="gputui export", description=SUBCOMMANDS["export"].summary)
    _common(p)
    exportcmd.add_export_arguments(p)
    return p


def run_export(argv: list[str]) -> int:
    import asyncio

    from . import export as exportcmd

    args = export_parser().parse_args(argv)
    if args.rules:
        print(exportcmd.rules_text(), end="")  # (nothing where stdout is closed: no traceback)
        return 0
    problem = exportcmd.usage_problem(args)
    if problem is not None:
        return _fail(problem)
    config = load(args.config)
    specs = resolve_hosts(args.hosts, args.demo, config, read_only=True)
    fleet = build_fleet(specs, interval=args.interval)
    return asyncio.run(exportcmd.run_export(args, fleet))


def run_wait(argv: list[str]) -> int:
    import asyncio

    from . import wait

    args = wait_parser().parse_args(argv)
    config = load(args.config)
    specs = resolve_hosts(args.hosts, args.demo, config, read_only=True)
    fleet = build_fleet(specs, interval=args.interval)
    args.idle_after = idle_after(args, config)
    return asyncio.run(wait.run_wait(args, fleet))


def young_threshold(hosts: int) -> int:
    """The young generation's threshold for a fleet of `hosts`: 100 objects a host (about what a
    host's latest sample holds young), from 10,000 up to 100,000 (tune_gc says why)."""
    return max(10_000, min(100_000, 100 * hosts))


def tune_gc(fleet: Fleet | None = None) -> None:
    """Fewer, shorter garbage-collector pauses for the dashboard (docs/BENCHMARKS.md, sections 4, 13).

    At 128 hosts the app holds some 370,000 container objects, most of them Textual's render caches,
    which it renews a few thousand at a time on every paint. With CPython's default thresholds
    (700, 10, 10) that starts a full collection every 3-4 s: a pause of 0.1 s on an idle core (up to
    0.7 s on a busy one), the largest part of the p99 sample-to-screen delay. What start-up made
    (modules, classes, Textual's machinery) is frozen out of every collection.

    The young generation may grow to 10,000 objects before it is collected, and with a fleet to
    100 objects a host, up to 100,000 (`young_threshold`). Its count is what was allocated less
    what was freed, old objects included; a fleet's samples replace what the last ones made, so it
    grows with cyclic garbage alone (it was Textual's strips and caches, some 7,000 objects a second
    at 1,024 hosts, until gputui/ui/acyclic.py: now next to none), while what the hosts' latest
    samples hold stays young: at 1,024 hosts a young collection walked 25,000-95,000 objects
    whatever the threshold. At 10,000 that was two collections a second, 44 ms of every
    second (a ninth of the app's CPU); at 100,000, one every ten seconds or so, 15 ms a second, each
    pause longer (0.15 s at 1,024 hosts; docs/BENCHMARKS.md section 13, "Fourth round"). Two hosts
    have little young state to walk, and at 100,000 they would keep some 8 MiB more garbage waiting.

    With `fleet`: once each host has sent its first sample, what the fleet holds for good (its
    sessions and links, each GPU's history, the screens) is frozen out too, after one full
    collection (so no garbage is frozen with it): at 1,024 hosts a full collection walked some
    410,000 objects, 0.28-0.45 s in which no key is drawn; after, 270,000 (what changed since).
    A frozen object is still freed when its last reference goes; one that later ends up in a cycle
    of garbage (a link dropped for a new one) stays, so what is kept is at most what the fleet held
    at that moment: memory that was in use then, not a leak that grows."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(young_threshold(len(fleet.hosts) if fleet is not None else 0), 10, 10)
    if fleet is None or not fleet.hosts:
        return
    import asyncio  # (here: the entry module stays light for --version and --help)

    waiting = {v.name for v in fleet.hosts}

    def heard(view: HostView, what: str, payload: object) -> None:
        if what != "sample" or not waiting:
            return
        waiting.discard(view.name)
        if not waiting:
            gc.collect()
            gc.freeze()
            asyncio.get_running_loop().call_soon(fleet.unlisten, heard)  # (not while it is called)

    fleet.listen(heard)


def run_ui(argv: list[str]) -> int:
    args = ui_parser().parse_args(argv)
    # SIGHUP, SIGTERM and a lost terminal end the dashboard within a second from here on, whatever
    # it is doing (gputui/ui/terminal.py): installed before the app or any probe starts.
    from ..ui.terminal import Lifeline

    lifeline = Lifeline()
    lifeline.install()
    # Library warnings (asyncssh logs connection failures) must not print over the TUI: the UI
    # shows each host's state and reason itself.
    logging.getLogger("asyncssh").addHandler(logging.NullHandler())
    logging.getLogger("asyncssh").propagate = False
    config = load(args.config)
    replay = None
    if args.replay is not None:
        if args.hosts or args.demo:
            return _fail("--replay shows a recording: it takes no HOST and no --demo")
        from .record import REPLAY_INTERVAL, open_replay

        opened = open_replay(args.replay)  # before the terminal is checked: a bad file says so first
        if isinstance(opened, str):
            return _fail(opened)
        replay, fleet = opened
        args.interval = REPLAY_INTERVAL
    else:
        specs = resolve_hosts(args.hosts, args.demo, config, read_only=args.read_only)
    interval = args.interval or config.interval or 1.0
    theme = args.theme or config.theme
    if theme:
        from ..ui.themes import bundled_themes_dir, load_themes, theme_problem

        problem = theme_problem(theme, load_themes(bundled_themes_dir()))
        if problem is not None:
            where = "--theme" if args.theme else f"theme in {config.path}" if config.path else "theme"
            return _fail(f"{where}: {problem}")
    if not args.force_tty:
        for what, stream in (("stdout", sys.stdout), ("stdin", sys.stdin)):
            if stream is None or not stream.isatty():
                return _fail(NO_TERMINAL.format(what=what))
    if replay is None:
        fleet = build_fleet(specs, interval)
    from ..ui.factory import make_app

    app = make_app(
        fleet,
        read_only=args.read_only or config.read_only or replay is not None,
        interval=interval,
        theme=theme,
        log_path=args.log,
        kill=config.kill,
        hidden_columns=config.hidden_columns,
        lifeline=lifeline,
        **_replayed(replay),
        idle_after=idle_after(args, config),
        pace=replay is None and not args.no_pace,
    )
    tune_gc(fleet if replay is None else None)
    app.run()
    if replay is not None:
        replay.reader.close()
        if replay.problem and not app.return_code:
            return _fail(f"the replay stopped: {replay.problem}", 1)
    return int(app.return_code or 0)


def _replayed(replay: ReplayPlayer | None) -> dict[str, Any]:
    """make_app's arguments for a replay: its controls, and its recorded time as the app's clock."""
    return {} if replay is None else {"clock": replay.now, "replay": replay}


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
            return SUBCOMMANDS[args[0]].run(args[1:])
        mistyped = mistyped_command(args)
        if mistyped is not None:
            return _fail(mistyped)
        return run_ui(args)
    except ConfigError as exc:
        return _fail(f"config error: {exc}")
    except InventoryError as exc:  # a host spec that names no hosts, or its source did not answer
        return _fail(exc.message, EXIT_FAILED if exc.unavailable else EXIT_USAGE)
    except DemoError as exc:  # the live demo cannot run: its directory is not private, it did not start
        return _fail(str(exc), exc.code)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # Our stdout went away (`gputui snapshot | head -2`): nothing more to say, and nothing that
        # may raise again when the interpreter flushes it at exit.
        _devnull_stdout()
        return 1


def run_demo(argv: list[str]) -> int:
    from .democtl import run_demo as demo_main

    return demo_main(argv)


def run_record(argv: list[str]) -> int:
    from .record import run_record as record_main

    return record_main(argv)


def run_hosts(argv: list[str]) -> int:
    from . import hosts as hostscmd

    return hostscmd.run(argv, SUBCOMMANDS["hosts"].summary)


def run_probe(argv: list[str]) -> int:
    from ..probe.main import main as probe_main

    return probe_main(argv)


@dataclass(frozen=True, slots=True)
class Subcommand:
    run: Callable[[list[str]], int]
    summary: str  # the top-level --help's line, and the command's own --help description


# Every command, in the one place: what main() runs, what `gputui --help` lists, what a mistyped
# first word is matched against (it listed "snapshot | clean | probe" when `wait` came).
SUBCOMMANDS: dict[str, Subcommand] = {
    "snapshot": Subcommand(run_snapshot, "One sample of each host, then exit."),
    "clean": Subcommand(run_clean, "Free GPUs: staged kill, then verify."),
    "wait": Subcommand(run_wait, "Wait until every chosen GPU is ready for the next run."),
    "record": Subcommand(run_record, "Record the hosts' samples and plans to a file, for --replay."),
    "export": Subcommand(run_export, "The fleet in Prometheus' text format: once, a textfile, or /metrics."),
    "demo": Subcommand(run_demo, "The simulated cluster that --demo attaches to: start, stop, status."),
    "hosts": Subcommand(run_hosts, "List the hosts that specs name (gpu[001-128], @slurm:P...)."),
    "probe": Subcommand(run_probe, "The probe itself, as gputui runs it on each host (JSON lines)."),
}
COMMANDS = tuple(SUBCOMMANDS)


def commands_help() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  gputui {name:<{width}}  {c.summary}" for name, c in SUBCOMMANDS.items()]
    return "\n".join(["other commands (each with --help):", *lines])


# Commands that scripts run between two benchmark runs, whose exit is part of that gap.
QUICK_EXIT = ("snapshot", "clean", "wait")


def entry() -> NoReturn:
    """The `gputui` command and `python -m gputui`: `main`, then the exit. After `clean`, `wait` and
    `snapshot` it skips the interpreter's own teardown (every module and object freed one by one:
    20-60 ms, a tenth of a `clean`), once what that teardown is for has been done here: the exit
    handlers run (an unused head-start probe is ended and reaped), stdout and stderr flushed. Every
    file these commands write (the audit log) is closed before `main` returns; with a thread still
    running, the interpreter exits as usual and waits for it."""
    streams.sanitise_std_fds()
    code = main()
    command = sys.argv[1] if len(sys.argv) > 1 else None
    if command in QUICK_EXIT and not any(
        t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()
    ):
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:  # None: closed when the process started (`>&-`)
                    stream.flush()
            except (OSError, ValueError):
                pass  # a closed pipe (`| head`): nothing more can be said there
        os._exit(code)
    sys.exit(code)


def _devnull_stdout() -> None:
    import os

    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):  # AttributeError: stdout was closed at start (None)
        pass


if __name__ == "__main__":
    entry()

"""The dashboard's start: its hosts or recording, its theme, a terminal to draw on, the garbage
collector tuned for it, then the Textual app (gputui/ui/factory.py)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
from typing import Any

from ..config.file import Config, load
from ..fleet.fleet import Fleet
from ..fleet.session import FleetEvent, SampleArrived
from ..recording.player import ReplayPlayer
from ..text.glyphs import shows_unicode
from ..ui.factory import make_app
from ..ui.terminal import LOST_STATUS, Lifeline, hung_up
from ..ui.themes import bundled_themes_dir, load_themes, theme_problem
from . import options
from .demo import check_demo_names
from .fleets import build_fleet, over_ssh, resolve_hosts
from .gpuspec import take_positional_gpus
from .replay import REPLAY_INTERVAL, open_replay
from .streams import fail

HUNG_UP = "the terminal hung up ({what} is a terminal that is gone): nothing to draw on"
NO_TERMINAL = (
    "the dashboard draws on a terminal, and {what} is not one (a file or a pipe?): it would write "
    "escape codes there until stopped. For the GPUs and processes as text, run `gputui snapshot` "
    "(or `gputui snapshot --json`); to draw anyway, pass --force-tty."
)


def run(args: argparse.Namespace) -> int:
    # SIGHUP, SIGTERM and a lost terminal end the dashboard within a second from here on, whatever
    # it is doing (gputui/ui/terminal.py): installed before the app or any probe starts.
    lifeline = Lifeline()
    lifeline.install()
    # Library warnings (asyncssh logs connection failures) must not print over the TUI: the UI
    # shows each host's state and reason itself.
    logging.getLogger("asyncssh").addHandler(logging.NullHandler())
    logging.getLogger("asyncssh").propagate = False
    return _run(args, lifeline)


def _run(args: argparse.Namespace, lifeline: Lifeline) -> int:
    take_positional_gpus(args)  # `gputui gpu-a:2`: gpu-a, filtered on its GPU 2 (as --gpu gpu-a:2)
    config = load(args.config)
    replay = None
    if args.replay is not None:
        if args.hosts or args.demo or args.hub:
            return fail("--replay shows a recording: it takes no HOST, no --demo and no --hub")
        opened = open_replay(args.replay)  # before the terminal is checked: a bad file says so first
        if isinstance(opened, str):
            return fail(opened)
        replay, fleet = opened
        args.interval = REPLAY_INTERVAL
        hosts = [v.name for v in fleet.hosts]
    # Every refusal of the command line before the hosts are resolved (the demo started, a hub read).
    problem = _theme_problem(args, config)
    if problem is None and replay is None and args.demo and not args.hub:
        check_demo_names(args.hosts)
        problem = options.demo_gpu_problem(args)
    if problem is not None:
        return fail(problem)
    # No terminal is said before the demo starts (it lives on after this command), else after the
    # hosts are resolved: a host list that cannot be read is the first thing to hear (exit 2).
    starts_demo = replay is None and args.demo and not args.hub
    refused = _no_terminal(args, lifeline) if starts_demo else None
    if refused is not None:
        return refused
    if replay is None:
        specs = resolve_hosts(
            args.hosts,
            args.demo,
            config,
            read_only=args.read_only,
            hub=args.hub,
            token_file=args.hub_token_file,
        )
        hosts = [s.name for s in specs]
    problem = options.unknown_gpu_host(args, hosts)
    if problem is not None:
        return fail(problem)
    refused = None if starts_demo else _no_terminal(args, lifeline)
    if refused is not None:
        return refused
    interval = args.interval or config.interval or 1.0
    theme = args.theme or config.theme
    read_only = args.read_only or config.read_only or replay is not None
    if replay is None:
        fleet = build_fleet(specs, interval)
    app = make_app(
        fleet,
        read_only=read_only,
        interval=interval,
        over_ssh=over_ssh(fleet, specs, interval, read_only) if replay is None else None,
        theme=theme,
        log_path=args.log,
        kill=config.kill,
        hidden_columns=config.hidden_columns,
        lifeline=lifeline,
        **_replayed(replay),
        idle_after=options.idle_after(args, config),
        pace=replay is None and not args.no_pace,
        ascii_only=args.ascii or not shows_unicode(),
        start_filter=options.filter_text(args),
    )
    tune_gc(fleet if replay is None else None)
    app.run()
    if replay is not None:
        replay.reader.close()
        if replay.problem and not app.return_code:
            return fail(f"the replay stopped: {replay.problem}", 1)
    return int(app.return_code or 0)


def _theme_problem(args: argparse.Namespace, config: Config) -> str | None:
    theme = args.theme or config.theme
    if theme:
        problem = theme_problem(theme, load_themes(bundled_themes_dir()))
        if problem is not None:
            where = "--theme" if args.theme else f"theme in {config.path}" if config.path else "theme"
            return f"{where}: {problem}"
    return None


def _no_terminal(args: argparse.Namespace, lifeline: Lifeline) -> int | None:
    """The exit when there is no terminal to draw on (before the hosts are resolved); else None."""
    if not args.force_tty:
        for what, stream in (("stdout", sys.stdout), ("stdin", sys.stdin)):
            if stream is None or not stream.isatty():
                # A terminal that hung up is no terminal either: then the hangup is why it ends.
                ending = lifeline.signalled()
                if ending is None and hung_up(stream):
                    ending = fail(HUNG_UP.format(what=what), LOST_STATUS)
                return ending if ending is not None else fail(NO_TERMINAL.format(what=what))
    return None


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
    waiting = {v.name for v in fleet.hosts}

    def heard(change: FleetEvent) -> None:
        if not isinstance(change, SampleArrived) or not waiting:
            return
        waiting.discard(change.view.name)
        if not waiting:
            gc.collect()
            gc.freeze()
            asyncio.get_running_loop().call_soon(fleet.unlisten, heard)  # (not while it is called)

    fleet.listen(heard)


def _replayed(replay: ReplayPlayer | None) -> dict[str, Any]:
    """make_app's arguments for a replay: its controls, and its recorded time as the app's clock."""
    return {} if replay is None else {"clock": replay.now, "replay": replay}

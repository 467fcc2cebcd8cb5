"""`gputui snapshot`: one sample of every host, as a table for people or versioned JSON for scripts;
with `--watch S`, again every S seconds until Ctrl+C (as `gpustat -i`).

The text and the JSON document (schema version 1) are gputui.views.report's, which the dashboard's export
writes too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import signal
import sys
import time
from typing import TextIO

from ..config.file import idle_threshold as threshold
from ..config.file import load
from ..fleet.fleet import Fleet
from ..fleet.session import DOWN, HostView
from ..model import NO_GPU_CODES
from ..model.textsafe import cut
from ..text.words import no_gpu_words, terminal_size
from ..views.filter import Query, parse
from ..views.narrow import Narrowing, narrow
from ..views.report import SCHEMA_VERSION, as_json, dumps, host_status, render
from .exits import STOPS, Exit, stop_signals
from .fleets import build_fleet, resolve_hosts
from .gpuspec import take_positional_gpus
from .options import demo_gpu_problem, filter_text, filter_words, idle_after, unknown_gpu_host
from .quick import INTERVALS
from .streams import fail, for_a_person, warn

__all__ = [
    "NO_GPU_CODES",
    "SCHEMA_VERSION",
    "as_json",
    "dumps",
    "exit_code",
    "host_status",
    "render",
    "take",
    "watch",
]


def run(args: argparse.Namespace) -> int:
    """`gputui snapshot` of live hosts, with its parsed arguments (a positional HOST:N filters on GPU N
    of HOST, as --gpu HOST:N does)."""
    take_positional_gpus(args)
    config = load(args.config)
    problem = demo_gpu_problem(args)  # before the demo is started for nothing
    if problem is not None:
        return fail(problem)
    specs = resolve_hosts(args.hosts, args.demo, config, hub=args.hub, token_file=args.hub_token_file)
    problem = unknown_gpu_host(args, [s.name for s in specs])
    if problem is not None:
        return fail(problem)
    query = parse(filter_text(args))  # the options' types read each value: it reads
    fleet = build_fleet(specs, interval=INTERVALS["snapshot"])
    after = idle_after(args, config)
    if args.watch is not None:
        return asyncio.run(
            watch(
                fleet,
                args.watch,
                args.timeout,
                json_lines=args.json,
                out=sys.stdout,
                idle_after=after,
                query=query,
            )
        )
    views = asyncio.run(take(fleet, args.timeout))
    narrowing = narrowed(views, query, after)
    if args.json:
        print(dumps(views, idle_after=after, narrowing=narrowing))
    else:
        render(views, sys.stdout, idle_after=after, narrowing=narrowing)
    if narrowing is not None and narrowing.empty:
        warn(f"nothing matches {filter_words(args)} (filter: {narrowing.text})")
    code = exit_code(views)
    if code == Exit.NO_GPU:
        names = [v.name for v in views if host_status(v)[0] == "no-gpu"]
        where = no_gpu_words(names, {s.name for s in specs if s.is_local()})
        person = for_a_person(sys.stderr, args.json)
        hint = "; `gputui snapshot --demo` shows a simulated cluster" if person else ""
        print(f"gputui: {where}{hint}", file=sys.stderr)
    return code


def narrowed(views: list[HostView], query: Query, idle_after: float | None) -> Narrowing | None:
    """What `query` leaves of `views` (None: no filter, everything); `idle_after` None: the default."""
    if not query:
        return None
    return narrow(views, query, threshold(None) if idle_after is None else idle_after)


def exit_code(views: list[HostView]) -> int:
    statuses = [host_status(v)[0] for v in views]
    if any(s == DOWN for s in statuses):
        return Exit.DOWN
    if any(s == "no-gpu" for s in statuses):
        return Exit.NO_GPU
    return Exit.OK


async def take(fleet: Fleet, timeout: float) -> list[HostView]:
    fleet.start()
    try:
        await fleet.wait_first_samples(timeout)
    finally:
        await fleet.stop()
    return fleet.hosts


HOME, CLEAR_LINE, CLEAR_BELOW, CLEAR_SCREEN = "\x1b[H", "\x1b[K", "\x1b[J", "\x1b[2J"


async def watch(
    fleet: Fleet,
    every: float,
    timeout: float,
    *,
    json_lines: bool,
    out: TextIO,
    idle_after: float | None = None,
    query: Query | None = None,
) -> int:
    """The snapshot every `every` seconds from one fleet, connected once and kept (no reconnection
    per refresh): on a terminal the screen is redrawn in place (home, each line erased to its end,
    the rest of the screen erased), each line cut to the width and the frame to the height; else
    each refresh is appended under a separator line. With `json_lines`, one JSON document a line (JSON
    lines), never a terminal code. Ends on Ctrl+C (exit 0), SIGTERM or SIGHUP, or when the output
    can no longer be written (exit 1). `idle_after`: seconds at 0 % SM that make an idle holder (the
    streaks grow from frame to frame: gputui/fleet/idle.py). `query`: each frame shows only what it
    matches (gputui/views/narrow.py)."""
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    code = 0

    # How a watch ends: SIGINT (Ctrl+C) is the usual way, and quiet (exit 0); SIGTERM and SIGHUP end it
    # the same orderly way (the probes stopped), with the shell's usual status for them.
    def stop(sig: signal.Signals) -> None:
        nonlocal code
        code = STOPS[sig]
        stopped.set()

    signals = contextlib.ExitStack()
    signals.enter_context(stop_signals(loop, stop))
    tty = not json_lines and bool(getattr(out, "isatty", lambda: False)())
    fleet.start()
    try:
        first = asyncio.ensure_future(fleet.wait_first_samples(timeout))
        await asyncio.wait(
            [first, asyncio.ensure_future(stopped.wait())], return_when=asyncio.FIRST_COMPLETED
        )
        if stopped.is_set():
            first.cancel()
            return code
        # Samples at least as often as the refresh (the fleet starts at the snapshot's 1 s).
        if any(v.interval > every for v in fleet.hosts):
            await fleet.configure(every)
        frame = 0
        while not stopped.is_set():
            started = time.monotonic()
            _draw(
                fleet.hosts,
                out,
                every,
                tty=tty,
                json_lines=json_lines,
                first=frame == 0,
                idle_after=idle_after,
                narrowing=narrowed(fleet.hosts, query, idle_after) if query is not None else None,
            )
            frame += 1
            if getattr(out, "trouble", None) is not None:  # stdout closed, full, or its reader left
                return 1
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stopped.wait(), max(0.0, every - (time.monotonic() - started)))
        return code
    finally:
        signals.close()
        await fleet.stop()
        if tty:
            with contextlib.suppress(OSError, ValueError):
                print(file=out, flush=True)  # the shell's prompt under the last frame, not in it


def _draw(
    views: list[HostView],
    out: TextIO,
    every: float,
    *,
    tty: bool,
    json_lines: bool,
    first: bool,
    idle_after: float | None = None,
    narrowing: Narrowing | None = None,
) -> None:
    if json_lines:
        document = as_json(views, idle_after=idle_after, narrowing=narrowing)
        print(
            json.dumps(document, separators=(",", ":"), ensure_ascii=True),
            file=out,
            flush=True,
        )
        return
    head = f"--- gputui snapshot {time.strftime('%Y-%m-%d %H:%M:%S')} (every {every:g} s; Ctrl+C stops) ---"
    if not tty:
        text = io.StringIO()
        render(views, text, idle_after=idle_after, narrowing=narrowing)
        print(head, file=out)
        print(text.getvalue(), end="", file=out, flush=True)
        return
    columns, lines = terminal_size(out)
    text = io.StringIO()
    render(views, text, width=max(columns - 1, 60), idle_after=idle_after, narrowing=narrowing)
    rows = [head, *text.getvalue().rstrip("\n").splitlines()]
    if len(rows) > lines - 1:  # the frame's end would scroll its start away: say what is left out
        hidden = len(rows) - (lines - 2)
        rows = [*rows[: lines - 2], f"... {hidden} more lines (a taller terminal shows them)"]
    # Home, each line over the last frame's (erased to its end), then the rest of the screen erased:
    # no blank flash between frames, nothing of a longer frame left below a shorter one.
    body = "".join(cut(row, columns - 1) + CLEAR_LINE + "\n" for row in rows)
    print((HOME + CLEAR_SCREEN if first else HOME) + body + CLEAR_BELOW, end="", file=out, flush=True)

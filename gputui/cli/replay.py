"""The CLI's two ways to read a recording (gputui record) back: `gputui snapshot --replay FILE --at
TIME` (the state at a moment) and `gputui --replay FILE` (the dashboard's fleet over it);
docs/RECORDING.md. The format is gputui/recording/format.py's, the players gputui/recording/player.py's.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import math
import os
import sys
from typing import Any

from ..fleet.fleet import Fleet
from ..model.textsafe import printable
from ..recording.format import (
    DEFAULT_MAX_READ,
    Header,
    RecordingError,
    RecordingReader,
    clock_words,
    offset_words,
    parse_at,
    state_at,
)
from ..recording.player import DownLink, ReplayLink, ReplayPlayer
from ..transport.base import Link
from ..views.filter import parse
from . import argtypes, options, snapshot
from .exits import Exit
from .streams import warn

REPLAY_INTERVAL = 3600.0  # a replayed host is never judged stale by the wall clock: paused is paused
MAX_READ_VARIABLE = "GPUTUI_REPLAY_MAX_READ"  # bytes `--at` may expand (docs/RECORDING.md "Seeking")


# -- gputui snapshot --replay FILE --at TIME -----------------------------------------------------------


def snapshot_at(args: argparse.Namespace) -> int:
    """The snapshot document at a moment of a recording: each host's last sample at or before
    TIME, played through a fleet as a live host's records are. Exit codes as `gputui snapshot`'s;
    2 for a recording that cannot be read or a TIME it does not hold."""
    if args.replay is None:
        warn("--at TIME reads a recording: name it with --replay FILE")
        return Exit.USAGE
    if args.demo or args.watch is not None:
        warn("--replay shows a recording: it does not combine with --demo or --watch")
        return Exit.USAGE
    max_read = _max_read()
    if isinstance(max_read, str):
        warn(max_read)
        return Exit.USAGE
    try:
        with RecordingReader(args.replay) as reader:
            header = reader.header
            unknown = [h for h in args.hosts if h not in header.hosts]
            if unknown:
                listed = ", ".join(printable(h) for h in header.hosts[:12])
                warn(f"{printable(unknown[0])} is not in {reader.name} (it recorded {listed})")
                return Exit.USAGE
            at = parse_at(args.at, header) if args.at is not None else math.inf
            if at < header.started:
                warn(
                    f"{_moment(at, header)} is before {reader.name} starts ({_moment(header.started, header)})"
                )
                return Exit.USAGE
            state = state_at(reader, at, max_read=max_read)
            truncated = reader.truncated
            name = reader.name
    except ValueError as exc:
        warn(f"--at {exc}")
        return Exit.USAGE
    except RecordingError as exc:
        warn(str(exc))
        return Exit.USAGE
    last = state.last_t if state.last_t is not None else header.started
    if truncated:
        warn(
            f"{name} is cut short after {_moment(last, header)} (its recorder was stopped before it closed the file)"
        )
    if math.isinf(at):
        at = last
    elif state.past_end and at > last:
        words = "is cut short at" if truncated else "ends at"
        warn(f"{_moment(at, header)} is not in {name}: it {words} {_moment(last, header)}")
        return Exit.USAGE
    fleet = Fleet()
    chosen = [h for h in header.hosts if not args.hosts or h in args.hosts]
    for host in chosen:
        fleet.add(
            host,
            functools.partial(_link_at, state.hosts[host], at, header),
            read_only=True,
            interval=REPLAY_INTERVAL,
        )
    views = asyncio.run(snapshot.take(fleet, args.timeout))
    narrowing = snapshot.narrowed(views, parse(options.filter_text(args)), None)  # --user, --gpu...
    if args.json:
        print(snapshot.dumps(views, now=at, narrowing=narrowing))
    else:
        warn(f"{name} at {_moment(at, header)} ({offset_words(at - header.started)} into the recording)")
        snapshot.render(views, sys.stdout, narrowing=narrowing)
    return snapshot.exit_code(views)


def _max_read() -> int | str:
    """The bytes `--at` may read (GPUTUI_REPLAY_MAX_READ, a size), or what is wrong with the value."""
    text = os.environ.get(MAX_READ_VARIABLE)
    if text is None or not text.strip():
        return DEFAULT_MAX_READ
    try:
        return argtypes.size(text.strip())
    except argparse.ArgumentTypeError as exc:
        return f"{MAX_READ_VARIABLE}: {exc}"


def _moment(t: float, header: Header) -> str:
    return clock_words(t, header)


def _link_at(state: Any, at: float, header: Header) -> Link:
    if state.hello is None:
        return DownLink("timeout", f"no hello recorded by {clock_words(at, header)}")
    if state.down is not None:
        reason, detail = state.down
        return DownLink(reason or "closed", detail or f"down since {clock_words(state.down_t or at, header)}")
    if state.sample is None:
        if state.hello.get("error"):  # a host without a driver or GPU says so in its hello
            return ReplayLink([state.hello], hold=False)
        return DownLink("timeout", f"no sample recorded by {clock_words(at, header)}")
    return ReplayLink([state.hello, state.sample])


# -- gputui --replay FILE ----------------------------------------------------------------------------------


def open_replay(path: str) -> tuple[ReplayPlayer, Fleet] | str:
    """The dashboard's fleet over a recording, and its player (the replay controls); or the one
    line that says why the recording cannot be replayed."""
    try:
        reader = RecordingReader(path)
    except RecordingError as exc:
        return str(exc)
    player = ReplayPlayer(reader)
    fleet = Fleet()
    for host in reader.header.hosts:
        fleet.add(host, functools.partial(player.make_link, host), read_only=True, interval=REPLAY_INTERVAL)
    return player, fleet

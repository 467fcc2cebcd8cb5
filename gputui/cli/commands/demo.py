"""`gputui demo start|stop|status`: the simulated cluster that every `--demo` command attaches to
(gputui/cli/democtl.py starts, attaches to and stops it; gputui/cli/demod.py is its daemon)."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from ...model.textsafe import printable
from .. import options
from ..demo import DemoError
from ..democtl import (
    IDLE_TIMEOUT,
    demo_directory,
    demo_name,
    demo_root,
    ensure_running,
    foreign,
    installation,
    name_argument,
    options_of,
    running,
    schedule_arguments,
    stop,
    touch_used,
)
from ..exits import Exit
from ..streams import fail
from . import command_parser


def parser() -> argparse.ArgumentParser:
    p = command_parser(
        "demo",
        description="The simulated cluster that every `--demo` command attaches to: one per name "
        "(--name, $GPUTUI_DEMO_NAME, else one per installation).",
        exits="exit codes: start: 0 running, 1 did not start; stop: 0 stopped or not running, "
        "1 did not end; status: 0 running, 1 not running; any: 2 bad usage, 4 the demo's directory "
        "is not private (refused)",
    )
    sub = p.add_subparsers(dest="action", metavar="start|stop|status")
    start = sub.add_parser("start", help="start it (the first `--demo` command does too)")
    name_argument(start)
    schedule_arguments(start)
    name_argument(sub.add_parser("stop", help="end it and every process of it"))
    status = sub.add_parser("status", help="whether it runs, its name, PID, directory, hosts, uptime")
    name_argument(status)
    status.add_argument("--json", action="store_true", help="one JSON document")
    for each in (p, *sub.choices.values()):
        options.add_ascii(each)
    return p


def run(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    action = args.action or "status"
    try:
        directory = demo_directory(demo_name(getattr(args, "name", None)), create=action == "start")
        if action == "start":
            state, started = ensure_running(directory, options_of(args))
            touch_used(directory)  # started to be used: the idle timeout counts from now
            word = "started" if started else "already running"
            theirs = foreign(state)
            whose = f", started by another installation: {theirs}" if theirs else ""
            print(f"gputui demo: {word}: '{directory.name}' (PID {state['pid']}, in {directory}{whose})")
            return Exit.OK
        if action == "stop":
            missing = f"the demo '{directory.name}' is not running (in {directory})"
            _, words = stop(directory) if directory.exists() else (False, missing)
            print(f"gputui demo: {words}")
            return Exit.OK
        return _status(directory, getattr(args, "json", False))
    except DemoError as exc:
        return fail(str(exc), exc.code)


def _status(directory: Path, as_json: bool) -> int:
    state = running(directory) if directory.exists() else None
    if as_json:
        doc: dict[str, Any] = {
            "running": state is not None,
            "name": directory.name,
            "directory": str(directory),
        }
        doc["others"] = _others(directory)
        if state is not None:
            doc.update(
                pid=state["pid"],
                installation=state.get("installation"),
                foreign=foreign(state) is not None,
                state=state.get("state"),
                uptime_s=round(time.time() - float(state.get("started") or time.time()), 1),
                hosts=state.get("hosts") or {},
                idle_timeout_s=state.get("idle_timeout_s"),
                refill_after_s=state.get("refill_after_s"),
                bench=state.get("bench"),
            )
        print(json.dumps(doc, indent=2, ensure_ascii=True))  # data: the same in ASCII mode
        return Exit.OK if state is not None else Exit.NOT_RUNNING
    others = ", ".join(_others(directory)) or "none"
    if state is None:
        print(
            f"gputui demo: '{directory.name}' is not running, in {directory} (`gputui demo start`, or any "
            f"`--demo` command, starts it); other demos of yours running: {others}"
        )
        return Exit.NOT_RUNNING
    up = time.time() - float(state.get("started") or time.time())
    print(f"gputui demo: '{directory.name}' running (PID {state['pid']}, up {_duration(up)})")
    print(f"  directory  {directory}")
    theirs = foreign(state)
    if theirs is not None:
        print(
            f"  started by another installation: {printable(theirs)} (this one: {printable(installation())})"
        )
    print(f"  others     {others} (other demos of yours running)")
    for name, host in (state.get("hosts") or {}).items():
        print(f"  {name:<9}  {host.get('gpus')} GPUs, sim in {host.get('directory')}")
    idle = float(state.get("idle_timeout_s") or IDLE_TIMEOUT)
    print(f"  ends       after {_duration(idle)} with no client, or on `gputui demo stop`")
    bench = state.get("bench") or {}
    print(
        f"  jobs       a freed GPU gets its jobs back after {_duration(float(state.get('refill_after_s') or 0))} "
        f"free; {bench.get('host')} GPU {bench.get('gpu')} runs bench.py for {_duration(float(bench.get('run_s') or 0))}, "
        f"then is free for {_duration(float(bench.get('gap_s') or 0))}"
    )
    return Exit.OK


def _others(directory: Path) -> list[str]:
    """The names of the user's other demos that run now."""
    root = demo_root(create=False)
    try:
        names = sorted(entry.name for entry in os.scandir(root) if entry.is_dir(follow_symlinks=False))
    except OSError:
        return []
    return [n for n in names if n != directory.name and running(root / n) is not None]


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"

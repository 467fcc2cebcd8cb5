"""The commands that only look at their hosts and judge them (`wait`, `pick`): the hosts read-only, a
fleet over them, the idle threshold, then the command's judgement on an event loop of its own."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from ..config.file import load
from ..fleet.fleet import Fleet
from .fleets import build_fleet, resolve_hosts
from .options import idle_after


def judge_fleet(
    args: argparse.Namespace, judge: Callable[[argparse.Namespace, Fleet], Coroutine[Any, Any, int]]
) -> int:
    """`judge(args, fleet)` over the command's hosts, read-only; its exit status."""
    config = load(args.config)
    hub, token_file = getattr(args, "hub", None), getattr(args, "hub_token_file", None)
    specs = resolve_hosts(args.hosts, args.demo, config, read_only=True, hub=hub, token_file=token_file)
    fleet = build_fleet(specs, interval=args.interval)
    args.idle_after = idle_after(args, config)
    return asyncio.run(judge(args, fleet))

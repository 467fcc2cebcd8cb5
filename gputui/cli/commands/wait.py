"""`gputui wait`: until every chosen GPU is ready for the next run (gputui/cli/wait.py runs it)."""

from __future__ import annotations

import argparse

from ...views.readiness import DEFAULT_UTIL_BELOW
from .. import argtypes, options
from ..quick import INTERVALS
from ..versions import WAIT_JSON
from . import command_parser, runner

MAX_WAIT = 24 * 3600.0


EPILOG = """\
GPU SPEC: as for clean: an NVML index, a GPU UUID (or a unique prefix), HOST:INDEX or HOST:all; a
positional HOST:N too. A MIG instance's UUID (MIG-..., or a unique prefix) is waited for alone, not
its GPU (whose other instances run other jobs): nothing runs in it, its memory at idle where the
driver reads it with nothing in its GPU instance, and its GPU's health and --temp-below,
--no-throttle, --persistence; --memory-below bounds the instance's memory. Utilization is not judged
(NVML gives none under MIG): --util-below with a MIG instance is refused. --json lists an instance
under its host's "mig" by place (0:1.0: GPU 0, GPU instance 1, compute instance 0), with its UUID.

exit codes: 0 ready; 1 timeout (or every host down); 2 bad usage; 3 no NVIDIA driver or GPU"""


def parser() -> argparse.ArgumentParser:
    parts = (
        options.add_hosts,
        options.add_hub,
        options.add_ascii,
        add_wait_arguments,
        options.add_idle_minutes,
    )
    return command_parser("wait", EPILOG, *parts, formatter_class=argparse.RawDescriptionHelpFormatter)


run = runner("wait", parser)


def add_wait_arguments(p: argparse.ArgumentParser) -> None:
    options.add_gpus(
        p,
        "a GPU, or a MIG instance alone (MIG-...), to wait for (default: every GPU); a positional HOST:N "
        "is one too, as for clean",
    )
    for flag, default, what in (
        ("--timeout", 600.0, "give up after S (default 600; 0: judge once)"),
        ("--settle", 0.0, "ready for S in a row (default 0)"),
    ):
        p.add_argument(flag, type=argtypes.seconds_upto(MAX_WAIT), default=default, metavar="S", help=what)
    p.add_argument(
        "--temp-below",
        type=argtypes.whole(1, 149, "a temperature in whole degrees C"),
        metavar="C",
        help="also: temperature below C degrees (1 to 149)",
    )
    options.add_memory_below(p)
    p.add_argument(
        "--util-below",
        type=argtypes.whole(1, 100, "a percentage"),
        metavar="PCT",
        help=f"utilization below PCT, 1 to 100 (default {DEFAULT_UTIL_BELOW}: zero; a MIG instance has none: refused)",
    )
    options.flag(p, "--no-throttle", help="also: no clock-event (throttle) reason active")
    options.flag(p, "--persistence", help="also: persistence mode on")
    options.add_interval(p, INTERVALS["wait"], "seconds between samples (0.1 to 3600; default 0.25)")
    options.add_json(p, WAIT_JSON)

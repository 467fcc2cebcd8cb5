"""`gputui pick`: choose N GPUs of one host that are ready for the next run, and print them as a
line a shell takes (gputui/cli/pick.py runs it; EPILOG below is its --help).

    gputui pick N [HOST ...] [--demo] [--wait S] [--memory-below SIZE] [--format cvd|json] [--uuid]
"""

from __future__ import annotations

import argparse

from ...model.decode import MAX_GPUS
from .. import argtypes, options
from ..versions import PICK_JSON
from . import command_parser, run_in
from .wait import MAX_WAIT

INTERVAL = 0.25  # seconds between samples while --wait waits, as `wait`'s
FORMATS = ("cvd", "json")

EPILOG = f"""\
READY: as `gputui wait` judges it: no process uses or holds the GPU (monitors aside), its memory at
its idle baseline, none unaccounted for, utilization 0, no clock-event (throttle) reason active; and
a whole GPU (not in MIG mode). --memory-below SIZE: also less than SIZE used.

CHOICE: on the first HOST (in the order given) with N GPUs ready now, or within --wait S; of those,
the N closest together where the driver says how the GPUs are linked (an NVLink first, then a PCIe
switch, a host bridge, a NUMA node), else the lowest indexes. The variable is one host's: run the
line there.

OUTPUT: stdout carries only the line for the shell, `export CUDA_VISIBLE_DEVICES=2,3` (NVML's
indexes, as nvidia-smi's, with CUDA_DEVICE_ORDER=PCI_BUS_ID so that CUDA counts them alike; with
--uuid the GPUs' UUIDs, the same in any order), or with --format json one document (version
{PICK_JSON}) with the host, the GPUs and why the others are not ready. Which host was picked, and
why each other GPU is not ready, go to stderr.

    eval "$(gputui pick 2)" && ./run_benchmark.sh

exit codes: 0 picked; 1 fewer than N GPUs ready on every host (after --wait S; each GPU's reasons
on stderr); 2 bad usage (also: N more than any host has); 3 no NVIDIA driver or GPU; 130
interrupted (Ctrl+C)."""


def parser() -> argparse.ArgumentParser:
    parts = (_add_count, options.add_hosts, options.add_ascii, add_pick_arguments)
    return command_parser("pick", EPILOG, *parts, formatter_class=argparse.RawDescriptionHelpFormatter)


def _add_count(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "count", type=argtypes.whole(1, MAX_GPUS, "a number of GPUs"), metavar="N", help="how many GPUs"
    )


def add_pick_arguments(p: argparse.ArgumentParser) -> None:
    """How long to wait, the condition, the output."""
    p.add_argument(
        "--wait",
        type=argtypes.seconds_upto(MAX_WAIT),
        default=0.0,
        metavar="S",
        help="wait up to S seconds for N ready GPUs on one host (default 0: judge once)",
    )
    options.add_memory_below(p)
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="cvd",
        help="cvd: `export CUDA_VISIBLE_DEVICES=...` (default); json: one JSON document",
    )
    options.flag(p, "--uuid", help="name the GPUs by UUID, not by index")
    options.add_interval(p, INTERVAL, "seconds between samples while waiting (0.1 to 3600; default 0.25)")
    options.add_idle_minutes(p)


def run(argv: list[str]) -> int:
    # Intermixed: `pick 2 --demo demo-a` is N, an option, then a HOST (argparse alone takes N and
    # an empty HOST list at once, and the host after the option is left over).
    # The fleet, the transport and asyncio load only now. Measured on the 2-core dev VM: importing
    # this module takes 72 ms of interpreter and imports, with gputui.cli.pick 129 ms (median of 7),
    # so --help saves ~57 ms.
    return run_in("pick", parser().parse_intermixed_args(argv))

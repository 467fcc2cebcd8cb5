"""`gputui clean` and `gputui wait` run in-process, as the CLI runs them, over fleets of real local
probes (the sim's GPUs): their argument parsers, the fleets, and what they wrote."""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

from gputui.cli.clean import run_clean
from gputui.cli.commands.clean import add_clean_arguments
from gputui.cli.commands.wait import add_wait_arguments
from gputui.cli.demo import demo_specs
from gputui.cli.gpuspec import split_targets
from gputui.cli.wait import run_wait
from gputui.config.file import HostSpec
from gputui.fleet.fleet import Fleet
from gputui.transport.local import LocalLink
from tests.support.hosts import preflight_spec


def parse(*argv: str) -> argparse.Namespace:
    """`gputui clean ARGV...` parsed as the CLI does, GPU specs among the hosts included."""
    p = argparse.ArgumentParser(prog="gputui clean")
    p.add_argument("hosts", nargs="*")
    p.add_argument("--demo", action="store_true")
    add_clean_arguments(p)
    args = p.parse_args(list(argv))
    _, specs = split_targets(args.hosts)
    args.gpu = list(args.gpu or []) + specs
    return args


def fleet_of(specs: list[HostSpec], interval: float = 0.5) -> Fleet:
    """A fleet (not started) of local probes, this interpreter's, one per spec."""
    fleet = Fleet()
    for spec in specs:
        fleet.add(
            spec.name,
            lambda spec=spec: LocalLink(spec, interval=interval, python=sys.executable),
            read_only=spec.read_only,
            interval=interval,
        )
    return fleet


async def clean(
    *argv: str, fleet: Fleet | None = None, stdin: io.StringIO | None = None
) -> tuple[int, str, str]:
    """`gputui clean ARGV...` in-process (the demo's hosts unless a fleet is given): the exit code,
    stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    code = await run_clean(
        parse(*argv), fleet or fleet_of(demo_specs()), stdin=stdin or io.StringIO(), stdout=out, stderr=err
    )
    return code, out.getvalue(), err.getvalue()


def clean_args(tmp_path: Path, *extra: str) -> argparse.Namespace:
    """`gputui clean --yes --json --log TMP/actions.jsonl EXTRA...` as run_clean takes it."""
    p = argparse.ArgumentParser()
    p.add_argument("hosts", nargs="*")
    p.add_argument("--demo", action="store_true")
    p.add_argument("--config")
    add_clean_arguments(p)
    return p.parse_args(["--yes", "--json", "--log", str(tmp_path / "actions.jsonl"), *extra])


def wait_args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("hosts", nargs="*")
    add_wait_arguments(p)
    return p.parse_args(list(argv))


async def wait(*argv: str, fleet: Fleet | None = None) -> tuple[int, dict[str, Any] | None, str, float]:
    """`gputui wait ARGV...` in-process (the preflight host unless a fleet is given): the exit code,
    the JSON document (with --json), every line written, the seconds it took."""
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    code = await run_wait(
        wait_args(*argv), fleet or fleet_of([preflight_spec()], interval=0.25), stdout=out, stderr=err
    )
    took = time.monotonic() - started
    doc = json.loads(out.getvalue()) if "--json" in argv else None
    return code, doc, out.getvalue() + err.getvalue(), took

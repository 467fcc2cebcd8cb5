"""`gputui export`: the fleet in Prometheus' text format, once, as a textfile or served on /metrics
(gputui/cli/export.py runs it; docs/MONITORING.md)."""

from __future__ import annotations

import argparse

from .. import argtypes, options
from ..exportserver import CONNECTIONS
from . import command_parser, runner

DEFAULT_INTERVAL = 5.0  # seconds between samples (and textfile writes): well under a scrape interval


def parser() -> argparse.ArgumentParser:
    return command_parser(
        "export",
        "exit codes: 0 written (--once), or stopped by Ctrl+C or SIGTERM; 1 the metrics could not "
        "be written; 2 bad usage, or --listen could not take its address",
        options.add_hosts,
        add_export_arguments,
    )


run = runner("export", parser)


def add_export_arguments(p: argparse.ArgumentParser) -> None:
    options.flag(
        p,
        "--rules",
        help="print the alerting rules shipped with gputui (for Prometheus' rule_files), then exit",
    )
    options.flag(p, "--once", help="one sample of each host, written once, then exit")
    p.add_argument(
        "--textfile",
        metavar="PATH",
        help="rewrite PATH atomically every --interval (node_exporter's textfile collector reads *.prom)",
    )
    p.add_argument(
        "--listen",
        type=argtypes.listen_address,
        metavar="ADDR:PORT",
        help="serve /metrics and /-/ready on ADDR:PORT (port 0: a free one, said on stderr)",
    )
    options.add_connections(p, CONNECTIONS, "--listen keeps at most N connections open")
    options.add_interval(
        p, DEFAULT_INTERVAL, f"seconds between samples and textfile writes (default {DEFAULT_INTERVAL:g})"
    )
    options.add_timeout(p, "wait this long for each host's first sample before the first write")

"""`gputui hosts SPEC... [--json] [--format text|json|prometheus-sd]`: the hosts that specs name, as
the dashboard, `snapshot`, `clean` and `wait` would watch them, without connecting to any.

Text: one row a host (name, address, user, port, jump, group, source: the config's [defaults]
where a source says nothing), then how many and their hostlist. JSON: {"version": 1, "count": N, "hosts": [...]}. prometheus-sd: Prometheus `file_sd`
targets (`address:PORT`, one entry a host) with the host's name, group and source as labels.
Exit codes as every command's: 0; 2 a spec that names nothing, or a tool it needs is missing;
1 a source that did not answer (Slurm's controller down).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import TextIO

from ...config.file import LOCAL, load
from ...config.hostlist import collapse
from ...inventory.base import ResolvedHost
from ...inventory.sources import SPEC_HELP
from ...inventory.specs import config_host, resolve_hosts, shown, this_machine
from ...text.words import count
from ..argtypes import shown as quoted
from ..options import add_ascii, add_config, flag
from . import command_parser

HOSTS_JSON_VERSION = 1
SD_PORT = 9842  # `gputui export --listen :9842` (docs/MONITORING.md); --sd-port says another
FORMATS = ("text", "json", "prometheus-sd")
COLUMNS = ("name", "address", "user", "port", "jump", "group", "source")
_PORT = re.compile(r"[0-9]{1,5}")  # ASCII digits only: '²' is a digit to str.isdigit


def parser() -> argparse.ArgumentParser:
    p = command_parser(
        "hosts",
        f"SPEC: {SPEC_HELP}. Without one: the config's hosts (else local). docs/FLEET.md has more. "
        "Exit codes: 0 listed; 1 an inventory source did not answer; 2 bad usage (a spec that names no "
        "host, a bad config).",
    )
    p.add_argument("specs", nargs="*", metavar="SPEC", help="hosts, hostlists, @sources, group names")
    add_config(p)
    flag(p, "--json", help="the same as --format json")
    add_ascii(p)
    p.add_argument("--format", choices=FORMATS, default=None, help="text (default), json or prometheus-sd")
    p.add_argument(
        "--sd-port",
        type=_port,
        default=SD_PORT,
        metavar="PORT",
        help=f"the exporters' port in prometheus-sd targets (default {SD_PORT})",
    )
    return p


def _port(text: str) -> int:
    if not _PORT.fullmatch(text) or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{quoted(text)} is not a port number from 1 to 65535")
    return int(text)


def run(argv: list[str], out: TextIO | None = None) -> int:
    args = parser().parse_args(argv)
    if args.json and args.format not in (None, "json"):
        parser().error(f"--json and --format {args.format} say different things")
    fmt = "json" if args.json else (args.format or "text")
    config = load(args.config)
    if args.specs:
        entries = {h.name: h for h in config.hosts}
        hosts = [shown(h, config, entries) for h in resolve_hosts(args.specs, config)]
    elif config.hosts:
        hosts = [config_host(h) for h in config.hosts]
    else:
        hosts = [ResolvedHost(LOCAL, LOCAL)]
    stream = out or sys.stdout
    if fmt == "json":
        doc = {"version": HOSTS_JSON_VERSION, "count": len(hosts), "hosts": [h.describe() for h in hosts]}
        print(json.dumps(doc, indent=2, ensure_ascii=True), file=stream)
    elif fmt == "prometheus-sd":
        print(json.dumps(file_sd(hosts, args.sd_port), indent=2, ensure_ascii=True), file=stream)
    else:
        for line in table(hosts):
            print(line, file=stream)
    return 0


def file_sd(hosts: Sequence[ResolvedHost], port: int) -> list[dict[str, object]]:
    """Prometheus file_sd: one target group a host, so each keeps its own labels."""
    out: list[dict[str, object]] = []
    for h in hosts:
        address = "localhost" if this_machine(h) else h.address
        if ":" in address:  # IPv6
            address = f"[{address}]"
        labels = {"gputui_host": h.name}
        if h.group:
            labels["gputui_group"] = h.group
        if h.source:
            labels["gputui_source"] = h.source
        out.append({"targets": [f"{address}:{port}"], "labels": labels})
    return out


def table(hosts: Sequence[ResolvedHost]) -> list[str]:
    rows = [[_cell(getattr(h, c)) for c in COLUMNS] for h in hosts]
    head = [c.upper() for c in COLUMNS]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(COLUMNS))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in [head, *rows]]
    names = _cell(collapse(h.name for h in hosts))  # escaped as a cell is: a name is untrusted
    shown = names if len(names) <= 200 else names[:197] + "..."
    lines.append(f"{count(len(hosts), 'host')}: {shown}")
    return lines


def _cell(value: object) -> str:
    if value is None or value == "":
        return "-"
    text = str(value)
    return "".join(c if c.isprintable() else "?" for c in text)

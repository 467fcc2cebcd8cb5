"""`gputui serve`: one fleet served over HTTP to any number of browsers and terminals: the page, the
snapshot, the event stream, /metrics (gputui/cli/serve.py runs it; docs/SERVE.md)."""

from __future__ import annotations

import argparse

from .. import argtypes, options
from ..exportserver import CONNECTIONS
from . import command_parser, runner

DEFAULT_LISTEN = "127.0.0.1:8765"
DEFAULT_INTERVAL = 1.0  # seconds between samples: what the page and attached dashboards show


def parser() -> argparse.ArgumentParser:
    return command_parser(
        "serve",
        "exit codes: 0 stopped by Ctrl+C or SIGTERM; 2 bad usage (a public --listen without "
        "--tokens, a bad tokens file or TLS file), or --listen could not take its address",
        options.add_hosts,
        add_serve_arguments,
    )


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    """Where and to whom it serves (--listen, --tokens, TLS), what viewers may do, how often it samples."""
    p.add_argument(
        "--listen",
        type=argtypes.listen_address,
        default=argtypes.listen_address(DEFAULT_LISTEN),
        metavar="ADDR:PORT",
        help=f"serve on ADDR:PORT (default {DEFAULT_LISTEN}; port 0: a free one, said on stderr); an "
        "address other than loopback needs --tokens",
    )
    p.add_argument(
        "--tokens",
        metavar="FILE",
        help="require a bearer token: FILE has one `NAME ROLE SHA256HEX` a line (ROLE viewer or operator)",
    )
    p.add_argument(
        "--new-token",
        metavar="NAME",
        help="print a new random token for NAME and the line to add to the --tokens file, then exit",
    )
    p.add_argument(
        "--role",
        choices=("viewer", "operator"),
        default="viewer",
        help="--new-token's role (default viewer: sees everything, acts on nothing)",
    )
    options.flag(
        p,
        "--allow-actions",
        help="let operator tokens act (kill, through the hub's own plans; needs --tokens); hosts are read-only otherwise",
    )
    p.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate chain (PEM)")
    p.add_argument("--tls-key", metavar="FILE", help="and this private key (PEM)")
    options.add_connections(p, CONNECTIONS, "at most N requests and streams at once")
    options.add_idle_minutes(p)
    options.add_interval(
        p, DEFAULT_INTERVAL, f"seconds between each host's samples (default {DEFAULT_INTERVAL:g})"
    )


# aiohttp, the fleet and the hub load only as it runs: this module loads in 80 ms without them, 270 ms
# with them (dev VM).
run = runner("serve", parser)

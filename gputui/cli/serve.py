"""`gputui serve`: the fleet it watches, served over HTTP (docs/SERVE.md).

    gputui serve [HOST...] [--demo] [--listen ADDR:PORT]      the page, the API, the stream, /metrics
    gputui serve ... --listen 0.0.0.0:8765 --tokens FILE      on every interface: tokens required
    gputui serve --new-token NAME [--role operator]           a token, and its line for the file

The hub is gputui.serve: an aiohttp server on the asyncio loop that runs the fleet, so a request
reads the fleet's state where it is written, with no thread between.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import socket
import ssl
from pathlib import Path

from aiohttp import web

from ..config.file import load
from ..config.userfile import FileRefused, open_regular
from ..fleet.fleet import Fleet
from ..model.textsafe import printable
from ..serve.actions import add_routes as add_action_routes
from ..serve.app import Settings, make_app
from ..serve.listen import HubRunner, bind_all
from ..serve.stream import Hub
from ..serve.tokens import TokenError, Tokens, check_name, new_token, token_line
from ..serve.tokens import load as load_tokens
from .exits import Exit, stop_signals
from .exportserver import BACKLOG
from .fleets import build_fleet, resolve_hosts
from .options import idle_after
from .streams import fail, say

SHUTDOWN = 1.0  # seconds the open streams get to end when the hub stops
WHO = "gputui serve"  # how its lines begin, its refusals' too (as pick's, wait's and demo's do)


def is_loopback(host: str) -> bool:
    """Whether `host` is reached from this machine only (a name other than localhost is not trusted
    to be: it may resolve anywhere)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """A server context with `cert` and `key` loaded. Raises ValueError with one line. Each is
    opened first as a regular file (a FIFO would block the load until a writer came, past Ctrl+C),
    and loaded through that descriptor, so what was checked is what is read."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    fds: list[int] = []
    try:
        for option, path in (("--tls-cert", cert), ("--tls-key", key)):
            try:
                fds.append(open_regular(path))
            except FileRefused as exc:
                raise ValueError(f"{option} {printable(path)}: {exc.reason}") from None
        context.load_cert_chain(*(_fd_path(fd, path) for fd, path in zip(fds, (cert, key), strict=True)))
    except (OSError, ssl.SSLError) as exc:
        words = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)
        raise ValueError(
            f"--tls-cert {printable(cert)} --tls-key {printable(key)}: {printable(str(words))}"
        ) from exc
    finally:
        for fd in fds:
            os.close(fd)
    return context


def _fd_path(fd: int, path: str) -> str:
    """A name for the open file `fd` that ssl can load (it takes names only): /dev/fd/N, which opens
    that same file, where the system has it (Linux, macOS); else `path` itself."""
    return f"/dev/fd/{fd}" if os.path.isdir("/dev/fd") else path


def new_token_text(name: str, role: str) -> str:
    token = new_token()
    return (
        f"token for {name} ({role}); give it to them, it is not kept anywhere:\n{token}\n"
        f"add this line to the --tokens file:\n{token_line(name, role, token)}\n"
    )


def usage_problem(args: argparse.Namespace) -> str | None:
    host, _ = args.listen
    if (args.tls_cert is None) != (args.tls_key is None):
        return "--tls-cert and --tls-key go together"
    if args.allow_actions and args.tokens is None:
        # Each action is logged with the operator whose token asked for it: with no tokens the hub
        # would offer actions and refuse every one (serve/actions.py).
        return "--allow-actions needs --tokens FILE: an action is taken for an operator's token only"
    if args.tokens is None and not is_loopback(host):
        return (
            f"--listen {printable(host)}: not a loopback address; the fleet would be open to anyone: "
            "give --tokens FILE (gputui serve --new-token NAME makes one)"
        )
    return None


def run(args: argparse.Namespace) -> int:
    """`gputui serve` with its parsed arguments."""
    if args.new_token is not None:
        problem = check_name(args.new_token)
        if problem is not None:
            return fail(f"--new-token: {problem}", who=WHO)
        print(new_token_text(args.new_token, args.role), end="")
        return Exit.OK
    problem = usage_problem(args)
    if problem is not None:
        return fail(problem, who=WHO)
    tokens: Tokens | None = None
    try:
        tokens = load_tokens(Path(args.tokens)) if args.tokens is not None else None
    except TokenError as exc:
        return fail(f"--tokens {exc}", who=WHO)  # the file's path and line begin its words
    try:
        context = tls_context(args.tls_cert, args.tls_key) if args.tls_cert is not None else None
    except ValueError as exc:
        return fail(str(exc), who=WHO)  # names --tls-cert and --tls-key itself
    host, port = args.listen
    try:  # bound before anything is started (the demo, a host's probe): a refusal leaves nothing
        socks = bind_all(host, port, BACKLOG)
    except OSError as exc:
        return fail(f"--listen {host}:{port}: {exc.strerror or exc}", who=WHO)
    try:
        config = load(args.config)
        settings = Settings(tokens=tokens, allow_actions=args.allow_actions, connections=args.connections)
        specs = resolve_hosts(args.hosts, args.demo, config, read_only=not args.allow_actions)
        fleet = build_fleet(specs, interval=args.interval)
        hub = Hub(fleet, args.interval, idle_after(args, config))
        return asyncio.run(serve(args, fleet, hub, settings, context, socks))
    finally:
        for sock in socks:
            sock.close()


def url(runner: web.AppRunner, tls: bool) -> str:
    addresses = runner.addresses
    host, port = (str(addresses[0][0]), int(addresses[0][1])) if addresses else ("?", 0)
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}/"


async def serve(
    args: argparse.Namespace,
    fleet: Fleet,
    hub: Hub,
    settings: Settings,
    context: ssl.SSLContext | None,
    socks: list[socket.socket],
) -> int:
    """The hub until a stop signal: the fleet, its frames, the server on `socks` (bound: bind_all)."""
    host, port = args.listen
    app = make_app(settings, hub)
    add_action_routes(app, getattr(args, "log", None))  # POST /api/v1/actions (--allow-actions)
    runner = HubRunner(app, SHUTDOWN)  # clients held to export's rules: a whole request in 5 s, quiet notices
    await runner.setup()
    try:
        try:
            for sock in socks:
                await web.SockSite(runner, sock, ssl_context=context, backlog=BACKLOG).start()
        except OSError as exc:
            say(f"{WHO}: --listen {printable(host)}:{port}: {printable(str(exc.strerror or exc))}")
            return Exit.USAGE
        stopped = asyncio.Event()
        with stop_signals(asyncio.get_running_loop(), lambda _sig: stopped.set()):
            fleet.start()
            hub.start()
            try:
                say(f"{WHO}: serving {url(runner, context is not None)}")
                await stopped.wait()
            finally:
                await runner.cleanup()  # the streams end first: nothing reads the fleet after
                await hub.stop()
                await fleet.stop()
        return Exit.OK
    finally:
        await runner.cleanup()  # (again: nothing to do when it was done)

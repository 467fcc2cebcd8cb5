"""`gputui export`: the fleet it watches in Prometheus' text format (docs/MONITORING.md).

    gputui export [HOST...] [--demo] --once                 print it once, then exit
    gputui export [HOST...] --textfile PATH [--once]        rewrite PATH every --interval (atomically)
    gputui export [HOST...] --listen ADDR:PORT              serve /metrics, /-/ready and /-/healthy
    gputui export --rules                                   print the alerting rules shipped with it

The families are gputui.views.metrics', built from the fleet's latest state when they are asked for (a
scrape, a write): nothing is cached between two. The HTTP side is gputui.cli.exportserver (a bounded
server: requests read on a loop of its own, answered by a few threads) with prometheus_client's WSGI
app for /metrics (content negotiation, gzip); the fleet lives on the asyncio loop, and a scrape asks
the loop for the families, so a scrape never reads a host's state while the loop is changing it.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import errno
import os
import socket
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from prometheus_client import generate_latest, make_wsgi_app
from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from ..config.file import load
from ..fleet.fleet import Fleet
from ..model.textsafe import printable
from ..views.metrics import FleetCollector, all_heard, registry
from .exits import Exit, stop_signals
from .exportserver import CONNECTIONS, ExportServer, WsgiApp, bind
from .fleets import build_fleet, resolve_hosts
from .streams import fail, say

# What asking the loop can end in: it is busy past the timeout (concurrent.futures' own TimeoutError
# on Python 3.10), it cancelled the request, or it has stopped.
UNANSWERED = (TimeoutError, concurrent.futures.TimeoutError, concurrent.futures.CancelledError, RuntimeError)
ON_LOOP_TIMEOUT = 10.0  # seconds a scrape waits for the loop to build the families
ROUTES = (
    "gputui export: /metrics (Prometheus text), /-/ready (200 once every host is heard from), /-/healthy\n"
)


RULES = "rules/gputui.rules.yml"  # in the package: docs/MONITORING.md "Alert rules"


def rules_text() -> str:
    """The alerting rules shipped in the package (gputui/rules/gputui.rules.yml)."""
    return (resources.files("gputui") / RULES).read_text(encoding="utf-8")


def usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the command line argparse cannot tell, in words; None when nothing."""
    if not (args.once or args.textfile or args.listen):
        return "say where the metrics go: --once (stdout), --textfile PATH or --listen ADDR:PORT"
    if args.once and args.listen:
        return "--once and --listen do not go together (a server runs until stopped)"
    if args.textfile is not None:
        path = Path(args.textfile)
        if not path.name or path.is_dir():
            return f"--textfile {printable(args.textfile)}: a directory, not a file"
        if not path.parent.is_dir():
            return f"--textfile {printable(args.textfile)}: no directory {printable(str(path.parent))}"
        problem = textfile_problem(path)
        if problem is not None:
            return f"--textfile {printable(args.textfile)}: {problem}"
    return None


def run(args: argparse.Namespace) -> int:
    """`gputui export` with its parsed arguments."""
    if args.rules:
        print(rules_text(), end="")  # (nothing where stdout is closed: no traceback)
        return 0
    problem = usage_problem(args)
    if problem is not None:
        return fail(problem)
    # The address is bound before anything is started (the demo, a host's probe): a refusal of it
    # leaves nothing running behind it.
    sock = None
    if args.listen is not None:
        host, port = args.listen
        try:
            sock = bind(host, port)
        except OSError as exc:
            return fail(listen_problem(host, port, exc))
    try:
        config = load(args.config)
        specs = resolve_hosts(args.hosts, args.demo, config, read_only=True)
        fleet = build_fleet(specs, interval=args.interval)
    except BaseException:
        if sock is not None:
            sock.close()
        raise
    return asyncio.run(run_export(args, fleet, sock))


def listen_problem(host: str, port: int, exc: OSError) -> str:
    return f"--listen {host}:{port}: {exc.strerror or exc}"


# -- the textfile ----------------------------------------------------------------------------------


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def textfile_problem(path: Path) -> str | None:
    """Why the rename must not replace what is at `path`, in words; None when nothing is there or a
    regular file is. The rename would put a regular file in place of a device or a FIFO (as root, of
    /dev/null itself), and in place of a symlink rather than the file it names: both refused."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return "is a symbolic link: refused (name the file itself)"
    kind = next((name for test, name in _KINDS if test(mode)), "something else")
    return f"is not a regular file ({kind}): refused"


def write_textfile(path: Path, data: bytes) -> None:
    """`data` as `path`, atomically: a new file beside it (created exclusively, never through a
    symlink, named `.NAME.*.tmp`, which the textfile collector does not read), made readable by
    node_exporter's user, then renamed over `path`, which is looked at just before each rename
    (what is there may have changed since the start: textfile_problem). Raises OSError (the new
    file is removed)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o644)
            f.write(data)
        problem = textfile_problem(path)
        if problem is not None:
            raise OSError(errno.EINVAL, problem)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# -- the HTTP side ---------------------------------------------------------------------------------


class OnLoop:
    """A collector that builds its families on the asyncio loop that owns the fleet: a scrape comes
    on a server thread, and the fleet's state is only ever read where it is written."""

    def __init__(self, collector: Collector, loop: asyncio.AbstractEventLoop) -> None:
        self.collector = collector
        self.loop = loop

    async def _collect(self) -> list[Metric]:
        return list(self.collector.collect())

    def collect(self) -> Iterable[Metric]:
        families: list[Metric] = on_loop(self.loop, self._collect)
        return families

    def describe(self) -> Iterable[Metric]:
        describe = getattr(self.collector, "describe", None)
        families: Iterable[Metric] = describe() if describe is not None else []
        return families


def on_loop(loop: asyncio.AbstractEventLoop, make: Callable[[], Any]) -> Any:
    """The result of coroutine `make()` run on `loop`, from another thread (TimeoutError after
    ON_LOOP_TIMEOUT s; RuntimeError when the loop has stopped)."""
    return asyncio.run_coroutine_threadsafe(make(), loop).result(ON_LOOP_TIMEOUT)


def make_app(metrics: WsgiApp, ready: Callable[[], bool]) -> WsgiApp:
    """/metrics (prometheus_client's app), /-/ready (200 once every host has been heard from, 503
    before), /-/healthy (200 while the process serves), / (what is where); anything else 404."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            try:
                return metrics(environ, start_response)
            except UNANSWERED:
                return _answer(start_response, "503 Service Unavailable", b"metrics not available now\n")
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return _answer(start_response, "405 Method Not Allowed", b"GET only\n", [("Allow", "GET, HEAD")])
        if path == "/-/ready":
            try:
                ok = ready()
            except UNANSWERED:
                ok = False
            if ok:
                return _answer(start_response, "200 OK", b"ready: every host heard from\n")
            return _answer(
                start_response, "503 Service Unavailable", b"not ready: hosts not yet heard from\n"
            )
        if path == "/-/healthy":
            return _answer(start_response, "200 OK", b"healthy\n")
        if path in ("", "/"):
            return _answer(start_response, "200 OK", ROUTES.encode())
        return _answer(start_response, "404 Not Found", b"not found: see /\n")

    return app


def _answer(
    start_response: Callable[..., Any], status: str, body: bytes, extra: list[tuple[str, str]] | None = None
) -> list[bytes]:
    headers = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
    start_response(status, headers + (extra or []))
    return [body]


def serve(host: str, port: int, app: WsgiApp, connections: int = CONNECTIONS) -> ExportServer:
    """The server bound (not yet serving). Raises OSError: the address is taken, not this host's."""
    return ExportServer(bind(host, port), app, say, connections)


def url(server: ExportServer) -> str:
    address = server.server_address
    host = address[0].decode() if isinstance(address[0], bytes) else str(address[0])
    port = address[1] if isinstance(address, tuple) else 0
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/metrics"


# -- the command -----------------------------------------------------------------------------------


class Ready:
    """/-/ready's answer, latched: once every host has been heard from, the exporter is ready for
    good (a host that goes down later is a metric, gputui_host_up 0, not an exporter that is not)."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.ready = False

    async def check(self) -> bool:
        self.ready = self.ready or all_heard(self.fleet.hosts)
        return self.ready


async def run_export(args: argparse.Namespace, fleet: Fleet, sock: socket.socket | None = None) -> int:
    """The command, once its arguments are checked (usage_problem) and its fleet built; `sock`: the
    --listen address already bound (else it is bound here)."""
    loop = asyncio.get_running_loop()
    collector = FleetCollector(lambda: fleet.hosts)
    reg: CollectorRegistry = registry(collector)
    server: ExportServer | None = None
    ready = Ready(fleet)
    if args.listen is not None:
        host, port = args.listen
        app = make_app(make_wsgi_app(registry(OnLoop(collector, loop))), lambda: on_loop(loop, ready.check))
        try:
            server = ExportServer(sock or bind(host, port), app, say, args.connections)
        except OSError as exc:
            say(f"gputui: {listen_problem(host, port, exc)}")
            return Exit.USAGE
    stopped = asyncio.Event()
    textfile = Path(args.textfile) if args.textfile else None
    thread: threading.Thread | None = None
    # An orderly stop (the probes stopped) on SIGINT, SIGTERM (a service manager's stop, the usual end
    # of an exporter) and SIGHUP, all with exit 0.
    with stop_signals(loop, lambda _sig: stopped.set()):
        fleet.start()
        try:
            if server is not None:
                thread = threading.Thread(target=server.serve_forever, name="export-http", daemon=True)
                thread.start()
                say(f"gputui export: serving {url(server)}")
            first = asyncio.ensure_future(fleet.wait_first_samples(args.timeout))
            waiting = asyncio.ensure_future(stopped.wait())
            await asyncio.wait([first, waiting], return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if stopped.is_set():
                first.cancel()
                return Exit.OK
            if args.once:
                data = generate_latest(reg)
                if textfile is None:
                    if sys.stdout is None:  # started with stdout closed (`>&-`)
                        say("gputui: stdout is closed: the metrics have nowhere to go")
                        return Exit.FAILED
                    sys.stdout.buffer.write(data)
                    sys.stdout.flush()
                    return Exit.OK
                try:
                    write_textfile(textfile, data)
                except OSError as exc:
                    say(f"gputui: --textfile {printable(str(textfile))}: {exc.strerror or exc}")
                    return Exit.FAILED
                return Exit.OK
            await _keep_writing(reg, textfile, args.interval, stopped)
            return Exit.OK
        finally:
            if server is not None:
                if thread is not None:
                    await asyncio.to_thread(server.shutdown)
                server.server_close()
            await fleet.stop()


async def _keep_writing(
    reg: CollectorRegistry, textfile: Path | None, every: float, stopped: asyncio.Event
) -> None:
    """The textfile rewritten every `every` seconds (a failed write said once per new reason, and
    tried again next time) until stopped; without one, only waits."""
    loop = asyncio.get_running_loop()
    said: str | None = None
    while not stopped.is_set():
        started = loop.time()
        if textfile is not None:
            try:
                write_textfile(textfile, generate_latest(reg))
                said = None
            except OSError as exc:
                problem = f"gputui: --textfile {printable(str(textfile))}: {exc.strerror or exc}"
                if problem != said:
                    say(problem + " (tried again every interval)")
                    said = problem
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stopped.wait(), max(0.0, every - (loop.time() - started)))

"""The HTTP server of `gputui export --listen`: a WSGI app served to many scrapers at once, none of which
can take it down (docs/MONITORING.md "Under load").

Connections are read on one asyncio loop of the server's own thread, so a client that is slow to send
its request costs a socket, not a thread; only a whole request goes to one of WORKERS threads, where
the standard library's WSGI handler runs the app on it as if it came from the socket, and the answer
goes back through the loop. What bounds it:

- the listen backlog is BACKLOG: a burst of scrapes waits there to be accepted, none is dropped;
- at most `connections` are open at once: one more is answered 503 and closed at once;
- a request must arrive whole (its line and headers, at most MAX_HEAD bytes) within HEAD_DEADLINE
  seconds of being accepted, and its answer be taken within ANSWER_TIMEOUT; else it is closed;
- each client so ended is said in one line at most, and lines of one kind at most once every
  NOTICE_EVERY seconds (the next one counts those not said): never a traceback.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import io
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler

# The rules both HTTP servers keep (the hub's too): the deadline of a request's head, the notices.
from ..text.clients import HEAD_DEADLINE, Notices, peer_name

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

BACKLOG = 1024  # connections the kernel holds before they are accepted (socketserver's default: 5)
CONNECTIONS = 1024  # connections open at once, by default (--connections)
WORKERS = 8  # threads that run the app: a scrape mostly waits for the fleet's loop, so few do
ANSWER_TIMEOUT = 30.0  # seconds a client has to take its answer
MAX_HEAD = 64 * 1024  # bytes of request line and headers
REFUSED = (
    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 29\r\nConnection: close\r\n\r\ntoo many connections: refused\n"
)
HEAD_TOO_LARGE = (
    b"HTTP/1.0 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 23\r\nConnection: close\r\n\r\nrequest head too large\n"
)


class HeadTooLarge(Exception):
    """The request's line and headers are over MAX_HEAD bytes."""


async def read_head(reader: asyncio.StreamReader) -> bytes:
    """The request line and headers, through the empty line that ends them (CRLF or a bare LF).
    Raises HeadTooLarge, or IncompleteReadError when the client closes first."""
    head: list[bytes] = []
    size = 0
    while True:
        try:
            line = await reader.readline()
        except ValueError as exc:  # one line over the reader's limit
            raise HeadTooLarge from exc
        if not line.endswith(b"\n"):
            raise asyncio.IncompleteReadError(b"".join(head) + line, None)
        size += len(line)
        if size > MAX_HEAD:
            raise HeadTooLarge
        if line in (b"\r\n", b"\n"):
            if head:
                return b"".join([*head, line])
            continue  # an empty line before the request line is ignored (RFC 9112 2.2)
        head.append(line)


class _Answer(ServerHandler):
    """wsgiref's handler, whose trouble is one line, not a traceback on stderr."""

    notices: Notices | None = None
    peer = ""

    def log_exception(self, exc_info: Any) -> None:
        if self.notices is not None:
            # The exception's type only: its words would break the grouping of lines by reason.
            self.notices.note(self.peer, f"answer failed: {type(exc_info[1]).__name__}")


class _Request(WSGIRequestHandler):
    """One request already read whole (its head in memory), answered into `out`: the standard
    library's parsing and WSGI handling, without a socket."""

    def __init__(self, head: bytes, out: io.BytesIO, client: Any, server: ExportServer) -> None:
        # Not the socket-reading constructor: everything the handling reads is set here.
        self.rfile = io.BytesIO(head)
        self.wfile = self.out = out
        self.client_address = client
        self.server = server  # type: ignore[assignment]  # base_environ and get_app are all it needs
        self.export = server
        self.close_connection = True

    def handle(self) -> None:
        self.raw_requestline = self.rfile.readline(65537)
        if not self.parse_request():  # an error answer is written: nothing more to do
            return
        answer = _Answer(self.rfile, self.out, io.StringIO(), self.get_environ(), multithread=True)
        answer.request_handler = self  # type: ignore[attr-defined]  # wsgiref's back-pointer, for its log
        answer.notices = self.export.notices
        answer.peer = peer_name(self.client_address)
        answer.run(self.export.app)

    def address_string(self) -> str:
        return str(self.client_address[0])  # never a reverse lookup

    def log_message(self, format: str, *args: Any) -> None:
        """Nothing: a scrape every few seconds is no news."""


class ExportServer:
    """The server on a bound, listening socket. `serve_forever()` (in a thread of its own) serves until
    `shutdown()` (from another thread); `server_close()` then closes the socket."""

    def __init__(
        self,
        sock: socket.socket,
        app: WsgiApp,
        say: Callable[[str], None],
        connections: int = CONNECTIONS,
        workers: int = WORKERS,
    ) -> None:
        self.socket = sock
        self.server_address = sock.getsockname()
        self.app = app
        self.notices = Notices(say)
        self.connections = connections
        self.open = 0
        self.pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="export-http")
        host, port = self.server_address[0], self.server_address[1]
        self.base_environ = {
            "SERVER_NAME": str(host),
            "SERVER_PORT": str(port),
            "GATEWAY_INTERFACE": "CGI/1.1",
            "REMOTE_HOST": "",
            "CONTENT_LENGTH": "",
            "SCRIPT_NAME": "",
        }
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._shutdown = threading.Event()
        self._serving = threading.Event()
        self._done = threading.Event()

    def get_app(self) -> WsgiApp:
        return self.app

    def serve_forever(self) -> None:
        self._serving.set()
        try:
            asyncio.run(self._serve())
        finally:
            # Answers under way finish (the fleet's loop still runs); those not begun are dropped.
            self.pool.shutdown(wait=True, cancel_futures=True)
            self._done.set()

    def shutdown(self) -> None:
        """Stop serving; returns once serve_forever has (at once when it never ran)."""
        self._shutdown.set()
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # its loop has already ended
                loop.call_soon_threadsafe(stop.set)
        if self._serving.is_set():
            self._done.wait()

    def server_close(self) -> None:
        self.socket.close()
        self.pool.shutdown(wait=False, cancel_futures=True)

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()  # set before the flag is read: see shutdown()
        if self._shutdown.is_set():
            return
        server = await asyncio.start_server(self._connection, sock=self.socket, limit=MAX_HEAD)
        counts = asyncio.ensure_future(self._say_held())
        try:
            await self._stop.wait()
        finally:
            counts.cancel()
            server.close()
            self.notices.flush(everything=True)

    async def _say_held(self) -> None:
        while True:
            await asyncio.sleep(self.notices.every)
            self.notices.flush()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        if self.open >= self.connections:
            self.notices.note(
                peer_name(peer), f"refused: {self.connections} connections open (--connections)"
            )
            writer.write(REFUSED)
            writer.close()  # after the answer is sent
            return
        self.open += 1
        try:
            await self._answer(reader, writer, peer)
        except ConnectionError:
            pass  # the client left: its own business
        finally:
            self.open -= 1
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: Any) -> None:
        try:
            head = await asyncio.wait_for(read_head(reader), HEAD_DEADLINE)
        except asyncio.TimeoutError:
            self.notices.note(peer_name(peer), f"no whole request in {HEAD_DEADLINE:g} s: closed")
            return
        except HeadTooLarge:
            writer.write(HEAD_TOO_LARGE)
            return
        except asyncio.IncompleteReadError:
            return  # closed before its request was whole
        loop = asyncio.get_running_loop()
        try:
            answer = await loop.run_in_executor(self.pool, self._run, head, peer)
        except RuntimeError:  # the pool is shut down: the server is stopping
            return
        writer.write(answer)
        try:
            await asyncio.wait_for(writer.drain(), ANSWER_TIMEOUT)
        except asyncio.TimeoutError:
            self.notices.note(peer_name(peer), f"answer not taken in {ANSWER_TIMEOUT:g} s: closed")
            writer.transport.abort()

    def _run(self, head: bytes, peer: Any) -> bytes:
        """The whole answer (status line, headers, body) to the request `head`, in a worker thread."""
        out = io.BytesIO()
        try:
            _Request(head, out, peer, self).handle()
        except Exception as exc:  # the app's own fault: the client gets what was written, stderr a line
            self.notices.note(peer_name(peer), f"answer failed: {type(exc).__name__}")
        return out.getvalue()


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on HOST:PORT (SO_REUSEADDR, as socketserver's HTTP server sets it). Raises
    OSError: the address is taken, or not this host's."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock

"""The hub's listening side: aiohttp's runner, with the rules every client of gputui's HTTP servers is
held to (gputui/text/clients.py, as `gputui export` holds its own; docs/SERVE.md "Limits").

    runner = HubRunner(app, shutdown_timeout)   # then setup(), a web.TCPSite, cleanup(): as AppRunner's

- A request must arrive whole (its line and headers) within HEAD_DEADLINE seconds of the connection,
  or of the last answer on it; else the connection is closed. aiohttp's keep-alive timer holds the
  wait after an answer (`keepalive_timeout`); a sweep, once a second, holds the wait for a first
  request (aiohttp before 3.14.x arms no timer before one: a client that sent half a request and
  waited kept its socket for ever, and enough of them took every file descriptor).
- A malformed request (a line or header over aiohttp's 8,190 bytes, over its 128 headers, a body
  that is not its Content-Encoding) is answered 400 by aiohttp, which logged a traceback for each:
  any client could fill the hub's log. Here each is a line of `Notices` (one of a kind every
  NOTICE_EVERY seconds, the rest counted); a fault of the hub's own in answering is one too.
- accept() out of file descriptors (EMFILE, past `ulimit -n`): asyncio logged a traceback for every
  try, thousands a second; here it is a line of `Notices`.
- Connections, not requests, are what `--connections` bounds (`_Gate`): one held open with half a
  request (or none yet) is counted as one with a stream is, so stalled clients cannot take every
  descriptor while a limit is set; the connection past it is answered 503 at once and closed.
- aiohttp's own answers (its parser's 400, a fault's 500) are made past every middleware; `_Handler`
  gives them the headers of every other answer (app.py HEADERS).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import sys
import time
import weakref
from collections.abc import Callable
from typing import Any, cast

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from ..model.textsafe import cut
from ..text.clients import HEAD_DEADLINE, Notices, peer_name
from .app import HEADERS, NO_STORE, SETTINGS, Handler

SWEEP_EVERY = 1.0  # seconds between two looks for connections with no whole request yet
OUT_OF_FILES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)  # asyncio's "out of system resource"
ERROR_HEADERS = {**HEADERS, "Cache-Control": NO_STORE}  # on aiohttp's own answers (all errors)
REFUSAL_LINGER = 1.0  # seconds a refused connection is kept for its client to read the 503 (below)
_BUSY = b"too many connections: refused\n"
REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    + b"".join(f"{name}: {value}\r\n".encode() for name, value in ERROR_HEADERS.items())
    + b"Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
    % len(_BUSY)
    + _BUSY
)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class HubRunner(web.AppRunner):
    """aiohttp's AppRunner for the hub's app, with the bounds above; `say`: where its lines go."""

    def __init__(
        self, app: web.Application, shutdown_timeout: float, say: Callable[[str], None] = _stderr
    ) -> None:
        self.notices = Notices(say, who="gputui serve")
        self._heard: weakref.WeakSet[asyncio.BaseTransport] = weakref.WeakSet()  # a request came on it
        self._seen: weakref.WeakKeyDictionary[asyncio.BaseTransport, float] = weakref.WeakKeyDictionary()
        self._sweeper: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._before: Any = None  # the loop's exception handler before this runner's
        heard = self._heard

        @web.middleware
        async def mark(request: web.Request, handler: Handler) -> web.StreamResponse:
            if request.transport is not None:
                heard.add(request.transport)  # its head came whole: aiohttp's keep-alive times the next
            return await handler(request)

        app.middlewares.insert(0, mark)  # first: every request is marked, whatever answers it
        self.limit = app[SETTINGS].connections
        super().__init__(
            app,
            access_log=None,
            shutdown_timeout=shutdown_timeout,
            keepalive_timeout=HEAD_DEADLINE,
            logger=_ClientLog(self.notices),
        )

    async def _make_server(self) -> web.Server:
        made = await super()._make_server()  # the app started and frozen, as AppRunner does
        return _Server(made, self.limit, self._refused)

    def _refused(self, transport: asyncio.BaseTransport) -> None:
        peer = peer_name(transport.get_extra_info("peername"))
        self.notices.note(peer, f"too many connections (--connections {self.limit}): answered 503")

    async def setup(self) -> None:
        await super().setup()
        self._loop = asyncio.get_running_loop()
        self._before = self._loop.get_exception_handler()
        self._loop.set_exception_handler(self._loop_exception)
        self._sweeper = asyncio.create_task(self._sweep(), name="gputui serve: first requests")

    async def cleanup(self) -> None:
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
            await asyncio.gather(sweeper, return_exceptions=True)
        await super().cleanup()
        if self._loop is not None:
            self._loop.set_exception_handler(self._before)
            self._loop = None
            self.notices.flush(everything=True)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_EVERY)
            self.notices.flush()
            server = self.server
            if server is None:
                continue
            now = time.monotonic()
            for handler in server.connections:
                transport = handler.transport
                if transport is None or transport in self._heard:
                    continue
                if now - self._seen.setdefault(transport, now) >= HEAD_DEADLINE:
                    peer = peer_name(transport.get_extra_info("peername"))
                    self.notices.note(peer, f"no whole request in {HEAD_DEADLINE:g} s: closed")
                    transport.close()

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if (
            isinstance(error, OSError)
            and error.errno in OUT_OF_FILES
            and "accept" in str(context.get("message"))
        ):
            where = context.get("socket")
            address = peer_name(where.getsockname()) if where is not None else "the listening socket"
            # asyncio tries again at once, up to its backlog a time: the count is of tries, not clients.
            self.notices.note(
                address, f"cannot accept a connection: {error.strerror} (ulimit -n?)", ("try", "tries")
            )
            return
        if self._before is not None:
            self._before(loop, context)
        else:
            loop.default_exception_handler(context)


class _Handler(web.RequestHandler):
    """aiohttp's protocol for one connection. The answers aiohttp makes itself (its parser's 400 for a
    request it cannot read, a 500 for a fault, a 504) are made where no middleware runs; each gets the
    hub's headers here, as every other answer has them."""

    __slots__ = ()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        response = super().handle_error(request, status, exc, message)
        response.headers.update(ERROR_HEADERS)
        return response


class _Server(web.Server):
    """aiohttp's Server as `made` was, whose connections go through a `_Gate` (at most `limit` held)
    and are served by `_Handler`; `refused(transport)`: says that one was refused."""

    def __init__(
        self, made: web.Server, limit: int, refused: Callable[[asyncio.BaseTransport], None]
    ) -> None:
        super().__init__(
            made.request_handler,
            request_factory=made.request_factory,
            handler_cancellation=made.handler_cancellation,
            loop=made._loop,
            **made._kwargs,
        )
        self.limit = limit
        self.refused = refused

    def __call__(self) -> web.RequestHandler:
        # The listening socket's protocol factory: typed as aiohttp's, a _Gate is what the loop takes.
        return cast(web.RequestHandler, _Gate(self))

    def held(self) -> int:
        """Connections being served now (aiohttp's count: from connection_made to connection_lost)."""
        return len(self._connections)

    def handler(self) -> web.RequestHandler:
        return _Handler(self, loop=self._loop, **self._kwargs)


class _Gate(asyncio.Protocol):
    """A connection's protocol until it is made: handed to aiohttp while fewer than the limit are
    held, else answered 503 and closed. Counted at connection_made, one connection after another
    (a protocol factory runs before asyncio has made the transport, so a burst would be counted
    late). A refused client's request may already be on its way: the 503 is written and this side
    shut, its bytes read and dropped until it closes or REFUSAL_LINGER has passed (closing at once
    over unread bytes sends a reset, which can take the 503 with it)."""

    def __init__(self, server: _Server) -> None:
        self.server = server
        self.closer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.server.held() < self.server.limit:
            handler = self.server.handler()
            transport.set_protocol(handler)
            handler.connection_made(transport)
            return
        assert isinstance(transport, asyncio.Transport)
        self.server.refused(transport)
        transport.write(REFUSAL)
        if transport.can_write_eof():
            transport.write_eof()
        self.closer = asyncio.get_running_loop().call_later(REFUSAL_LINGER, transport.close)

    def data_received(self, data: bytes) -> None:
        pass  # a refused client's request: dropped

    def eof_received(self) -> bool:
        return False  # the client is done: the transport closes

    def connection_lost(self, exc: Exception | None) -> None:
        if self.closer is not None:
            self.closer.cancel()


class _ClientLog(logging.Logger):
    """What aiohttp's server says of a request (its `logger`), as lines of `notices`: a request it
    refused (400; or a body that was not its Content-Encoding, which aiohttp finds again when it
    drains the body after the route's 400) or a fault in answering one (500), by the exception's
    kind, without the client's bytes and without a traceback; its debug lines are dropped."""

    def __init__(self, notices: Notices) -> None:
        super().__init__("gputui.serve.clients", logging.WARNING)
        self.notices = notices

    def handle(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.WARNING:
            return
        error = record.exc_info[1] if record.exc_info else None
        peer = cut(str(record.args[0]), 80) if isinstance(record.args, tuple) and record.args else "a client"
        if isinstance(error, HttpProcessingError | web.RequestPayloadError):  # the client's, not the hub's
            self.notices.note(peer, f"malformed request refused (400, {type(error).__name__})")
        elif error is not None:
            self.notices.note(peer, f"answer failed: {type(error).__name__}")
        else:
            self.notices.note(peer, cut(record.getMessage(), 200))


def bind_all(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Listening sockets on every address `host` is (both of `localhost`, as aiohttp's TCPSite binds
    them), bound before the hub starts anything: an address that cannot be had is refused with
    nothing running. Raises OSError (the address is taken, not this host's), none left open."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in bound:
            sock.close()
        raise
    return bound

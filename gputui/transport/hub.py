"""Hosts read from a hub (`gputui serve`): one events stream per hub, one `HubLink` per host on it.

The hub's stream (docs/SERVE.md "The protocol") carries every host's probe records as the hub
received them, so a host read through a hub is a Link like any other: its hello (the probe's, with
the hub's short history of each GPU under `history` and `read_only` set where this viewer may not
act), then its samples (whole or delta) and events in order. What the hub knows of the host is the
viewer's too: a host down at the hub ends its link with the hub's reason (the fleet reconnects, and
the new link waits until the hub has the host again); a host stale at the hub is stale here
(`watch_status`), and the viewer makes no silence verdict of its own.

One connection serves all the links of a hub on an event loop (`HubStream`): it is made when a link
opens and none is up, and closed once no link uses it. A failed connection is not tried again
before its backoff has passed (the links that open meanwhile fail at once with its reason), so a
thousand hosts that reconnect at once make one attempt.

Actions: a link whose hub allows this token to act (the `hub` frame's `actions`) turns a kill plan
into the hub's request (`POST /api/v1/actions`: host, scope, GPUs, targets by PID and start time,
ladder); the hub plans from its own sample and runs it, and its events come back on the stream under
the hub's plan id, which the link maps back to the viewer's. Signals and GPU resets are not sent
through a hub: they are refused with words that say where to run them (the hello carries `hub`,
the hub's URL, so the dashboard refuses them before any dialog). A process detail is the hub's
answer (`GET /api/v1/detail`); its environment is refused at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import aiohttp

from ..config.hostlist import MAX_HOSTS, too_many_hosts
from ..model.host import HUB_PROTOCOL, NOT_THROUGH_A_HUB
from ..model.textsafe import cut
from ..probe.delta import DeltaError, apply
from ..probe.wire import check, clip_text, interval_problem, loads, printable
from ..text.clients import HEAD_DEADLINE
from .base import TransportError

PREFIX = "hub:"
TOKEN_ENV = "GPUTUI_HUB_TOKEN"
EVENTS = "/api/v1/events"
ACTIONS = "/api/v1/actions"
DETAIL = "/api/v1/detail"
CONNECT_TIMEOUT = 10.0  # seconds to connect and read the hub's whole state
READ_TIMEOUT = 45.0  # seconds without a byte (the hub pings every 15) before the stream is dead
ACTION_TIMEOUT = 30.0  # seconds the hub may take to plan (a full scan of the host) and answer
DETAIL_TIMEOUT = 10.0  # seconds for the hub's answer to a process detail (it waits 3 on its host)
MAX_LINE = 32 * 1024 * 1024  # bytes of a line, and of a frame, of the stream: a large host's sample fits
MAX_WORDS = 1024  # characters of a host's reason, message or group from the hub (more: cut, marked)
QUEUE_MAX = 2048  # records waiting for one link's reader; past that the link is behind: it ends
SAME_TIME = 0.001  # seconds: the hub's history gives times to the millisecond
UNMAPPED_MAX = 256  # events of plans not (yet) known to a link, kept in case their id comes next
# Seconds before a failed connection is tried again (doubling up to the cap): the links that open
# meanwhile fail at once with its reason, so a fleet that reconnects makes one attempt.
RETRY_FIRST = 1.0
RETRY_CAP = 15.0
LADDERS = {("SIGTERM",): "term", (): "kill", ("SIGINT", "SIGTERM"): "int"}

NO_ENVIRON = "not through a hub: a process's environment can hold secrets"

# The token of each hub URL (the CLI reads --hub-token-file); GPUTUI_HUB_TOKEN when none is set.
_tokens: dict[str, str] = {}


def remember_token(url: str, token: str) -> None:
    _tokens[url] = token


def token_for(url: str) -> str | None:
    return _tokens.get(url) or os.environ.get(TOKEN_ENV) or None


class UrlError(ValueError):
    """A hub URL that cannot be used: the message says why."""


def check_url(text: str) -> str:
    """The hub's base URL (no trailing slash); UrlError unless http(s) with a host and nothing else
    (no user or password in it: a URL is seen by `ps` and shell histories; no query, no fragment)."""
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise UrlError(f"{text!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UrlError(f"{text!r} is not an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise UrlError(f"{text!r} has a user or password in it: give the token in a file or the environment")
    if parts.query or parts.fragment or any(ord(c) < 33 or ord(c) == 127 for c in text):
        raise UrlError(f"{text!r}: a hub URL has no query, fragment, space or control character")
    del port  # read for its check only (a port out of range raises)
    return text.rstrip("/")


def feed_url(feed: str) -> str:
    """The hub URL of a `HostSpec.feed` "hub:URL"."""
    return feed[len(PREFIX) :]


@dataclass
class HubInfo:
    """The hub's `hub` frame: what it runs, its sample interval, whether this token may act, its hosts."""

    version: str = ""
    interval: float = 1.0
    actions: bool = False
    hosts: list[str] = field(default_factory=list)


@dataclass
class HubHost:
    """What the hub said of one host: its state, its latest hello, the sample it holds (deltas merged)."""

    status: str = "connecting"
    reason: str | None = None
    message: str | None = None
    read_only: bool = False
    group: str | None = None
    history: dict[str, Any] | None = None  # the hub's recent readings, until a link takes them
    hello: dict[str, Any] | None = None
    whole: dict[str, Any] | None = None
    down_said: bool = False  # a link has ended with this down spell's reason: the next ones wait


class _Events:
    """Server-sent events out of the stream's bytes as they come: `feed` gives (event, data) for each
    frame complete so far. A line, and a frame's data however many `data:` lines it takes, are at
    most MAX_LINE bytes (the hub sends one line a frame); the data is kept as a list of lines and
    joined once (`+=` on one string copies all of it for every line: quadratic)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.buffer = bytearray()
        self.scanned = 0  # bytes at the start of `buffer` known to hold no line break
        self.event: str | None = None
        self.data: list[str] = []
        self.size = 0  # bytes of `data`

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        buffer = self.buffer
        buffer += chunk
        out: list[tuple[str, str]] = []
        start, pos = 0, self.scanned  # a line begun in an earlier chunk is not searched again
        while (end := buffer.find(b"\n", pos)) >= 0:
            self._line(bytes(buffer[start:end]).rstrip(b"\r"), out)
            start = pos = end + 1
        del buffer[:start]
        self.scanned = len(buffer)
        if len(buffer) > MAX_LINE:
            raise TransportError("closed", f"the hub {self.url} sent a line over {MAX_LINE:,} bytes")
        return out

    def _line(self, raw: bytes, out: list[tuple[str, str]]) -> None:
        if not raw:
            if self.data:
                out.append((self.event or "message", "\n".join(self.data)))
            self.event, self.data, self.size = None, [], 0
            return
        if raw.startswith(b":"):
            return  # a comment: the hub's ping
        name, _, value = raw.decode("utf-8", "replace").partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self.event = value
        elif name == "data":
            self.size += len(raw) + 1
            if self.size > MAX_LINE:
                raise TransportError("closed", f"the hub {self.url} sent a frame over {MAX_LINE:,} bytes")
            self.data.append(value)


class HubStream:
    """One hub's events stream on this event loop, shared by its links."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url
        self.token = token
        self.info: HubInfo | None = None
        self.hosts: dict[str, HubHost] = {}
        self.links: dict[str, set[HubLink]] = {}
        self.users = 0  # links opening or open
        self.failure: TransportError | None = None
        self.retry_at = 0.0
        self.backoff = RETRY_FIRST
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._overdue = False  # the first state did not come in time: the reader was cancelled for it

    # -- the connection ---------------------------------------------------------------------------

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    async def connected(self) -> None:
        """Until the hub's whole state has been read; TransportError when the hub cannot be read."""
        if self._task is None:
            if self.failure is not None and time.monotonic() < self.retry_at:
                raise self.failure
            loop = asyncio.get_running_loop()
            self._ready = loop.create_future()
            self._task = asyncio.create_task(self._run(self._ready), name=f"hub-{self.url}")
        assert self._ready is not None
        await asyncio.shield(self._ready)

    async def _run(self, ready: asyncio.Future[None]) -> None:
        failure = await self._outcome(ready)
        self.failure = failure
        if ready.done():  # it was up: the next try may come at once
            self.backoff, self.retry_at = RETRY_FIRST, 0.0
        else:
            self.retry_at = time.monotonic() + random.uniform(self.backoff / 2, self.backoff)
            self.backoff = min(RETRY_CAP, self.backoff * 2)
            ready.set_exception(failure)
            ready.exception()  # retrieved: no "never retrieved" warning when nobody waits on it
        self._task = None
        for links in list(self.links.values()):
            for link in list(links):
                link.fail(failure)

    async def _outcome(self, ready: asyncio.Future[None]) -> TransportError:
        """Read the stream to its end; why it ended. The hub's first state (up to its `hub` frame)
        must come within CONNECT_TIMEOUT however the hub stalls: aiohttp's timeouts bound each read,
        and a hub that only pings, or sends a frame a byte at a time, never trips them."""
        task = asyncio.current_task()
        assert task is not None
        self._overdue = False
        timer = asyncio.get_running_loop().call_later(CONNECT_TIMEOUT, self._give_up, ready, task)
        try:
            await self._read()
            return TransportError("closed", f"the hub {self.url} ended its stream")
        except TransportError as exc:
            return exc
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError, ValueError) as exc:
            return TransportError("unreachable", f"the hub {self.url}: {_words(exc)}")
        except asyncio.CancelledError:
            if not self._overdue:
                raise
            return TransportError("timeout", f"the hub {self.url} sent no state within {CONNECT_TIMEOUT:g} s")
        # A reader that died of a frame nobody foresaw would leave every link waiting for ever.
        except Exception as exc:
            return TransportError(
                "closed", f"the hub {self.url}: cannot read its stream ({type(exc).__name__})"
            )
        finally:
            timer.cancel()

    def _give_up(self, ready: asyncio.Future[None], task: asyncio.Task[None]) -> None:
        if not ready.done():
            self._overdue = True
            task.cancel()

    async def _read(self) -> None:
        if self._session is None or self._session.closed:
            # READ_TIMEOUT as aiohttp's own read timeout, not an asyncio.wait_for around each read:
            # before Python 3.12, wait_for swallows a cancellation that comes as its read completes,
            # and on a busy stream that is most of them (closing a stream then read it forever).
            timeout = aiohttp.ClientTimeout(sock_connect=CONNECT_TIMEOUT, sock_read=READ_TIMEOUT)
            # The hub closes a connection that stays idle HEAD_DEADLINE after an answer: one kept here
            # is let go before then, so an action's POST (aiohttp retries no POST) never goes out on
            # a connection the hub is closing.
            connector = aiohttp.TCPConnector(keepalive_timeout=HEAD_DEADLINE / 2)
            self._session = aiohttp.ClientSession(timeout=timeout, connector=connector)
        # Not `async with`: leaving it waits for the answer to end, and an events stream never ends;
        # closing the answer drops its connection at once.
        response = await self._session.get(self.url + EVENTS, headers=self.headers())
        try:
            if response.status == 401:
                raise TransportError("auth-failed", f"the hub {self.url} refused the token (401)")
            if response.status != 200:
                raise TransportError("unreachable", f"the hub {self.url} answered {response.status}")
            events = _Events(self.url)
            while True:
                chunk = await response.content.readany()
                if not chunk:
                    return
                for name, data in events.feed(chunk):
                    self._frame(name, data)
        finally:
            response.close()

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- the frames ---------------------------------------------------------------------------------

    def _frame(self, name: str, data: str) -> None:
        """One frame taken. A frame this viewer reads that is not what the protocol says ends the
        stream (TransportError): the hub is not one, or not one this viewer understands, and any
        frame after it could be read wrong. Kinds it does not read (`problems`, the page's; what a
        later hub adds) are passed over unread."""
        if name == "reset":
            self.info = None  # the `hub` frame and the whole state follow
        if name not in ("hub", "host", "hello", "sample", "event"):
            return
        try:
            value = loads(data)  # the wire's rule: no NaN, no infinity, no float out of range
        except RecursionError:
            raise self._malformed(name, "nested too deeply") from None
        except ValueError:
            raise self._malformed(name, "not JSON") from None
        if name == "hub":
            self._hub(value)
            return
        if not _pair(value) or not isinstance(value[1], dict):
            raise self._malformed(name, 'not ["HOST", {...}]')
        host, record = value
        if name == "host":
            self._host(host, record)
            return
        # The probe's own record, checked as a line from a probe is (its depth, version, type):
        # the viewer's session takes it as if its own link had read it.
        _, problem = check(record, (name,))
        if problem is not None:
            raise self._malformed(name, problem["message"])
        if host in self.hosts:
            self._record(name, host, record)

    def _malformed(self, name: str, why: str) -> TransportError:
        return TransportError(
            "closed", f"the hub {self.url} sent a malformed {name} frame ({printable(why)})"
        )

    def _hub(self, frame: Any) -> None:
        if not isinstance(frame, dict):
            raise self._malformed("hub", "not an object")
        version = frame.get("v")
        if type(version) is not int or version != HUB_PROTOCOL:  # True == 1 and 1.0 == 1 in Python
            shown = cut(repr(version), 40)
            raise TransportError(
                "closed",
                f"the hub {self.url} speaks protocol version {shown}; this gputui reads {HUB_PROTOCOL}",
            )
        hosts = frame.get("hosts")
        if isinstance(hosts, list) and len(hosts) > MAX_HOSTS:
            raise TransportError("closed", too_many_hosts(f"the hub {self.url}"))
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise self._malformed("hub", "its hosts are not a list of names")
        interval: Any = frame.get("interval")
        self.info = HubInfo(
            version=_text(frame.get("version")) or "",
            interval=float(interval) if interval_problem(interval) is None else 1.0,
            actions=frame.get("actions") is True,
            hosts=hosts,
        )
        old, self.hosts = self.hosts, {}
        for name in hosts:
            self.hosts[name] = HubHost(down_said=old[name].down_said if name in old else False)
        for name in set(old) - set(self.hosts):
            for link in list(self.links.get(name, ())):
                link.fail(TransportError("unreachable", f"{name} is no longer a host of the hub"))
        if self._ready is not None and not self._ready.done():
            self._ready.set_result(None)

    def _host(self, name: str, state: dict[str, Any]) -> None:
        host = self.hosts.get(name)
        if host is None:
            return
        status = state.get("status")
        host.status = status if status in ("connecting", "live", "stale", "down") else "connecting"
        host.reason = _text(state.get("reason"))
        host.message = _text(state.get("message"))
        host.read_only = state.get("read_only") is True
        host.group = _text(state.get("group"))
        if isinstance(state.get("history"), dict):
            host.history = state["history"]
        if host.status != "down":
            host.down_said = False
        for link in list(self.links.get(name, ())):
            link.state_changed(host)

    def _record(self, kind: str, name: str, record: Any) -> None:
        if not isinstance(record, dict):
            return
        host = self.hosts[name]
        if kind == "hello":
            host.hello, host.whole = record, None
        elif kind == "sample":
            host.whole = _merged(host.whole, record)
        for link in list(self.links.get(name, ())):
            link.take(kind, record, host)

    # -- the links ------------------------------------------------------------------------------

    def join(self, link: HubLink) -> None:
        self.links.setdefault(link.host, set()).add(link)

    def leave(self, link: HubLink) -> None:
        links = self.links.get(link.host)
        if links is not None:
            links.discard(link)
            if not links:
                del self.links[link.host]

    async def post_action(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """POST an action request; the status and the answer (an empty one when it is not JSON)."""
        status, answer = await self._ask("POST", ACTIONS, ACTION_TIMEOUT, json=body)
        return status, answer or {}

    async def get_detail(self, host: str, pid: int, start_time: int) -> dict[str, Any] | None:
        """The hub's `detail` record of (pid, start_time) on `host` (GET /api/v1/detail), or None
        when it has none (the host did not answer it, an older hub without the route)."""
        if self._connected() is None:
            return None
        query = {"host": host, "pid": str(pid), "start": str(start_time)}
        status, answer = await self._ask("GET", DETAIL, DETAIL_TIMEOUT, params=query)
        return answer if status == 200 else None

    def _connected(self) -> aiohttp.ClientSession | None:
        session = self._session
        return session if session is not None and not session.closed else None

    async def _ask(
        self, method: str, path: str, timeout: float, **request: Any
    ) -> tuple[int, dict[str, Any] | None]:
        """One request to the hub with this stream's token, beside its event stream: the status and
        the answer (None where it is not a JSON object). TransportError when not connected."""
        session = self._connected()
        if session is None:
            raise TransportError("closed", f"the hub {self.url} is not connected")
        async with session.request(
            method,
            self.url + path,
            headers=self.headers(),
            timeout=aiohttp.ClientTimeout(total=timeout),
            **request,
        ) as response:
            try:
                answer = await response.json(content_type=None)
            except ValueError:
                answer = None
            return response.status, answer if isinstance(answer, dict) else None


def _pair(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)


def _text(value: Any) -> str | None:
    """A string of the hub's as it may be shown (a reason, words, a group, a version): the hub's to
    send, not this viewer's to trust, so escaped (an ESC from it never reaches a terminal) and cut."""
    return printable(clip_text(value, MAX_WORDS) or "") if isinstance(value, str) and value else None


def _words(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "no answer"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect ({exc.os_error.strerror or exc.os_error})"
    return str(exc) or type(exc).__name__


def _merged(whole: dict[str, Any] | None, record: dict[str, Any]) -> dict[str, Any] | None:
    """The host's sample with `record` taken (a whole one as it is, a delta merged), or None when a
    delta does not follow what is held (the next whole one mends it)."""
    if "delta" not in record:
        return record
    if whole is None:
        return None
    try:
        return _without_delta(apply(whole, record))
    except DeltaError:
        return None


def _without_delta(record: dict[str, Any]) -> dict[str, Any]:
    record.pop("delta", None)
    record.pop("gone", None)
    return record


# Each hub's stream on each event loop (a command runs one loop; tests run many).
_streams: dict[tuple[int, str], HubStream] = {}


def stream_for(url: str) -> HubStream:
    key = (id(asyncio.get_running_loop()), url)
    stream = _streams.get(key)
    if stream is None:
        stream = _streams[key] = HubStream(url, token_for(url))
    return stream


async def _release(url: str, stream: HubStream) -> None:
    """A link of `stream` is done: the connection goes once no link uses it."""
    stream.users -= 1
    if stream.users <= 0:
        key = (id(asyncio.get_running_loop()), url)
        if _streams.get(key) is stream:
            del _streams[key]
        await stream.close()


StatusWatcher = Callable[[str, "str | None", "str | None"], None]
PhaseWatcher = Callable[["str | None", "str | None"], None]
WAITING = "waiting for the hub"  # the phase of a link whose host the hub has down or not yet heard from


class HubLink:
    """One host of a hub, as a Link (gputui/transport/base.py)."""

    def __init__(self, url: str, host: str) -> None:
        self.url = url
        self.host = host
        self.hello: dict[str, Any] | None = None
        self.failure: TransportError | None = None
        self._stream: HubStream | None = None
        self._queue: deque[tuple[str, Any]] = deque()
        self._wake = asyncio.Event()
        self._watch: StatusWatcher | None = None
        self._phase: PhaseWatcher | None = None
        self._plans: dict[str, str] = {}  # the hub's plan id -> the viewer's
        self._unmapped: deque[dict[str, Any]] = deque(maxlen=UNMAPPED_MAX)
        self._posting = 0  # action requests not answered yet
        self._asking: set[asyncio.Task[None]] = set()  # process details asked of the hub
        self._opened = False
        self._closed = False
        self._said: str | None = None  # the hub's status last relayed
        # A hello the hub sent again (a reset, or the host back at the hub), passed on with the
        # sample after it: its history is then cut where that sample begins (`_hello`).
        self._pending: dict[str, Any] | None = None
        self._last: tuple[Any, Any] | None = None  # seq and time of the last sample passed on
        self._hello_seen: dict[str, Any] | None = None  # the hub's hello record last passed on

    def watch_status(self, watch: StatusWatcher) -> None:
        """The session's hook: the hub's word on the host (stale, live again) as it comes."""
        self._watch = watch

    def watch_phase(self, report: PhaseWatcher) -> None:
        """The session's hook for how far the link got: while the hub has the host down (or has not
        heard from it), the hub's words on it, so the viewer says why it waits and not only "down"."""
        self._phase = report

    async def open(self) -> None:
        stream = self._stream = stream_for(self.url)
        stream.users += 1
        stream.join(self)
        while True:
            await stream.connected()
            host = stream.hosts.get(self.host)
            if host is None:
                raise TransportError("unreachable", f"{self.host} is not a host of the hub {self.url}")
            if self.failure is not None:
                raise self.failure
            if host.status == "down" and not host.down_said:
                host.down_said = True
                raise _down(self.host, host)
            if host.status != "down" and host.hello is not None:
                break
            # Down at the hub (already said) or not heard from yet: until the hub has it.
            self._waiting(host)
            self._wake.clear()
            await self._wake.wait()
        self._start(stream, host)

    def _waiting(self, host: HubHost) -> None:
        if self._phase is None:
            return
        if host.status == "down":
            self._phase(WAITING, f"down at the hub: {host.message or host.reason or 'down'}")
        else:
            self._phase(WAITING, f"{host.status} at the hub")

    def _start(self, stream: HubStream, host: HubHost) -> None:
        assert host.hello is not None
        self.hello = self._hello(stream, host, host.hello, host.whole)
        self._hello_seen = host.hello
        self._queue.clear()
        self._opened = True
        if host.whole is not None:
            self._pass_sample(host.whole)
        self._relay(host)

    def _hello(
        self, stream: HubStream, host: HubHost, record: dict[str, Any], then: dict[str, Any] | None
    ) -> dict[str, Any]:
        """The probe's hello as the viewer takes it: read-only unless the hub lets this token act on
        the host, with the hub's recent history of its GPUs (once), up to the sample `then` that
        follows it: that sample is one reading, not a point of the history and then one more."""
        hello = dict(record)
        hello["hub"] = stream.url  # the viewer refuses at once what a hub does not relay (signals)
        if host.read_only or stream.info is None or not stream.info.actions:
            hello["read_only"] = True
        if host.history is not None:
            hello["history"], host.history = _before(host.history, then), None
        return hello

    def _pass_sample(self, record: dict[str, Any]) -> None:
        """A sample for the session, unless it is the very one passed last: the whole state after a
        reset sends again what this viewer may already hold, and it would be taken twice."""
        key = (record.get("seq"), record.get("time"))
        if "delta" not in record and key == self._last:
            return
        self._last = key
        self._put(("record", record))

    # -- what the stream hands the link ---------------------------------------------------------

    def fail(self, failure: TransportError) -> None:
        if self.failure is None:
            self.failure = failure
        self._wake.set()

    def state_changed(self, host: HubHost) -> None:
        if host.status == "down" and self._opened:
            host.down_said = True
            self.fail(_down(self.host, host))
        elif self._opened:
            self._relay(host)
        self._wake.set()

    def _relay(self, host: HubHost) -> None:
        if host.status in ("live", "stale") and host.status != self._said:
            self._said = host.status
            self._put(("status", (host.status, host.reason, host.message)))

    def take(self, kind: str, record: dict[str, Any], host: HubHost) -> None:
        if not self._opened:
            self._wake.set()  # a hello an opening link waits for
            return
        if kind == "hello":
            self._pending = record
            return
        pending, self._pending = self._pending, None
        if pending is not None:
            assert self._stream is not None
            self._put(
                ("record", self._hello(self._stream, host, pending, record if kind == "sample" else None))
            )
            if pending != self._hello_seen:
                self._last = None  # another probe's hello: its samples count afresh
            self._hello_seen = pending
        if kind == "event":
            self._event(record)
        else:
            self._pass_sample(record)

    def _event(self, record: dict[str, Any]) -> None:
        plan = record.get("plan")
        mine = self._plans.get(plan) if isinstance(plan, str) else None
        if mine is None and self._posting:
            self._unmapped.append(record)  # perhaps the plan being asked for: its id is not known yet
            return
        self._put(("record", dict(record, plan=mine) if mine is not None else record))

    def _put(self, item: tuple[str, Any]) -> None:
        if len(self._queue) >= QUEUE_MAX:
            self.fail(TransportError("closed", f"{self.host}: fell behind the hub's stream"))
            return
        self._queue.append(item)
        self._wake.set()

    # -- the Link -------------------------------------------------------------------------------

    async def recv(self) -> dict[str, Any] | None:
        while True:
            if self._queue:
                kind, value = self._queue.popleft()
                if kind == "record":
                    return value  # type: ignore[no-any-return]
                if self._watch is not None:
                    self._watch(*value)
                continue
            if self.failure is not None or self._closed:
                return None
            self._wake.clear()
            await self._wake.wait()

    async def send(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "plan":
            await self._plan(message)
        elif kind in ("signal", "reset"):
            what = "signals" if kind == "signal" else "GPU resets"
            self._refuse(message, NOT_THROUGH_A_HUB.format(what=what))
        elif kind == "sample" and (message.get("whole") or message.get("full")):
            self._resend(full=message.get("full") is True)
        elif kind == "detail":
            self._detail(message)
        # configure, cancel, quit: the hub's probe is the hub's to configure and to stop

    def _detail(self, message: dict[str, Any]) -> None:
        """A process detail asked for: the hub's answer (GET /api/v1/detail) under the request's id,
        in the background (the fleet waits for it by id, and gives up on its own); the environment
        is refused at once (it can hold secrets: the hub does not hand it out)."""
        rid, pid, start = message.get("id"), message.get("pid"), message.get("start_time")
        if not isinstance(rid, str) or not _positive(pid) or not _positive(start):
            return
        if message.get("environ"):
            refused = {"result": "ok", "unreadable": {"environ": NO_ENVIRON}}
            self._put(
                ("record", {"type": "detail", "v": 1, "id": rid, "pid": pid, "start_time": start, **refused})
            )
            return
        task = asyncio.create_task(self._ask_detail(rid, pid, start), name=f"detail-{self.host}-{pid}")
        self._asking.add(task)
        task.add_done_callback(self._asking.discard)

    async def _ask_detail(self, rid: str, pid: int, start_time: int) -> None:
        stream = self._stream
        if stream is None:
            return
        try:
            record = await stream.get_detail(self.host, pid, start_time)
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError):
            return  # no answer: the viewer says it had none in time
        if record is not None and record.get("pid") == pid and not self._closed:
            self._put(("record", dict(record, type="detail", v=1, id=rid)))

    def _resend(self, full: bool) -> None:
        """The host's sample again, whole. Asked for a full scan (a kill plan is being made), it is
        marked as one: the hub plans from a full scan of its own and refuses a plan that differs
        from what the operator was shown (409), so the viewer's plan is only what is shown, and
        waiting for a scan the hub's probe will not be asked for would only delay it."""
        host = self._stream.hosts.get(self.host) if self._stream is not None else None
        if host is None or host.whole is None:
            return
        record = host.whole
        if full:
            scan = record.get("scan")
            record = dict(record, scan=dict(scan if isinstance(scan, dict) else {}, full=True))
        self._put(("record", record))

    def _refuse(self, message: dict[str, Any], words: str, code: str = "refused") -> None:
        self._put(
            (
                "record",
                {"type": "error", "v": 1, "plan": str(message.get("id")), "code": code, "message": words},
            )
        )

    async def _plan(self, plan: dict[str, Any]) -> None:
        body, problem = action_request(self.host, plan)
        if body is None:
            self._refuse(plan, problem or "this plan cannot be sent through a hub")
            return
        assert self._stream is not None
        self._posting += 1
        hub_plan: Any = None
        try:
            status, answer = await self._stream.post_action(body)
            hub_plan = answer.get("plan")
            if status != 200 or not isinstance(hub_plan, str):
                why = answer.get("error") or answer.get("message") or f"the hub answered {status}"
                code = "stale" if status == 409 else "refused"
                self._refuse(plan, f"the hub refused the plan: {why}", code)
            else:
                self._plans[hub_plan] = str(plan.get("id"))
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            raise TransportError("unreachable", f"the hub {self.url}: {_words(exc)}") from None
        finally:
            self._posting -= 1
            self._flush_unmapped()

    def _flush_unmapped(self) -> None:
        """The events held while a request was unanswered, each under the viewer's plan id where its
        plan is now known, in the order they came."""
        held, self._unmapped = list(self._unmapped), deque(maxlen=UNMAPPED_MAX)
        for event in held:
            self._event(event)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        for task in list(self._asking):
            task.cancel()
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.leave(self)
            await _release(self.url, stream)


async def read_hub(url: str) -> HubInfo:
    """The hub's `hub` frame (its hosts, whether this token may act), read once; TransportError when
    the hub cannot be read (unreachable, the token refused)."""
    stream = HubStream(url, token_for(url))
    try:
        await stream.connected()
        assert stream.info is not None
        return stream.info
    finally:
        await stream.close()


def _before(history: dict[str, Any], then: dict[str, Any] | None) -> dict[str, Any]:
    """The hub's history of each GPU without the points at or after the time of the sample `then`
    (the hub gives times to the millisecond: a point within one is that sample's)."""
    at = then.get("time") if then is not None else None
    if not isinstance(at, (int, float)) or isinstance(at, bool):
        return history
    out: dict[str, Any] = {}
    for index, series in history.items():
        times = series.get("time") if isinstance(series, dict) else None
        if not isinstance(times, list):
            out[index] = series
            continue
        keep = sum(1 for t in times if isinstance(t, (int, float)) and t < at - SAME_TIME)
        out[index] = {k: v[:keep] if isinstance(v, list) else v for k, v in series.items()}
    return out


def _positive(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _down(name: str, host: HubHost) -> TransportError:
    reason = host.reason or "down"
    return TransportError(reason, f"{name} is down at the hub: {host.message or reason}")


def action_request(host: str, plan: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The hub's action request for a viewer's kill plan (its targets by PID and start time, its
    GPUs, its ladder), or why it has none: the hub plans again from its own sample."""
    ladder = LADDERS.get(tuple(plan.get("signals") or ("SIGTERM",)))
    if ladder is None:
        return None, "this signal ladder is not offered through a hub (SIGTERM, SIGKILL or SIGINT first)"
    if plan.get("sweep") or plan.get("include_protected") or plan.get("ghosts"):
        return None, "a plan with a sweep, protected processes or ghosts is not sent through a hub"
    targets = [
        [t["pid"], t["start_time"]]
        for t in plan.get("targets") or []
        if isinstance(t, dict) and isinstance(t.get("pid"), int) and isinstance(t.get("start_time"), int)
    ]
    gpus = [g for g in plan.get("gpus") or [] if isinstance(g, int)]
    scope = "pids" if plan.get("scope") == "processes" else "gpus"
    if scope == "pids" and not targets:
        return None, "no process to stop"
    return {"host": host, "scope": scope, "gpus": gpus, "targets": targets, "ladder": ladder}, None

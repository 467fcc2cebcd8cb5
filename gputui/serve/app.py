"""The hub's HTTP side: an aiohttp application over one `Hub` (docs/SERVE.md lists the routes).

    app = make_app(Settings(...), hub)      # the routes below, the headers and the token check
    add_routes(app)                          # (make_app does) another wing adds its own the same way

Every answer carries a strict Content-Security-Policy (the page's own files only: no inline script,
no eval, no frames), `nosniff` and no referrer; the API's answers are never cached. With tokens,
everything but the page, its files and the health checks needs `Authorization: Bearer TOKEN` (401
without a known one; 403 for a viewer's token where an operator's is needed). No cookies are set or
read. A request past `connections` at once is answered 503 (serve/listen.py counts connections
themselves, half-sent ones too; this bound holds where the app runs without it).
"""

from __future__ import annotations

import mimetypes
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from .detail import DETAIL_AT_ONCE, BadQuery, parse_query, read_detail
from .metrics import CONTENT_TYPE, MetricsCache
from .stream import Hub
from .tokens import Holder, Tokens

PAGE = Path(__file__).with_name("page")  # the page's files (index.html, app.js, app.css, ...)
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
NO_STORE = "no-store"
# What needs no token: the page and its files (they hold no data), and the health checks.
OPEN_PATHS = ("/-/healthy", "/-/ready")
API_PREFIXES = ("/api/", "/metrics", "/-/")
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
    ".txt": "text/plain; charset=utf-8",
}
MAX_PAGE_FILE = 8 << 20  # bytes: the page's files are small; anything past this is not served


@dataclass
class Settings:
    """What the hub was started with."""

    tokens: Tokens | None = None
    allow_actions: bool = False
    connections: int = 1024
    page: Path = PAGE
    extra: dict[str, object] = field(default_factory=dict)  # other wings' settings (actions)


HUB = web.AppKey("hub", Hub)
SETTINGS = web.AppKey("settings", Settings)
METRICS = web.AppKey("metrics", MetricsCache)
STATE = web.AppKey("state", dict)  # counters: open requests, latched readiness
HOLDER = web.RequestKey("holder", Holder)  # the token's holder (absent without tokens)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def make_app(settings: Settings, hub: Hub) -> web.Application:
    app = web.Application(middlewares=[_headers, _bounded, _authorized], client_max_size=64 << 10)
    app[HUB] = hub
    app[SETTINGS] = settings
    app[METRICS] = MetricsCache()
    app[STATE] = {"open": 0, "ready": False, "details": 0}
    add_routes(app)
    return app


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/v1/snapshot", snapshot)
    app.router.add_get("/api/v1/events", events)
    app.router.add_get("/api/v1/detail", detail)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/-/healthy", healthy)
    app.router.add_get("/-/ready", ready)
    app.router.add_get("/", page)
    app.router.add_get("/{name:[A-Za-z0-9][A-Za-z0-9._-]*}", page)


def holder(request: web.Request) -> Holder | None:
    """Whose token the request came with (None: the hub has no tokens)."""
    return request.get(HOLDER)


def may_act(request: web.Request) -> bool:
    """Whether this request's sender may act: the hub allows actions and the token is an operator's.
    Without tokens no one may: the actions route refuses every request then (its audit log must
    name who acted), so a viewer must not be offered a kill flow that ends refused."""
    settings = request.app[SETTINGS]
    if not settings.allow_actions or settings.tokens is None:
        return False
    who = holder(request)
    return who is not None and who.operator


def needs_operator(request: web.Request) -> web.Response | None:
    """The answer refusing a request that needs an operator's token (None: it may go on)."""
    if request.app[SETTINGS].tokens is None:
        return None
    who = holder(request)
    if who is None or not who.operator:
        return text_answer(403, "forbidden: an operator's token is needed\n")
    return None


# -- middlewares -----------------------------------------------------------------------------------


@web.middleware
async def _headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await handler(request)
    except web.HTTPException as exc:  # aiohttp's own answers (404 of the router, 405) get them too
        _secure(request, exc)
        raise
    _secure(request, response)
    return response


def _secure(request: web.Request, response: web.StreamResponse) -> None:
    if response.prepared:
        return  # the stream set its own before it began
    response.headers.update(HEADERS)
    if request.path.startswith(API_PREFIXES) or response.status >= 400:
        response.headers["Cache-Control"] = NO_STORE
    elif "Cache-Control" not in response.headers:
        response.headers["Cache-Control"] = "no-cache"


@web.middleware
async def _bounded(request: web.Request, handler: Handler) -> web.StreamResponse:
    state = request.app[STATE]
    if state["open"] >= request.app[SETTINGS].connections:
        return text_answer(503, "too many connections: refused\n")
    state["open"] += 1
    try:
        return await handler(request)
    finally:
        state["open"] -= 1


@web.middleware
async def _authorized(request: web.Request, handler: Handler) -> web.StreamResponse:
    tokens = request.app[SETTINGS].tokens
    if tokens is None or not _guarded(request.path):
        return await handler(request)
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    who = tokens.holder(token.strip()) if scheme.lower() == "bearer" and token.strip() else None
    if who is None:
        answer = text_answer(401, "unauthorized: send Authorization: Bearer TOKEN\n")
        answer.headers["WWW-Authenticate"] = 'Bearer realm="gputui"'
        return answer
    request[HOLDER] = who
    return await handler(request)


def _guarded(path: str) -> bool:
    return path.startswith(API_PREFIXES) and path not in OPEN_PATHS


def text_answer(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text, content_type="text/plain", charset="utf-8")


# -- the routes ------------------------------------------------------------------------------------


async def snapshot(request: web.Request) -> web.Response:
    hub = request.app[HUB]
    return web.Response(body=hub.snapshot_json(), content_type="application/json")


async def events(request: web.Request) -> web.StreamResponse:
    hub = request.app[HUB]
    response = web.StreamResponse(
        headers={
            **HEADERS,
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": NO_STORE,
            "X-Accel-Buffering": "no",  # nginx: pass each frame on at once
        }
    )
    await response.prepare(request)
    try:
        await hub.serve(response.write, may_act(request), request.transport)
    except (ConnectionError, RuntimeError):
        pass  # the client left (aiohttp says so with either)
    return response


async def detail(request: web.Request) -> web.Response:
    """One process of a host in full (gputui/serve/detail.py): 400 for a bad query, 404 for a host
    the hub does not watch, 503 past DETAIL_AT_ONCE waiting, 504 when the host did not answer."""
    try:
        host, pid, start_time = parse_query(request.query)
    except BadQuery as exc:
        return text_answer(400, f"bad request: {exc}\n")
    fleet = request.app[HUB].fleet
    if host not in fleet.sessions:
        return text_answer(404, "no such host on this hub\n")
    state = request.app[STATE]
    if state["details"] >= DETAIL_AT_ONCE:
        return text_answer(503, "too many process details asked for at once: try again\n")
    state["details"] += 1
    try:
        record = await read_detail(fleet, host, pid, start_time)
    finally:
        state["details"] -= 1
    if record is None:
        return text_answer(504, "the host did not answer in time (not connected, or busy with a plan)\n")
    return web.json_response(record)


async def metrics(request: web.Request) -> web.Response:
    hub = request.app[HUB]
    body = request.app[METRICS].text(hub.fleet.hosts, hub.versions())
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


async def healthy(request: web.Request) -> web.Response:
    return text_answer(200, "ok\n")


async def ready(request: web.Request) -> web.Response:
    """200 once every host has been heard from (for good: a host down later is news, not unreadiness)."""
    state = request.app[STATE]
    state["ready"] = state["ready"] or request.app[HUB].ready()
    if state["ready"]:
        return text_answer(200, "ready: every host heard from\n")
    return text_answer(503, "not ready: hosts not yet heard from\n")


async def page(request: web.Request) -> web.StreamResponse:
    """The page's files as they are in its folder; 404 for one that is not there."""
    name = request.match_info.get("name", "index.html")
    folder = request.app[SETTINGS].page
    path = folder / name
    try:
        if path.resolve().parent != folder.resolve() or not path.is_file():
            raise FileNotFoundError(name)
        if path.stat().st_size > MAX_PAGE_FILE:
            raise FileNotFoundError(name)
        body = path.read_bytes()
    except OSError:
        return text_answer(404, "not found\n")
    kind = TYPES.get(path.suffix.lower()) or mimetypes.guess_type(name)[0] or "application/octet-stream"
    return web.Response(body=body, headers={"Content-Type": kind})

"""Requests no client should send, to a real hub (gputui/serve on 127.0.0.1 port 0 in this test's loop,
over a replayed host): each is answered 400 or 401 with the usual headers, never 500, and nothing is
logged for it (a traceback a client can cause at will is a client flooding the hub's log).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp.http_exceptions import HttpProcessingError

from gputui import api
from gputui.fleet.fleet import Fleet
from gputui.model.textsafe import output_ellipsis
from gputui.serve.app import CSP, HEADERS, Settings
from gputui.serve.listen import _ClientLog
from gputui.serve.tokens import Holder, Tokens, digest
from gputui.text.clients import Notices
from tests.support.hubserve import hub_on_loopback

pytestmark = pytest.mark.timeout(120)

OPERATOR = "operator-secret"
TOKENS = Tokens({digest(OPERATOR): Holder("olive", "operator")})
FIXTURE = Path(__file__).parents[1] / "fixtures" / "demo-a.jsonl"


def replayed() -> Fleet:
    """One host that replays its recorded samples: no probe to start."""
    records = api.load_recording(FIXTURE)
    fleet = Fleet()
    fleet.add("demo-a", lambda: api.ReplayLink(records, loop=True, rate=10.0), interval=60.0)
    return fleet


@contextlib.asynccontextmanager
async def hub_url(tmp_path: Path) -> AsyncIterator[str]:
    settings = Settings(tokens=TOKENS, allow_actions=True)
    async with hub_on_loopback(replayed(), 0.3, settings, actions_log=tmp_path / "actions.jsonl") as (url, _):
        yield url


async def raw(url: str, request: bytes) -> bytes:
    """The hub's whole answer to `request`, sent as these bytes (a client that sends what aiohttp's
    client would refuse to)."""
    host, _, port = url.removeprefix("http://").partition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request)
        return await asyncio.wait_for(reader.read(), 60)
    finally:
        writer.close()


def quiet(caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]) -> None:
    """Nothing logged at WARNING or worse; on stderr (where the hub's runner says what it says of
    clients, as `gputui serve` does) at most a line about a malformed request: no fault of the hub's
    in answering (a 500), no traceback."""
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    lines = capfd.readouterr().err.splitlines()
    assert not logged and all("malformed request refused" in line for line in lines), (logged, lines)
    assert len(lines) <= 1, lines


async def test_a_token_that_is_not_utf8_is_401(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    async with hub_url(tmp_path) as url:
        answer = await raw(
            url,
            b"GET /api/v1/snapshot HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xff\xfe\r\n"
            b"Connection: close\r\n\r\n",
        )
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:200]
    assert f"Content-Security-Policy: {CSP}".encode() in answer
    quiet(caplog, capfd)


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ({}, b"[" * 50_000),  # json.loads: RecursionError
        ({"Content-Encoding": "gzip"}, b"abcd"),  # not gzip
        ({"Content-Type": "application/json; charset=nope"}, b"{}"),  # no such codec
        ({"Content-Type": "application/json; charset=utf-16"}, b"{}x"),  # not UTF-16
        ({}, b'"\xff\xfe"'),  # not UTF-8
    ],
    ids=["deep", "gzip", "charset-nope", "utf-16", "not-utf8"],
)
async def test_an_action_body_that_cannot_be_read_is_400(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    headers: dict[str, str],
    body: bytes,
) -> None:
    async with (
        hub_url(tmp_path) as url,
        aiohttp.ClientSession(auto_decompress=False) as client,
        client.post(
            f"{url}/api/v1/actions",
            data=body,
            headers={"Authorization": f"Bearer {OPERATOR}", **headers},
        ) as answer,
    ):
        text = await answer.text()
        assert answer.status == 400, text
        assert answer.headers["Content-Security-Policy"] == CSP
        assert answer.headers["X-Content-Type-Options"] == "nosniff"
        assert answer.headers["Cache-Control"] == "no-store"
        assert "error" in await answer.json()
    quiet(caplog, capfd)


# Requests aiohttp refuses before any route or middleware runs (its parser's 400): the answer is
# aiohttp's own, and was sent without the headers every other answer of the hub carries.
REFUSED_BY_THE_PARSER = {
    "brotli-body": b"POST /api/v1/actions HTTP/1.1\r\nHost: x\r\nContent-Encoding: br\r\n"
    b"Content-Length: 4\r\nConnection: close\r\n\r\nabcd",
    "line-over-8190": b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    "bad-method": b"G\x01T / HTTP/1.1\r\nHost: x\r\n\r\n",
    "length-and-chunked": b"POST /api/v1/actions HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
    b"Transfer-Encoding: chunked\r\n\r\nabcd",
}


@pytest.mark.parametrize("kind", list(REFUSED_BY_THE_PARSER))
async def test_aiohttps_own_400_carries_the_security_headers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str], kind: str
) -> None:
    async with hub_url(tmp_path) as url:
        answer = await raw(url, REFUSED_BY_THE_PARSER[kind])
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    assert head.split(" ", 2)[1] == "400", head
    lines = head.split("\r\n")[1:]
    for name, value in {**HEADERS, "Cache-Control": "no-store"}.items():
        assert f"{name}: {value}" in lines, (kind, head)
    quiet(caplog, capfd)


def test_what_aiohttp_says_of_a_client_is_cut_with_a_mark() -> None:
    """The lines the hub's aiohttp logger becomes (serve/listen.py `_ClientLog`): a client's address
    longer than a line takes, or a long message of aiohttp's, is cut where a mark says so."""
    lines: list[str] = []
    log = _ClientLog(Notices(lines.append, who="gputui serve"))
    address = "fe80::" + "1" * 300
    log.error("Error handling request from %s", address, exc_info=HttpProcessingError())
    log.warning("Web-handler should return a response instance, got %s", "x" * 500)
    assert len(lines) == 2, lines
    peer = lines[0].split(": ")[1]
    assert peer.startswith("fe80::111") and peer.endswith(output_ellipsis()) and len(peer) <= 80, lines
    assert "malformed request refused (400, HttpProcessingError)" in lines[0], lines
    said = lines[1].split(": ", 2)[2]
    assert said.startswith("Web-handler should return") and said.endswith(output_ellipsis()), lines
    assert len(said) <= 200, lines

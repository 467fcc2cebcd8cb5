"""A hub that sends what no hub should, read by the real `gputui snapshot --hub` (gputui/transport/hub.py).

The fake hub is aiohttp on 127.0.0.1 port 0 of this test's loop: its events stream sends exactly the
bytes a test gives it, then keeps the connection open, as a stuck or hostile hub would. Whatever it
sends, the command ends on its own with a clear line and exit 1: never a traceback, never a wait
without end, never the hub's control characters on the terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from gputui import api
from gputui.config.file import HostSpec
from gputui.config.hostlist import MAX_HOSTS
from gputui.fleet.session import LIVE, STALE
from gputui.transport.hub import MAX_LINE
from tests.support.cli import gputui
from tests.support.httpfake import serving
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(180)

HOSTS = ["demo-a", "demo-b"]
NASTY = "\x1b]0;PWNED\x07\x1b[2J\x1b[31mRED\r\x08"
FIXTURE = Path(__file__).parents[1] / "fixtures" / "demo-a.jsonl"
Sender = Callable[[web.StreamResponse], Awaitable[None]]


def frame(event: str, value: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(value)}\n\n".encode()


def hub(hosts: Any = HOSTS, **fields: Any) -> bytes:
    return frame(
        "hub", {"v": 1, "version": "0.1.0", "interval": 1.0, "actions": False, "hosts": hosts, **fields}
    )


def nested(depth: int) -> Any:
    return [nested(depth - 1)] if depth > 1 else [1]


def sends(data: bytes) -> Sender:
    async def send(response: web.StreamResponse) -> None:
        await response.write(data)

    return send


@contextlib.asynccontextmanager
async def fake_hub(send: Sender) -> AsyncIterator[str]:
    """A hub's events stream that is `send`, then silence with the connection open; its URL."""

    async def events(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):  # the client hung up: what a client may do
            await send(response)
            await asyncio.sleep(3600)  # held open until the client goes or the test ends
        return response

    app = web.Application()
    app.router.add_get("/api/v1/events", events)
    async with serving(app) as url:
        yield url


async def snapshot(send: Sender, *extra: str) -> subprocess.CompletedProcess[str]:
    """`gputui snapshot --hub URL` on a fake hub that is `send` (in a thread: the hub serves on this
    loop meanwhile); a run that does not end within the runner's timeout fails the test."""
    async with fake_hub(send) as url:
        return await asyncio.to_thread(
            gputui, "snapshot", "--hub", url, "--timeout", "20", *extra, timeout=90
        )


def one_line(result: subprocess.CompletedProcess[str], words: str) -> None:
    """Exit 1 with one line on stderr that says `words`, nothing on stdout, no traceback."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stdout == "" and len(result.stderr.splitlines()) == 1, (result.stdout, result.stderr)
    assert words in result.stderr, result.stderr


def no_terminal_control(result: subprocess.CompletedProcess[str]) -> None:
    text = result.stdout + result.stderr
    assert "Traceback" not in text and "\x1b" not in text and "\x07" not in text, text


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"event: hub\ndata: " + b"[" * 100_000 + b"\n\n", "hub"),  # RecursionError in json.loads
        (b"event: hub\ndata: {\n\n", "hub"),  # not JSON
        (frame("hub", [1, 2]), "hub"),  # not an object
        (frame("hub", {"v": 1, "hosts": 5}), "hub"),
        (b'event: hub\ndata: {"v":1,"interval":Infinity,"hosts":["demo-a"]}\n\n', "hub"),
    ],
    ids=["deep", "not-json", "a-list", "hosts-a-number", "infinity"],
)
async def test_a_malformed_hub_frame_is_one_line(data: bytes, kind: str) -> None:
    result = await snapshot(sends(data))
    one_line(result, f"sent a malformed {kind} frame")
    no_terminal_control(result)


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (frame("host", ["demo-a", 5]), "host"),
        (frame("host", ["demo-a"]), "host"),
        (frame("hello", ["demo-a", {"type": "hello", "v": 1, "deep": nested(33)}]), "hello"),
        (frame("sample", ["demo-a", {"type": "sample", "v": 2}]), "sample"),
        (b'event: host\ndata: ["demo-a", ' + b"[" * 100_000 + b"\n\n", "host"),
    ],
    ids=["host-state-a-number", "host-no-state", "hello-too-deep", "sample-version-2", "host-deep"],
)
async def test_a_malformed_host_frame_takes_the_hosts_down_with_its_words(data: bytes, kind: str) -> None:
    """After a good `hub` frame: the stream ends, and every host is down with why (the fleet tries
    again, and gets the same), exit 1, at once: not "no answer" after waiting for samples."""
    result = await snapshot(sends(hub() + data))
    assert result.returncode == 1, (result.stdout, result.stderr)
    for name in HOSTS:
        assert name in result.stdout, result.stdout
    assert result.stdout.count(f"sent a malformed {kind} frame") == len(HOSTS), result.stdout
    assert "no answer" not in result.stdout, result.stdout
    no_terminal_control(result)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (hub(v=2), "protocol version 2"),
        (hub(hosts="abc"), "sent a malformed hub frame"),
        (hub(hosts=["demo-a", 7]), "sent a malformed hub frame"),
        (hub(v=True), "protocol version True"),
    ],
    ids=["v2", "hosts-a-string", "a-host-a-number", "v-true"],
)
async def test_the_hub_frames_version_and_hosts_are_checked(data: bytes, words: str) -> None:
    result = await snapshot(sends(data))
    one_line(result, words)


async def test_a_long_protocol_version_is_cut_with_a_mark() -> None:
    """A hub's version that is a long text is quoted cut, and the cut is marked: not sliced at 40
    characters so that it reads as the whole version."""
    result = await snapshot(sends(hub(v="9" * 500)))
    one_line(result, "speaks protocol version '9999")
    shown = result.stderr.split("protocol version ", 1)[1].split(";", 1)[0]
    assert shown.endswith("…") and len(shown) < 80, result.stderr


async def test_a_hub_with_more_hosts_than_a_command_takes_is_refused() -> None:
    result = await snapshot(sends(hub([f"h{i}" for i in range(MAX_HOSTS + 1)])))
    one_line(result, f"more than {MAX_HOSTS:,} hosts in all")


async def test_a_hub_that_only_pings_is_given_up_on() -> None:
    """Pings keep the socket's read timeout from ever firing: the hub's first state has a deadline
    of its own (the command's hang guard is the runner's timeout; no duration is asserted)."""

    async def pings(response: web.StreamResponse) -> None:
        while True:
            await response.write(b": ping\n")
            await asyncio.sleep(0.2)

    result = await snapshot(pings)
    one_line(result, "sent no state")


async def test_endless_data_lines_of_one_frame_are_cut_off() -> None:
    async def flood(response: web.StreamResponse) -> None:
        line = b"data: " + b"x" * 1000 + b"\n"
        while True:
            await response.write(line * 1000)

    result = await snapshot(flood)
    one_line(result, f"sent a frame over {MAX_LINE:,} bytes")


async def test_an_endless_line_is_cut_off() -> None:
    async def flood(response: web.StreamResponse) -> None:
        while True:
            await response.write(b"x" * (1 << 20))

    result = await snapshot(flood)
    one_line(result, f"sent a line over {MAX_LINE:,} bytes")


def recorded(kind: str) -> dict[str, Any]:
    for line in FIXTURE.read_text().splitlines():
        record = json.loads(line)
        if record["type"] == kind:
            return record  # type: ignore[no-any-return]
    raise AssertionError(f"no {kind} in {FIXTURE}")


async def test_the_hubs_reason_for_a_host_down_reaches_the_terminal_escaped() -> None:
    """The hub's reason for a host down (a code, but the hub's to send) is escaped as its words are:
    an OSC title sequence and a clear-screen from it never reach the terminal raw."""
    down = {"status": "down", "reason": "unreachable" + NASTY, "message": "msg" + NASTY, "group": "g" + NASTY}
    result = await snapshot(sends(hub() + frame("host", ["demo-a", down]) + frame("host", ["demo-b", down])))
    assert result.returncode == 1, (result.stdout, result.stderr)
    no_terminal_control(result)
    assert "unreachable\\e]0;PWNED\\x07" in result.stdout, result.stdout


async def test_the_hubs_reason_for_a_host_stale_is_escaped() -> None:
    """A host stale at the hub is stale here with the hub's reason and words: escaped, in the view
    every front end shows."""
    stale = {"status": "stale", "reason": "silent" + NASTY, "message": "quiet" + NASTY}
    data = (
        hub(["demo-a"])
        + frame("host", ["demo-a", {"status": "live"}])
        + frame("hello", ["demo-a", recorded("hello")])
        + frame("sample", ["demo-a", recorded("sample")])
    )
    opened = asyncio.Event()

    async def send(response: web.StreamResponse) -> None:
        await response.write(data)
        await opened.wait()  # the viewer has the host live: now it goes stale
        await response.write(frame("host", ["demo-a", stale]))

    async with fake_hub(send) as url:
        fleet = api.fleet([HostSpec(name="demo-a", address="demo-a", feed=f"hub:{url}")], 1.0)
        fleet.start()
        try:
            view = fleet.view("demo-a")
            assert await eventually(lambda: view.status == LIVE, 60), (view.status, view.reason)
            opened.set()
            assert await eventually(lambda: view.status == STALE, 60), (view.status, view.reason)
            assert view.reason == "silent\\e]0;PWNED\\x07\\e[2J\\e[31mRED\\r\\x08", view.reason
            assert view.detail is not None and "\x1b" not in view.detail and "\\e]0;" in view.detail
        finally:
            await fleet.stop()

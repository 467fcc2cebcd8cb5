"""A Prometheus that misbehaves, as a fake of its HTTP API (aiohttp, on a thread and loop of its own):
one that never answers, one that answers garbage, one that answers 10 MB, one whose series carry
hostile labels. Each is one line, within its bounds, and the other hosts of the fleet are not touched.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator

import pytest
from aiohttp import web

from gputui.config import promql
from gputui.config.file import Config
from gputui.fleet.fleet import Fleet
from gputui.inventory.base import InventoryError
from gputui.inventory.specs import host_specs
from gputui.transport import make_link

EVIL = "evil\x1b[2J\x07 node"


def vector(series: list[tuple[dict[str, str], str]]) -> bytes:
    result = [{"metric": m, "value": [time.time(), v]} for m, v in series]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()


def dcgm(host: str, name: str, value: str, **labels: str) -> tuple[dict[str, str], str]:
    return {"__name__": name, "gpu": "0", "UUID": f"GPU-{host}", "Hostname": host, **labels}, value


def hostile(query: str) -> bytes:
    if query.startswith("label_replace"):  # the times query
        return vector(
            [
                (
                    {"gpu": "0", "UUID": f"GPU-{h}", "Hostname": h, "gputui_series": promql.DCGM_KEY},
                    str(time.time()),
                )
                for h in ("ok-node", EVIL)
            ]
        )
    return vector(
        [
            dcgm("ok-node", "DCGM_FI_DEV_FB_USED", "100", modelName="H100\x1b]0;pwned\x07" + "x" * 5000),
            dcgm("ok-node", "DCGM_FI_DEV_FB_FREE", "900"),
            dcgm(EVIL, "DCGM_FI_DEV_FB_USED", "100"),
        ]
    )


class FakeProm:
    """The query API at /hang, /garbage, /big and /hostile, served on a thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.base = ""
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.runner: web.AppRunner | None = None
        self.release = asyncio.Event()

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        kind = request.match_info["kind"]
        query = (await request.post()).get("query", "")
        if kind == "hang":
            await self.release.wait()  # until the test ends
        if kind == "garbage":
            return web.Response(body=b"<html>\x1b[31mnot an API</html>\n" * 10, status=502)
        if kind == "big":
            return web.Response(body=b'{"status": "success", "data": {"x": "' + b"y" * (10 << 20) + b'"}}')
        return web.Response(body=hostile(str(query)), content_type="application/json")

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_post("/{kind}/api/v1/query", self._answer)
        self.runner = web.AppRunner(app)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.base = f"http://127.0.0.1:{port}"
        self.ready.set()
        self.loop.run_forever()

    def start(self) -> None:
        self.thread.start()
        assert self.ready.wait(30)

    def stop(self) -> None:
        async def down() -> None:
            self.release.set()
            if self.runner is not None:
                await self.runner.cleanup()

        asyncio.run_coroutine_threadsafe(down(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProm]:
    monkeypatch.setattr(promql, "QUERY_TIMEOUT", 1.0)
    monkeypatch.setattr(promql, "MAX_BODY", 1 << 20)
    server = FakeProm()
    server.start()
    yield server
    server.stop()


def test_the_source_says_one_line_and_lists_no_hostile_name(fake: FakeProm) -> None:
    for kind, words in (("garbage", "not JSON"), ("hang", "no answer within 1 s"), ("big", "over 1 MiB")):
        with pytest.raises(InventoryError) as caught:
            host_specs([f"@prometheus:{fake.base}/{kind}"], Config())
        assert words in caught.value.message and "\n" not in caught.value.message, caught.value.message
        assert caught.value.unavailable  # like a host that is down: exit 1
    specs = host_specs([f"@prometheus:{fake.base}/hostile"], Config())
    assert [s.name for s in specs] == ["ok-node"]  # a name that could not be an SSH argument is left out


async def test_a_bad_prometheus_is_one_line_and_the_other_hosts_stay_live(fake: FakeProm) -> None:
    fleet = Fleet()
    good = host_specs([f"@prometheus:{fake.base}/hostile"], Config())[0]
    bad = {kind: promql.parse_feed(f"{fake.base}/{kind}").feed for kind in ("hang", "garbage", "big")}
    for spec in [
        good,
        *(type(good)(name=kind, address=kind, feed=feed, read_only=True) for kind, feed in bad.items()),
    ]:
        fleet.add(spec.name, lambda spec=spec: make_link(spec, interval=0.5), read_only=True, interval=0.5)
    expected = (("hang", "no answer within 1 s"), ("garbage", "not JSON"), ("big", "over 1 MiB"))
    fleet.start()
    try:
        # Until each bad host is down in its own words: on a busy machine an attempt at the garbage
        # may run past the 1 s limit first (a timeout, rightly said); a later attempt says garbage.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            views = {v.name: v for v in fleet.hosts}
            if views["ok-node"].status == "live" and all(
                words in (views[kind].shown_detail or "") for kind, words in expected
            ):
                break
            await asyncio.sleep(0.05)
        views = {v.name: v for v in fleet.hosts}
        assert views["ok-node"].status == "live"
        sample = views["ok-node"].sample
        assert sample is not None and sample.gpus[0].memory_used == 100 << 20
        name = sample.gpus[0].name or ""
        assert "\x1b" not in name and "\x07" not in name and len(name) <= 2 * promql.MAX_LABEL
        for kind, words in expected:
            view = views[kind]
            # Between two attempts it is "connecting", still down, in the failed attempt's words.
            why = view.shown_detail or ""
            assert view.shown_status == "down", (kind, view.status, why)
            assert words in why and "\n" not in why, (kind, view.status, why)
    finally:
        await fleet.stop()

"""A fake of Prometheus' query API for the source's tests (aiohttp on 127.0.0.1 port 0 of the test's
loop): what it answers is the test's (`Answers.answer(query)`), and the fleet of that feed's hosts."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from aiohttp import web

from gputui.config import promql
from gputui.config.file import HostSpec
from gputui.fleet.fleet import Fleet
from gputui.transport import make_link
from tests.support.httpfake import serving


class Answers(Protocol):
    def answer(self, query: str) -> bytes: ...


@contextlib.asynccontextmanager
async def fake_prometheus(series: Answers) -> AsyncIterator[str]:
    async def query(request: web.Request) -> web.Response:
        form = await request.post()
        return web.Response(body=series.answer(str(form.get("query", ""))), content_type="application/json")

    app = web.Application()
    app.router.add_post("/api/v1/query", query)
    async with serving(app) as url:
        yield url


def memory_used(fleet: Fleet, name: str) -> int | None:
    sample = fleet.view(name).sample
    return sample.gpus[0].memory_used if sample is not None and sample.gpus else None


def prom_fleet(url: str, hosts: Sequence[str]) -> Fleet:
    feed = promql.parse_feed(url).feed
    fleet = Fleet()
    for name in hosts:
        spec = HostSpec(name=name, address=name, feed=feed, read_only=True)
        fleet.add(name, lambda spec=spec: make_link(spec, interval=0.5), read_only=True, interval=0.5)
    return fleet

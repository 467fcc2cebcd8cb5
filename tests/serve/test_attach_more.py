"""An attached dashboard (gputui/transport/hub.py) where the hub does not relay what a direct link does:
signals (F9's menu, the process detail's `k`) and GPU resets are refused at once, in the dashboard,
with words that say where to run them, and nothing reaches the hub; the process detail (`d`) is the
hub's answer (GET /api/v1/detail), the environment (`e`) refused at once. A real hub (the serve
package in this test's loop, on 127.0.0.1 port 0) over real sim probes, every request it answers
counted.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gputui import api
from gputui.config.file import HostSpec
from gputui.fleet.fleet import Fleet
from gputui.model import IDLE_SLACK
from gputui.serve.actions import add_routes as add_action_routes
from gputui.serve.app import Settings, make_app
from gputui.serve.stream import Hub
from gputui.serve.tokens import Holder, Tokens, digest
from gputui.transport import hub as hubs
from gputui.transport.local import LocalLink
from gputui.ui import GpuTuiApp
from gputui.ui import make_app as make_dashboard
from gputui.ui.screens.choose import ChooseScreen
from gputui.ui.screens.environ import EnvironScreen
from gputui.ui.screens.gpu_detail import GpuDetailScreen
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.plan import PlanScreen
from gputui.ui.screens.proc_detail import ProcDetailScreen
from gputui.ui.screens.reset import ResetScreen
from gputui.ui.screens.signal import SignalScreen
from gputui.ui.widgets.proc_table import proc_row_key
from tests.support.pilot import main_of, redrawn, screen_text, wait_for

pytestmark = pytest.mark.timeout(240)  # real sim probes on a busy machine

INTERVAL = 0.3
ALICE = "alice-operator-token"
TOKENS = Tokens({digest(ALICE): Holder("alice", "operator")})
# demo-a: the demo's processes; p: the preflight scenario, whose GPU 1 holds orphaned memory.
SPECS = (
    HostSpec(name="demo-a", reader="sim", sim_scenario="demo", sim_variant=0, sim_seed=1),
    HostSpec(name="p", reader="sim", sim_scenario="preflight", sim_seed=9),
)
HUB_WORDS = "not sent through a hub: run them on the hub's side"


@dataclass
class Served:
    url: str
    fleet: Fleet
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path) the hub answered

    def asked(self) -> list[tuple[str, str]]:
        """Every request but the events stream the viewer holds open."""
        return [r for r in self.requests if r[1] != hubs.EVENTS]


@contextlib.asynccontextmanager
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """A hub that lets Alice act, over SPECS, counting each request it answers."""
    fleet = Fleet()
    for spec in SPECS:
        fleet.add(spec.name, lambda s=spec: LocalLink(s, interval=INTERVAL), interval=INTERVAL)
    hub = Hub(fleet, INTERVAL, 60.0)
    app = make_app(Settings(tokens=TOKENS, allow_actions=True), hub)
    add_action_routes(app, tmp_path / "hub-actions.jsonl")
    requests: list[tuple[str, str]] = []

    async def count(request: web.Request, _: web.StreamResponse) -> None:
        requests.append((request.method, request.path))

    app.on_response_prepare.append(count)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    result = Served(f"http://{host}:{port}", fleet, requests)
    fleet.start()
    hub.start()
    try:
        await fleet.wait_first_samples(60)
        yield result
    finally:
        await runner.cleanup()
        await hub.stop()
        await fleet.stop()


def attached(url: str) -> Fleet:
    """The dashboard's fleet on the hub's hosts, as `gputui --hub URL` builds it."""
    return api.fleet([HostSpec(name=s.name, address=s.name, feed=f"hub:{url}") for s in SPECS], INTERVAL)


def notes(app: GpuTuiApp) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


async def test_signals_and_resets_are_refused_at_once_through_a_hub(tmp_path: Path) -> None:
    async with served(tmp_path) as hub:
        hubs.remember_token(hub.url, ALICE)
        fleet = attached(hub.url)
        app = make_dashboard(fleet, interval=INTERVAL, log_path=tmp_path / "viewer.jsonl")
        async with app.run_test(size=(120, 36)) as pilot:
            view = fleet.view("demo-a")
            await wait_for(pilot, lambda: all(v.sample is not None and v.can_kill for v in fleet.hosts), 60)
            main = main_of(app)
            main.select_host("demo-a")
            await redrawn(pilot)
            main.proc_table.focus()
            assert view.sample is not None
            proc = next(p for p in view.sample.processes if p.kind == "user" and p.start_time)
            assert main.proc_table.move_to(proc_row_key(proc), scroll=True)
            before = hub.asked()

            # F9: no menu, no dialog; the words say where to run it.
            await pilot.press("f9")
            await wait_for(pilot, lambda: any(HUB_WORDS in n for n in notes(app)))
            assert isinstance(app.screen, MainScreen)
            assert not any(isinstance(s, (ChooseScreen, PlanScreen)) for s in app.screen_stack)
            assert any(n.startswith("Signal: not offered here: demo-a: Signals are") for n in notes(app))

            # The process detail's k: no chooser.
            app.push_screen(ProcDetailScreen("demo-a", proc))
            await wait_for(pilot, lambda: isinstance(app.screen, ProcDetailScreen))
            app._notifications.clear()
            await pilot.press("k")
            await wait_for(pilot, lambda: any(HUB_WORDS in n for n in notes(app)))
            assert isinstance(app.screen, ProcDetailScreen) and "k signal" not in screen_text(app)
            await pilot.press("escape")

            # The GPU view of orphaned memory: no dry run, no dialog; the hint says why.
            p = fleet.view("p")
            await wait_for(pilot, lambda: _orphaned(p) is not None, 60)
            app.push_screen(GpuDetailScreen("p", _orphaned(p) or 0))
            await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
            app._notifications.clear()
            await wait_for(pilot, lambda: "GPU resets are not sent through a hub" in _words(app))
            assert "Reset GPU" not in _words(app)
            await pilot.press("r")
            await wait_for(pilot, lambda: any(HUB_WORDS in n for n in notes(app)))
            assert not any(isinstance(s, ResetScreen) for s in app.screen_stack)
            await pilot.pause(0.5)
            assert not any(isinstance(s, (SignalScreen, PlanScreen, ResetScreen)) for s in app.screen_stack)
        # Nothing was asked of the hub meanwhile (no action, no plan to refuse later) but the process
        # detail the `k` was pressed on.
        assert before == [] and set(hub.asked()) == {("GET", hubs.DETAIL)}, hub.requests


def _orphaned(view: Any) -> int | None:
    sample = view.sample
    if sample is None:
        return None
    return next(
        (g.index for g in sample.gpus if g.accounting is not None and g.accounting.orphaned > IDLE_SLACK),
        None,
    )


def _words(app: GpuTuiApp) -> str:
    return " ".join(screen_text(app).split())


async def test_the_process_detail_is_the_hubs_and_the_environment_is_refused(tmp_path: Path) -> None:
    async with served(tmp_path) as hub:
        hubs.remember_token(hub.url, ALICE)
        fleet = attached(hub.url)
        app = make_dashboard(fleet, interval=INTERVAL, log_path=tmp_path / "viewer.jsonl")
        async with app.run_test(size=(120, 40)) as pilot:
            view = fleet.view("demo-a")
            await wait_for(pilot, lambda: view.sample is not None, 60)
            main = main_of(app)
            main.select_host("demo-a")
            await redrawn(pilot)
            main.proc_table.focus()
            assert view.sample is not None
            proc = next(p for p in view.sample.processes if p.kind == "user" and p.start_time)
            assert main.proc_table.move_to(proc_row_key(proc), scroll=True)
            await pilot.press("d")
            await wait_for(pilot, lambda: isinstance(app.screen, ProcDetailScreen))
            screen = app.screen
            assert isinstance(screen, ProcDetailScreen)
            await wait_for(pilot, lambda: screen.status != "reading")
            detail = screen.detail
            assert screen.status == "read" and detail is not None, screen.status
            assert detail.pid == proc.pid and detail.start_time == proc.start_time
            assert detail.command == proc.command and detail.cwd and detail.environ is None
            assert detail.cwd == os.readlink(f"/proc/{proc.pid}/cwd")
            await wait_for(pilot, lambda: detail.cwd in _words(app))
            assert ("GET", "/api/v1/detail") in hub.requests

            # The environment: not asked of the hub; the words say why.
            asked = len(hub.requests)
            await pilot.press("e")
            await wait_for(pilot, lambda: isinstance(app.screen, EnvironScreen))
            await wait_for(pilot, lambda: "a process's environment can hold secrets" in _words(app))
            assert "Not read: not through a hub" in _words(app)
            assert len(hub.asked()) == len([r for r in hub.requests[:asked] if r[1] != hubs.EVENTS])


async def test_the_detail_route_reads_with_a_token_and_bounds_its_query(tmp_path: Path) -> None:
    async with served(tmp_path) as hub:
        sample = hub.fleet.view("demo-a").sample
        assert sample is not None
        proc = next(p for p in sample.processes if p.kind == "user" and p.start_time)
        url = hub.url + hubs.DETAIL
        query = {"host": "demo-a", "pid": str(proc.pid), "start": str(proc.start_time), "environ": "1"}
        auth = {"Authorization": f"Bearer {ALICE}"}
        async with aiohttp.ClientSession() as session:
            async with session.get(url, params=query) as r:
                assert r.status == 401
            async with session.get(url, params=query, headers=auth) as r:
                assert r.status == 200
                record = await r.json()
            assert record["type"] == "detail" and record["result"] == "ok"
            assert record["pid"] == proc.pid and record["command"] == list(proc.command)
            assert "environ" not in record  # never asked of the host, whatever the query says
            assert all(isinstance(f, dict) for f in record["fds"] + record["parents"])
            # Another start time: the PID is not that process.
            async with session.get(
                url, params=dict(query, start=str(proc.start_time + 1)), headers=auth
            ) as r:
                assert r.status == 200 and (await r.json())["result"] == "pid-reused"
            for bad in ({"pid": "-1"}, {"pid": "1e3"}, {"start": ""}, {"host": ""}, {"pid": "9" * 30}):
                async with session.get(url, params={**query, **bad}, headers=auth) as r:
                    assert r.status == 400, bad
                    assert len((await r.text()).splitlines()) == 1
            async with session.get(url, params=dict(query, host="\x1b[2Jnowhere"), headers=auth) as r:
                assert r.status == 404 and "\x1b" not in await r.text()

"""Terminals and scripts that attach to a hub (gputui/transport/hub.py, gputui/serve/actions.py): a real
hub (the serve package in this test's loop, on 127.0.0.1 port 0) over real sim probes, read by the
real CLI (`snapshot --hub`, `wait --hub` as subprocesses) and by the dashboard (Pilot).

Read-only without a token that may act; with an operator's token and --allow-actions a kill from the
attached dashboard is planned and run on the hub (its audit log names the operator, the process is
gone, the viewer shows the verdict); a viewer's token is refused (403), a stale target too (409).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gputui import api
from gputui.config.file import HostSpec
from gputui.fleet.fleet import Fleet
from gputui.fleet.session import DOWN
from gputui.kill.auditlog import read_records
from gputui.model import Proc
from gputui.serve.app import Settings
from gputui.serve.tokens import Holder, Tokens, digest
from gputui.transport import hub as hubs
from gputui.transport.local import LocalLink
from gputui.ui import make_app as make_dashboard
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.plan import PlanScreen
from gputui.ui.widgets.proc_table import proc_row_key
from tests.support.apps import Unreachable
from tests.support.hubserve import hub_on_loopback
from tests.support.pilot import dialog, log_text, main_of, redrawn, screen_text, wait_for

pytestmark = pytest.mark.timeout(240)  # real sim probes on a busy machine

INTERVAL = 0.3
ALICE, BOB = "alice-operator-token", "bob-viewer-token"
TOKENS = Tokens({digest(ALICE): Holder("alice", "operator"), digest(BOB): Holder("bob", "viewer")})


@dataclass
class Served:
    url: str
    fleet: Fleet
    log: Path


@contextlib.asynccontextmanager
async def served(tmp_path: Path, settings: Settings, down: bool = False) -> AsyncIterator[Served]:
    """A hub over demo-a and demo-b (real sim probes; with `down`, gpu-9 that cannot be reached),
    actions' audit log in tmp_path, on a free loopback port until the block ends."""
    fleet = Fleet()
    for i, name in enumerate(("demo-a", "demo-b")):
        spec = HostSpec(name=name, reader="sim", sim_scenario="demo", sim_variant=i, sim_seed=1)
        read_only = not settings.allow_actions
        fleet.add(
            name, lambda s=spec: LocalLink(s, interval=INTERVAL), read_only=read_only, interval=INTERVAL
        )
    if down:
        fleet.add("gpu-9", Unreachable, interval=INTERVAL)
    log = tmp_path / "hub-actions.jsonl"
    async with hub_on_loopback(fleet, INTERVAL, settings, actions_log=log) as (url, _):
        await fleet.wait_first_samples(60)
        yield Served(url, fleet, log)


async def gputui(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """The real CLI in a subprocess (this loop keeps serving meanwhile): exit code, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gputui",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def attached(url: str) -> Fleet:
    """The dashboard's fleet on the hub's hosts, as `gputui --hub URL` builds it."""
    specs = [HostSpec(name=n, address=n, feed=f"hub:{url}") for n in ("demo-a", "demo-b")]
    return api.fleet(specs, INTERVAL)


async def test_snapshot_and_wait_read_the_hub(tmp_path: Path) -> None:
    async with served(tmp_path, Settings(), down=True) as hub:
        code, out, err = await gputui("snapshot", "--hub", hub.url, "--json")
        document = json.loads(out)
        hosts = {h["name"]: h for h in document["hosts"]}
        assert list(hosts) == ["demo-a", "demo-b", "gpu-9"]
        assert hosts["demo-a"]["status"] == "live" and hosts["demo-a"]["gpus"]
        assert len(hosts["demo-b"]["gpus"]) == 8
        # Down at the hub is down here, with the hub's reason; a host down is exit 1, as ever.
        assert hosts["gpu-9"]["status"] == DOWN and hosts["gpu-9"]["reason"] == "unreachable"
        assert code == 1, err

        code, out, err = await gputui("wait", "--hub", hub.url, "--gpu", "demo-b:5", "--timeout", "30")
        assert code == 0 and "ready: demo-b GPU 5" in out + err, (out, err)


async def test_bad_url_unreachable_hub_and_refused_token(tmp_path: Path) -> None:
    code, out, err = await gputui("snapshot", "--hub", "ftp://example.org/\x1b[2J")
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "\x1b" not in err, err
    code, out, err = await gputui("snapshot", "--hub", "http://127.0.0.1:1")
    assert code == 1 and len(err.splitlines()) == 1 and "cannot connect" in err, err
    async with served(tmp_path, Settings(tokens=TOKENS)) as hub:
        code, out, err = await gputui("snapshot", "--hub", hub.url, env={hubs.TOKEN_ENV: "wrong"})
        assert code == 1 and len(err.splitlines()) == 1 and "401" in err, err
        token = tmp_path / "token"
        token.write_text(BOB + "\n")
        code, out, err = await gputui("snapshot", "--hub", hub.url, "--hub-token-file", str(token))
        assert code == 0 and "demo-a" in out, err


async def test_attached_dashboard_shows_the_hub_read_only(tmp_path: Path) -> None:
    async with served(tmp_path, Settings()) as hub:
        fleet = attached(hub.url)
        app = make_dashboard(fleet, interval=INTERVAL, log_path=tmp_path / "viewer.jsonl")
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for(pilot, lambda: all(v.sample is not None for v in fleet.hosts), 60)
            await redrawn(pilot)
            assert "2 live" in screen_text(app)
            view = fleet.view("demo-a")
            # The hub's history seeded the rings: more readings than samples this viewer got.
            assert view.history[0].times
            assert view.facts is not None and view.facts.read_only and not view.can_kill
            main = main_of(app)
            main.select_host("demo-a")
            main.gpu_table.focus()
            await redrawn(pilot)
            await pilot.press("down", "f", "F")
            await pilot.pause(0.3)
            assert isinstance(app.screen, MainScreen)
            assert not any(isinstance(s, PlanScreen) for s in app.screen_stack)


async def test_a_kill_from_the_attached_dashboard_runs_on_the_hub(tmp_path: Path) -> None:
    async with served(tmp_path, Settings(tokens=TOKENS, allow_actions=True)) as hub:
        hubs.remember_token(hub.url, ALICE)
        fleet = attached(hub.url)
        app = make_dashboard(fleet, interval=INTERVAL, log_path=tmp_path / "viewer.jsonl")
        async with app.run_test(size=(120, 36)) as pilot:
            view = fleet.view("demo-a")
            await wait_for(pilot, lambda: view.sample is not None and view.can_kill, 60)
            main = main_of(app)
            main.select_host("demo-a")
            await redrawn(pilot)
            main.proc_table.focus()
            assert view.sample is not None
            [server] = [
                p for p in view.sample.on_gpu(0) if any(a.endswith("vllm_serve.py") for a in p.command)
            ]
            assert main.proc_table.move_to(proc_row_key(server), scroll=True)
            await pilot.press("space", "x")
            await dialog(pilot)
            await pilot.press("ctrl+k")
            await wait_for(pilot, lambda: "verdict:" in log_text(main), 60)
            assert "verdict: stopped" in log_text(main), log_text(main)
        # The hub planned and ran it: its audit log names the operator; the process is gone.
        records, _ = read_records(hub.log)
        assert records and all(r.get("operator") == "alice" for r in records if "operator" in r)
        assert any(r.get("stage") == "done" and r.get("result") == "stopped" for r in records)
        assert not _alive(server.pid, server.start_time)


async def test_actions_refused_to_a_viewer_and_for_a_stale_target(tmp_path: Path) -> None:
    async with served(tmp_path, Settings(tokens=TOKENS, allow_actions=True)) as hub:
        sample = hub.fleet.view("demo-a").sample
        assert sample is not None
        proc = next(p for p in sample.processes if p.kind == "user")
        body = {"host": "demo-a", "scope": "pids", "gpus": [], "targets": [[proc.pid, proc.start_time]]}
        async with aiohttp.ClientSession() as session:
            url = hub.url + hubs.ACTIONS
            async with session.post(url, json=body, headers={"Authorization": f"Bearer {BOB}"}) as r:
                assert r.status == 403
            stale = dict(body, targets=[[proc.pid, (proc.start_time or 0) + 1]])
            async with session.post(url, json=stale, headers={"Authorization": f"Bearer {ALICE}"}) as r:
                assert r.status == 409
                assert "no longer there" in (await r.json())["error"]
        assert _alive(proc.pid, proc.start_time)
        # A viewer's token attaches read-only: the hub's `hub` frame says it may not act.
        hubs.remember_token(hub.url, BOB)
        info = await hubs.read_hub(hub.url)
        assert info.hosts == ["demo-a", "demo-b"] and not info.actions


async def test_a_refusal_of_many_stale_targets_says_how_many_it_left_out(tmp_path: Path) -> None:
    """A 409 lists the first targets that are gone and counts the rest: not 8 PIDs of 10 as if
    they were all."""
    async with served(tmp_path, Settings(tokens=TOKENS, allow_actions=True)) as hub:
        proc = _of_kind(hub, "demo-a", "user")
        stale = [[proc.pid, (proc.start_time or 0) + i] for i in range(1, 11)]
        status, answer = await _post_action(hub, "demo-a", stale, ALICE)
        assert status == 409
        error = answer["error"]
        assert "no longer there" in error and error.endswith(" and 2 more"), error
        assert error.count(f"{proc.pid} (started") == 8, error
        assert _alive(proc.pid, proc.start_time)


def _of_kind(hub: Served, host: str, kind: str) -> Proc:
    """A process of `kind` on `host`, as the hub's last sample lists it."""
    sample = hub.fleet.view(host).sample
    assert sample is not None
    return next(p for p in sample.processes if p.kind == kind)


async def _post_action(hub: Served, host: str, targets: list[list[Any]], token: str) -> tuple[int, Any]:
    """POST /api/v1/actions naming `targets` ([pid, start_time]) on `host`: (status, answer)."""
    body = {"host": host, "scope": "pids", "gpus": [], "targets": targets}
    async with (
        aiohttp.ClientSession() as session,
        session.post(hub.url + hubs.ACTIONS, json=body, headers={"Authorization": f"Bearer {token}"}) as r,
    ):
        return r.status, await r.json(content_type=None)


def _alive(pid: int, start_time: int | None) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return False
    return fields[0] != "Z" and int(fields[19]) == start_time


async def test_a_stream_closes_while_the_hub_still_streams() -> None:
    """Closing a viewer's stream (`read_hub` does, right after the `hub` frame) ends the connection
    then and there, with the hub's whole state still coming and samples after it: the hub's stream
    never ends of itself, so a close that waited for its end would wait forever."""
    recorded = api.load_recording(Path(__file__).parents[1] / "fixtures" / "demo-a.jsonl")
    records = [r for r in recorded if r["type"] == "hello"][:1] + [
        r for r in recorded if r["type"] == "sample"
    ]
    fleet = Fleet()
    for i in range(64):  # each host its recorded samples, ten a second, again and again
        fleet.add(f"h{i:02d}", lambda: api.ReplayLink(records, loop=True, rate=10.0), interval=60.0)
    async with hub_on_loopback(fleet, INTERVAL) as (url, _):
        await fleet.wait_first_samples(60)
        for _ in range(3):
            stream = hubs.HubStream(url, None)
            await stream.connected()
            assert stream.info is not None and len(stream.info.hosts) == 64
            await asyncio.wait_for(stream.close(), 60)
            info = await asyncio.wait_for(hubs.read_hub(url), 60)
            assert len(info.hosts) == 64


async def test_a_plan_of_zombies_alone_is_refused_as_clean_refuses_it(tmp_path: Path) -> None:
    """POST /api/v1/actions naming demo-b's zombie alone: no signal reaches a zombie, so `gputui
    clean` refuses such a plan (exit 4, "nothing was signalled: ..."). The hub ran it and answered
    200, its verdict "stopped"; it refuses it now (409), in clean's words, and runs nothing."""
    async with served(tmp_path, Settings(tokens=TOKENS, allow_actions=True)) as hub:
        zombie = _of_kind(hub, "demo-b", "zombie")
        status, answer = await _post_action(hub, "demo-b", [[zombie.pid, zombie.start_time]], ALICE)
        assert status == 409, answer
        error = answer["error"]
        assert error.startswith("nothing was signalled: ") and f"parent {zombie.ppid}" in error, error
        assert "stopped" not in error, error
        records, _ = read_records(hub.log) if hub.log.exists() else ([], None)
        assert not any(r.get("stage") == "done" for r in records), records


async def test_a_plan_naming_a_protected_process_is_refused_as_clean_refuses_it(tmp_path: Path) -> None:
    """POST /api/v1/actions naming a user process and demo-a's monitor: `gputui clean --pid` naming a
    protected process refuses the whole plan (exit 4, "... is protected ..."). The hub ran the rest
    of it (200: the user process stopped, the monitor in `refused`); it refuses it now (409), in
    clean's words, its hint saying what stops a monitor, since a hub has no --include-monitor."""
    async with served(tmp_path, Settings(tokens=TOKENS, allow_actions=True)) as hub:
        user = _of_kind(hub, "demo-a", "user")
        sample = hub.fleet.view("demo-a").sample
        assert sample is not None
        [monitor] = [p for p in sample.processes if p.protected == "monitor"]
        named = [[user.pid, user.start_time], [monitor.pid, monitor.start_time]]
        status, answer = await _post_action(hub, "demo-a", named, ALICE)
        assert status == 409, answer
        error = answer["error"]
        assert error.startswith(f"{monitor.pid} (nv-hostengine) is "), error
        assert "--include-monitor stops it anyway" not in error, error
        assert "a hub stops no monitor" in error, error
        status, answer = await _post_action(hub, "demo-a", named[1:], ALICE)  # the monitor alone
        assert status == 409 and answer["error"].startswith(f"{monitor.pid} (nv-hostengine) is "), answer
        assert _alive(user.pid, user.start_time) and _alive(monitor.pid, monitor.start_time)
        records, _ = read_records(hub.log) if hub.log.exists() else ([], None)
        assert not any(r.get("stage") == "done" for r in records), records

"""The dashboard over `@prometheus:` hosts, by Pilot: a real Prometheus (Debian's) scraping `gputui
export` over the test's own demo and a dcgm-exporter exposition (tests/prom/servers.py). The fleet
view shows both kinds of host with their GPUs, memory and the pod dcgm-exporter names; `enter` on a
Prometheus host opens the same host over SSH (a real sshd on loopback, reached through the ssh_config
under the test's own HOME), and says so when it cannot. Every process is the test's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gputui import api
from gputui.cli.fleets import over_ssh
from gputui.config.file import Config
from gputui.fleet.session import LIVE
from gputui.inventory.specs import host_specs
from gputui.ui.app import GpuTuiApp
from gputui.ui.factory import make_app
from gputui.ui.screens.main import MainScreen
from gputui.ui.widgets.fleet_table import fleet_row_key
from tests.prom.servers import (
    dcgm_gpu,
    exposition,
    prometheus_over,
)
from tests.support.pilot import screen_text
from tests.support.pilot import wait_for as pilot_wait
from tests.support.prometheus import PROMETHEUS, Prometheus
from tests.support.sshd import SshEnv, have_sshd

pytestmark = [
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus not installed (Debian package `prometheus`)"),
    pytest.mark.timeout(600),
]
TWIN = "gpu-twin"  # a dcgm host that the test's ssh_config reaches (127.0.0.1, the test's sshd)
FAR = "gpu-far"  # a dcgm host that no ssh_config names and no resolver knows


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    dcgm = exposition(
        [
            dcgm_gpu(TWIN, 0, 40000, 97, ("ml", "train-0", "trainer")),
            dcgm_gpu(TWIN, 1, 0, 0),
            dcgm_gpu(FAR + ".invalid", 0, 512, 3),
        ]
    )
    with prometheus_over(tmp_path_factory.mktemp("promdash"), dcgm, 3) as server:
        yield server


def dashboard(prom: Prometheus, log: Path, read_only: bool = False) -> GpuTuiApp:
    specs = host_specs([f"@prometheus:{prom.base}"], Config())
    fleet = api.fleet(specs, interval=1.0)
    return make_app(
        fleet,
        interval=1.0,
        log_path=log,
        read_only=read_only,
        over_ssh=over_ssh(fleet, specs, 1.0, read_only),
    )


async def live(pilot: Any, *hosts: str) -> MainScreen:
    app: GpuTuiApp = pilot.app
    await pilot_wait(
        pilot, lambda: all(v.status == LIVE for v in app.fleet.hosts if v.name in hosts), timeout=120
    )
    await pilot.pause()
    assert app._main is not None
    return app._main


async def test_the_fleet_view_shows_both_kinds_of_series(prom: Prometheus, tmp_path: Path) -> None:
    app = dashboard(prom, tmp_path / "audit.log")
    async with app.run_test(size=(200, 50)) as pilot:
        main = await live(pilot, TWIN, "demo-a", "demo-b")
        await pilot_wait(pilot, lambda: fleet_row_key(TWIN, 0) in main.fleet_table.rows_data(), 60)
        rows = main.fleet_table.rows_data()
        # dcgm-exporter's host: its GPUs with memory (MiB in the series) and utilization, read-only.
        twin0 = rows[fleet_row_key(TWIN, 0)]
        assert "39.1" in twin0["memory"].plain and twin0["util"].plain.strip() == "97%"
        assert fleet_row_key(TWIN, 1) in rows
        # gputui's own series: every GPU of the demo's hosts.
        assert sum(1 for k in rows if k.endswith("@demo-b")) == 8
        assert sum(1 for k in rows if k.endswith("@demo-a")) == 4
        # The pod dcgm-exporter gave GPU 0 is what holds it; GPU 1 has none.
        assert twin0["holders"].plain == "pod ml/train-0/trainer"
        assert "pod" not in rows[fleet_row_key(TWIN, 1)]["holders"].plain
        text = screen_text(app)
        assert TWIN in text and "demo-b" in text and "ml/train-0/trainer" in text
        assert {v.name: v.read_only for v in app.fleet.hosts}[TWIN] is True


@pytest.fixture
def ssh_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SshEnv]:
    """A real sshd on loopback, named TWIN in the ssh_config of the test's own HOME."""
    if not have_sshd():
        pytest.skip("OpenSSH sshd is not installed (.ci/run installs it)")
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)  # a developer's agent must not change the outcome
    env = SshEnv(tmp_path / "ssh")
    try:
        env.add(TWIN)
        home = tmp_path / "home"
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "config").write_text(env.ssh_config.read_text())
        (home / ".ssh" / "known_hosts").write_text(env.known_hosts.read_text())
        monkeypatch.setenv("HOME", str(home))
        yield env
    finally:
        env.close()


async def test_enter_on_a_prometheus_host_opens_it_over_ssh(
    prom: Prometheus, ssh_home: SshEnv, tmp_path: Path
) -> None:
    app = dashboard(prom, tmp_path / "audit.log")
    twin = f"{TWIN} (ssh)"
    async with app.run_test(size=(200, 50)) as pilot:
        main = await live(pilot, TWIN)
        await pilot_wait(pilot, lambda: main.host_list.move_to(TWIN), 60)
        main.host_list.focus()
        await pilot.pause()
        await pilot.press("enter")
        await pilot_wait(pilot, lambda: twin in app.fleet.sessions, 10)
        # The same host over SSH, beside the Prometheus one, in view; not read-only.
        view = app.fleet.view(twin)
        assert not view.read_only and main.state.host == twin
        await pilot_wait(pilot, lambda: view.status == LIVE, 120)
        assert view.facts is not None and view.facts.reader != "prometheus"
        notes = [n.message for n in app._notifications]
        assert any("opening it over SSH as gpu-twin (ssh)" in n for n in notes), notes
        await pilot_wait(pilot, lambda: any("open over SSH" in n.message for n in app._notifications), 10)
        # Enter again on the Prometheus host: the same SSH host, not a second one.
        main.select_host(TWIN)
        await pilot_wait(pilot, lambda: main.host_list.move_to(TWIN), 10)
        main.host_list.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert sum(1 for name in app.fleet.sessions if name.startswith(TWIN)) == 2


async def test_enter_says_so_when_the_host_cannot_be_reached_over_ssh(
    prom: Prometheus, ssh_home: SshEnv, tmp_path: Path
) -> None:
    far = FAR + ".invalid"
    app = dashboard(prom, tmp_path / "audit.log")
    async with app.run_test(size=(200, 50)) as pilot:
        main = await live(pilot, far)
        await pilot_wait(pilot, lambda: fleet_row_key(far, 0) in main.fleet_table.rows_data(), 60)
        main.fleet_table.focus()
        await pilot_wait(pilot, lambda: main.fleet_table.move_to(fleet_row_key(far, 0)), 10)
        await pilot.press("enter")
        await pilot_wait(
            pilot, lambda: any("cannot be opened over SSH" in n.message for n in app._notifications), 120
        )
        line = next(n.message for n in app._notifications if "cannot be opened over SSH" in n.message)
        assert line.startswith(far) and "\n" not in line
        # The Prometheus host itself stays as it was.
        assert app.fleet.view(far).status == LIVE

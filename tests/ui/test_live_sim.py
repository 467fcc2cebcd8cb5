"""The app on the real thing: two sim probes as real subprocesses through the local transport."""

from __future__ import annotations

import os

from gputui.cli.demo import demo_specs
from gputui.fleet.fleet import Fleet
from gputui.transport.local import LocalLink
from gputui.ui import make_app
from tests.support.pilot import redrawn, screen_text, wait_for

INTERVAL = 0.2


async def test_the_app_on_real_sim_probes() -> None:
    fleet = Fleet()
    links: list[LocalLink] = []

    def link_for(spec):  # type: ignore[no-untyped-def]
        def make() -> LocalLink:
            link = LocalLink(spec, interval=INTERVAL)
            links.append(link)
            return link

        return make

    for spec in demo_specs():
        fleet.add(spec.name, link_for(spec), interval=INTERVAL)
    app = make_app(fleet, interval=INTERVAL)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: all(v.sample is not None and v.sample.gpus for v in fleet.hosts), 60)
        await redrawn(pilot)
        main = app._main
        assert main is not None
        assert main.fleet_table.row_count == 12  # a row a GPU: demo-a 4, demo-b 8
        assert "2 live" in screen_text(app)

        main.select_host("demo-a")
        main.proc_table.focus()
        await redrawn(pilot)
        text = screen_text(app)
        # The whole header line (at 120 columns its end, the host's load, is cut on screen).
        header = main.status_line._text.plain
        assert "driver 580.159.04-sim" in header and "driver 580.159.04-sim" in text.splitlines()[0]
        assert "RAM " in header and "CPU " in header, header
        kinds = {main.proc_table.get_row(k)[3].plain.split()[-1] for k in main.proc_table.rows_data()}
        assert {"user", "ghost", "hidden", "monitor"} <= kinds

        # Real samples keep arriving: the cursor stays on its process (by pid and start time).
        await pilot.press("down", "down")
        key = main.proc_table.cursor_key
        seq = fleet.view("demo-a").sample.seq  # type: ignore[union-attr]
        await wait_for(pilot, lambda: fleet.view("demo-a").sample.seq >= seq + 5)  # type: ignore[union-attr]
        await redrawn(pilot)
        assert main.proc_table.cursor_key == key
    # Leaving the app stops the fleet: every probe it started has exited and been reaped.
    for link in links:
        assert link.pid is not None
        try:
            os.kill(link.pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"probe {link.pid} still runs after the app exited")

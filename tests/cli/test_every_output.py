"""Nothing a host sends reaches the operator's terminal raw, in any output path.

The hostile probe's `escapes` mode (tests/support/hostile_probe.py) puts ESC sequences (an OSC 52 clipboard
write, CSI 2J), C1 controls, bidi overrides and isolates, zero-width characters, NUL and markup into
every string of every record it sends: hello, samples, events, errors, and the accepted/done events
it answers a plan with (issue 13 #1: a verdict's `result` holding `ESC ] 52` was written to the pty
by the end-of-plan notification). Each output is checked for raw control characters: `gputui
snapshot` text and JSON, `gputui clean` text and JSON, the audit log, and the dashboard's tables,
action log and notifications.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from gputui.cli import snapshot
from gputui.cli.clean import run_clean
from gputui.ui import make_app
from tests.support.commands import clean_args
from tests.support.hostile import NAME, PATIENCE, hostile_fleet, stop_fleet
from tests.support.pilot import screen_text
from tests.support.waiting import eventually
from tests.support.wording import RAW

# C0 and C1 controls but \n and \t (which the outputs use for their own lines), DEL, bidi overrides
# and isolates, zero-width characters and the BOM.


def raw_in(text: str) -> list[str]:
    return [line for line in text.splitlines() if RAW.search(line)]


async def test_snapshot_text_and_json():
    fleet, _view, links = hostile_fleet("escapes", NAME)
    try:
        views = await snapshot.take(fleet, 20)
        text = io.StringIO()
        snapshot.render(views, text)
        doc = snapshot.dumps(views)
    finally:
        await stop_fleet(fleet, links)
    assert "hostile" in text.getvalue() and "\\e" in text.getvalue()  # there, escaped
    assert not raw_in(text.getvalue())
    assert not raw_in(doc)
    json.loads(doc)


async def test_clean_text_json_and_the_audit_log(tmp_path: Path):
    fleet, _view, links = hostile_fleet("escapes", NAME)
    out, err = io.StringIO(), io.StringIO()
    try:
        code = await run_clean(
            clean_args(tmp_path, "--all", NAME), fleet, stdout=out, stderr=err, operator="tester"
        )
    finally:
        await stop_fleet(fleet, links)
    assert code != 0  # a verdict that is not even readable is not a clean
    assert not raw_in(out.getvalue()), raw_in(out.getvalue())
    assert not raw_in(err.getvalue()), raw_in(err.getvalue())
    json.loads(out.getvalue())
    log = (tmp_path / "actions.jsonl").read_text()
    assert log and not raw_in(log)


async def test_the_dashboard_its_action_log_and_its_notifications(tmp_path: Path):
    """A plan on the hostile host: its accepted and done events carry escapes everywhere, the verdict
    words and the notification are built from them."""
    fleet, view, links = hostile_fleet("escapes", NAME)
    app = make_app(fleet, interval=0.2, log_path=tmp_path / "actions.jsonl")
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            assert await eventually(lambda: view.sample is not None, PATIENCE)
            main = app._main
            assert main is not None
            main.select_host(NAME)
            await pilot.pause(0.3)
            await pilot.press("F")  # every GPU of the host: the dialog, then ctrl+k
            assert await eventually(lambda: type(app.screen).__name__ == "PlanScreen", PATIENCE)
            await pilot.pause(0.2)
            assert not raw_in(screen_text(app))  # the dialog, built from the hostile sample
            await pilot.press("ctrl+k")
            assert await eventually(lambda: any("verdict:" in e.text for e in main.action_log.entries), 60)
            await pilot.pause(0.5)
            notes = [f"{n.title} {n.message}" for n in app._notifications]
            assert notes and not [n for n in notes if RAW.search(n)]
            entries = [f"{e.host} {e.text}" for e in main.action_log.entries]
            assert entries and not [e for e in entries if RAW.search(e)]
            assert not raw_in(screen_text(app))
            await pilot.press("q")
    finally:
        await stop_fleet(fleet, links)

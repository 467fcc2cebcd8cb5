"""Pacing (gputui/fleet/pacing.py): the samples come slower while the app cannot keep up with its hosts,
and at the asked rate again once it can. The rule on its own; the fleet asking its probes (and a
link made again asking its new probe); a recording played at the interval the app asks for; and
the real app driven by Pilot, its event loop held up by the test, paced and back."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from gputui.fleet.fleet import Fleet
from gputui.fleet.pacing import Pacer
from gputui.fleet.session import LIVE, SampleArrived
from gputui.recording.playback import PlaybackLink, Recording
from gputui.ui import make_app
from tests.support.apps import scratch_log
from tests.support.paths import FIXTURES
from tests.support.waiting import eventually


def test_a_tick_late_now_and_then_changes_nothing() -> None:
    pacer = Pacer(1.0, 1024)
    for lateness in [2.0, 0.0, 3.0, 0.1, 2.5, 2.5, 0.0, 9.0] * 5:
        assert pacer.tick(lateness, busy=1.0) is None
    assert pacer.interval == 1.0 and not pacer.paced


def test_behind_tick_after_tick_the_interval_doubles_up_to_its_cap() -> None:
    pacer = Pacer(1.0, 4096, ticks=5, most=8.0)
    seen = []
    for _ in range(40):
        change = pacer.tick(4.0, busy=1.0)
        if change is not None:
            seen.append(change.interval)
            assert change.why == "the screen was 4 s behind its hosts"
    assert seen == [2.0, 4.0, 8.0]  # every fifth tick behind, never past 8 x the asked interval
    assert pacer.paced and pacer.interval == 8.0


def test_the_rate_comes_back_only_when_the_app_has_room_for_it() -> None:
    pacer = Pacer(1.0, 4096, ticks=2, calm=10, room=0.7)
    for _ in range(2):
        pacer.tick(2.0, busy=1.0)
    assert pacer.interval == 2.0
    # On time, but at 45 % of a core now: 90 % at twice the rate, more than the room. Stays.
    for _ in range(30):
        assert pacer.tick(0.0, busy=0.45) is None
    # One busy tick among calm ones counts: the busiest tick of the run decides.
    for i in range(10):
        assert pacer.tick(0.0, busy=0.5 if i == 3 else 0.2) is None
    assert pacer.interval == 2.0
    changes = [pacer.tick(0.0, busy=0.3) for _ in range(10)]
    assert [c.interval for c in changes if c is not None] == [1.0]
    assert not pacer.paced
    # A tick somewhat late (a quarter of `late` or more) starts the count of calm ticks again.
    pacer = Pacer(1.0, 4096, ticks=1, calm=3)
    pacer.tick(1.5, busy=1.0)
    assert [pacer.tick(x, busy=0.1) for x in (0.0, 0.0, 0.3, 0.0, 0.0)] == [None] * 5
    assert pacer.tick(0.0, busy=0.1) is not None


def test_a_small_fleet_is_never_paced() -> None:
    pacer = Pacer(1.0, 63)
    assert not pacer.active
    assert all(pacer.tick(10.0, busy=1.0) is None for _ in range(50))
    assert Pacer(1.0, 64).active


@pytest.fixture
def played() -> Iterator[tuple[Fleet, list[PlaybackLink]]]:
    """A fleet of one host, "a", whose links play the demo's recording at 0.1 s (each link made
    is kept, the ones made again too)."""
    recording = Recording(FIXTURES / "demo-a.jsonl")
    links: list[PlaybackLink] = []

    def make() -> PlaybackLink:
        link = PlaybackLink(recording, interval=0.1, label="a")
        links.append(link)
        return link

    fleet = Fleet()
    fleet.add("a", make, interval=0.1)
    yield fleet, links
    recording.close()


async def test_the_fleet_asks_its_probes_and_a_link_made_again_asks_its_new_one(
    played: tuple[Fleet, list[PlaybackLink]],
) -> None:
    fleet, links = played
    fleet.start()
    try:
        assert await eventually(lambda: fleet.hosts[0].status == LIVE, 60.0)
        assert not any("interval" in r for r in links[0].sent)  # nothing asked: nothing sent
        await fleet.configure(0.3)
        assert {"type": "configure", "v": 1, "interval": 0.3} in links[0].sent
        assert fleet.hosts[0].interval == 0.3
        # The recording now plays 0.3 s apart, as a probe would sample.
        seqs: list[tuple[float, int]] = []
        fleet.listen(
            lambda e: (
                seqs.append((time.monotonic(), e.view.sample.seq)) if isinstance(e, SampleArrived) else None
            )
        )
        assert await eventually(lambda: len(seqs) >= 4, 60.0)
        # (the first was due already). A busy machine can only delay a sample, and a late one is
        # followed by one on time: the span of the later ones is never shorter than their schedule.
        times = [t for t, _ in seqs[1:]]
        assert times[-1] - times[0] > 0.2 * (len(times) - 1), [b - a for a, b in itertools.pairwise(times)]
        # The link goes; the one made in its place asks its probe for 0.3 s as well.
        await links[0].close()
        assert await eventually(lambda: len(links) == 2 and fleet.hosts[0].status == LIVE, 60.0)
        assert await eventually(lambda: any(r.get("interval") == 0.3 for r in links[1].sent), 60.0)
    finally:
        await fleet.stop()


async def test_the_app_behind_its_hosts_slows_them_down_and_says_so_then_speeds_up_again(
    played: tuple[Fleet, list[PlaybackLink]],
) -> None:
    fleet, links = played
    app = make_app(fleet, interval=0.1, log_path=scratch_log(), pace=True)
    assert app.pacer is not None and not app.pacer.active  # one host: never paced by default
    # This app paces at one host, after two ticks 0.3 s late (and comes back when told below).
    app.pacer = Pacer(0.1, 1, min_hosts=1, late=0.3, ticks=2, calm=10**6, room=100.0)
    async with app.run_test(size=(160, 40)) as pilot:
        assert await eventually(lambda: fleet.hosts[0].status == LIVE, 60.0)
        main = app._main
        assert main is not None
        for _ in range(6):  # the event loop held up, as by more samples than it can take
            if app.paced is not None:
                break
            time.sleep(1.5)
            await pilot.pause(0.05)
        assert await eventually(lambda: app.paced == 0.2, 60.0)
        assert await eventually(lambda: any(r.get("interval") == 0.2 for r in links[0].sent), 60.0)
        assert await eventually(lambda: "samples every 0.2 s (paced)" in main.status_line._text.plain, 60.0)
        log = main.action_log.entries
        assert any(e.tag == "pace" and e.level == "warn" and "not 0.1 s" in e.text for e in log)
        # Left alone, the app keeps up again: the asked rate comes back after two calm ticks
        # here, and the log says so.
        app.pacer.calm = 2
        assert await eventually(lambda: app.paced is None, 60.0)
        assert await eventually(lambda: any(r.get("interval") == 0.1 for r in links[0].sent), 60.0)
        assert any(e.tag == "pace" and "again" in e.text for e in main.action_log.entries)
        assert await eventually(lambda: "paced" not in main.status_line._text.plain, 60.0)


async def test_a_screen_that_never_gets_to_draw_is_behind_too(
    played: tuple[Fleet, list[PlaybackLink]],
) -> None:
    """A look at whether the app keeps up runs after the next frame; frames starved by samples
    never get to it. One still on its way a second later counts as behind."""
    fleet, _ = played
    app = make_app(fleet, interval=0.1, log_path=scratch_log(), pace=True)
    app.pacer = Pacer(0.1, 1, min_hosts=1, late=0.5, ticks=3, calm=10**6)
    async with app.run_test(size=(160, 40)):
        assert await eventually(lambda: fleet.hosts[0].status == LIVE, 60.0)
        assert app.paced is None
        app.call_after_refresh = lambda *args, **kwargs: True  # type: ignore[method-assign]
        assert await eventually(lambda: app.paced == 0.2, 60.0)


def test_replays_and_tests_do_not_pace_unless_asked() -> None:
    fleet = Fleet()
    assert make_app(fleet, log_path=scratch_log()).pacer is None


@pytest.mark.parametrize("argv", [["--no-pace"]])
def test_no_pace_is_a_flag_of_the_dashboard(argv: list[str]) -> None:
    from gputui.cli.commands.dashboard import parser as ui_parser

    assert ui_parser().parse_args(argv).no_pace is True
    assert ui_parser().parse_args([]).no_pace is False

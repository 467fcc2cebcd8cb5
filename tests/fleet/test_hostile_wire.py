"""The app's side of the wire against a hostile probe (tests/support/hostile.py): the real bootstrap, the local
transport, the line reader, the decoder and the Fleet, one mode at a time.

What must hold whatever the probe sends: no exception ends (or is swallowed by) the host's session
task, the host is shown live only on samples the wire accepted, and memory stays bounded (counted in
records and bytes, not timed). Where a mode exposes a bug in the app's own code (fleet, model,
clean, ui: being rewritten), the test is marked xfail(strict=True) with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

from gputui.fleet.fleet import Fleet
from gputui.fleet.session import (
    DOWN,
    LIVE,
    NOTES_PER_SECOND,
    PLAN_EVENTS_MAX,
    ErrorArrived,
    EventArrived,
    FleetEvent,
    HostView,
    SampleArrived,
    StatusChanged,
)
from gputui.model import HostMetrics
from gputui.model.textsafe import printable
from gputui.probe.wire import HOST_LIMITS, MAX_LINE, MAX_PROCESSES
from gputui.transport.bootstrap import RecordStream
from tests.support.commands import clean_args
from tests.support.hostile import (
    BAD_SEQ,
    FORGED_PIDS,
    NAME,
    NASTY,
    PATIENCE,
    USER_PID,
    USER_START,
    HostileLink,
    hostile_fleet,
    stop_fleet,
)
from tests.support.waiting import eventually
from tests.support.wording import RAW

# How the session's catch-all words an exception of the app's own code (gputui/fleet/session.py HostSession.run).
APP_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b.*?: ")


class Watch:
    """What a fleet listener saw of the hostile host, and how full the link's line reader got."""

    def __init__(self, fleet: Fleet, view: HostView, links: list[HostileLink]) -> None:
        self.fleet, self.view, self.links = fleet, view, links
        self.statuses: list[tuple[str, str | None, str | None]] = []
        self.samples: list[int] = []  # seq of every sample the fleet recorded
        self.hosts: list[HostMetrics | None] = []  # the host metrics of each, as the app took them
        self.errors: list[Any] = []  # code of every error record
        self.events = 0
        self.max_buffer = 0  # bytes held by the line reader between records
        self.max_pending = 0  # records decoded and not yet handed on
        fleet.listen(self.on)

    def on(self, change: FleetEvent) -> None:
        view = change.view
        if isinstance(change, StatusChanged):
            self.statuses.append((view.status, view.reason, view.detail))
        elif isinstance(change, SampleArrived):
            self.samples.append(change.sample.seq)
            self.hosts.append(change.sample.host)
        elif isinstance(change, ErrorArrived):
            self.errors.append(change.record.get("code"))
        elif isinstance(change, EventArrived):
            self.events += 1
        stream: RecordStream | None = self.links[-1]._stream if self.links else None
        if stream is not None:
            self.max_buffer = max(self.max_buffer, len(stream._buffer))
            self.max_pending = max(self.max_pending, len(stream._pending))

    @property
    def app_exceptions(self) -> list[str]:
        """Exceptions of the app's own code that the session's catch-all turned into "probe-crashed"."""
        return [d for s, r, d in self.statuses if r == "probe-crashed" and d and APP_EXCEPTION.match(d)]

    @property
    def was_live(self) -> bool:
        return any(s == LIVE for s, _, _ in self.statuses)

    def contained(self) -> None:
        """Nothing escaped the session task and nothing of the app's own code blew up in it."""
        task = self.fleet.sessions[NAME].task
        assert task is not None and not task.done(), task and task.exception()
        assert not self.app_exceptions, self.app_exceptions
        assert all(seq < BAD_SEQ for seq in self.samples), [s for s in self.samples if s >= BAD_SEQ]


@contextlib.asynccontextmanager
async def hostile(mode: str, **kw: Any) -> AsyncIterator[tuple[Fleet, HostView, Watch]]:
    fleet, view, links = hostile_fleet(mode, NAME, **kw)
    watch = Watch(fleet, view, links)
    fleet.start()
    try:
        yield fleet, view, watch
    finally:
        await stop_fleet(fleet, links)


# -- baseline ------------------------------------------------------------------------------------


async def test_good_mode_is_live_and_contained():
    """The harness itself: a well-behaved hostile probe goes live and every sample is recorded."""
    async with hostile("good") as (_fleet, view, watch):
        assert await eventually(lambda: len(watch.samples) >= 3, PATIENCE)
        assert view.status == LIVE and view.sample.processes[0].pid == USER_PID
        watch.contained()
        assert view.sample.host == HostMetrics(
            37.5, 64, 12.25, 10.5, 9.75, 2 << 40, 1 << 40, 8 << 30, 1 << 30, 864000.5
        )


def in_domain(metrics: HostMetrics | None) -> list[str]:
    """What of a sample's host metrics is outside the wire's limits (nothing, for the app to show)."""
    if metrics is None:
        return []
    wrong = []
    for name, (low, high, kind) in HOST_LIMITS.items():
        value = getattr(metrics, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, kind) or not low <= value <= high:
            wrong.append(f"{name}={value!r}")
    for used, total in (("memory_used", "memory_total"), ("swap_used", "swap_total")):
        if getattr(metrics, used) is not None and getattr(metrics, used) > (getattr(metrics, total) or -1):
            wrong.append(f"{used} over {total}")
    return wrong


def test_host_metrics_are_taken_field_by_field_within_the_wire_limits():
    good = {"cpu_percent": 50, "cpus": 8, "load1": 1, "load15": 2.5, "memory_total": 100, "memory_used": 40}
    assert HostMetrics.from_wire(good) == HostMetrics(
        cpu_percent=50.0, cpus=8, load1=1.0, load15=2.5, memory_total=100, memory_used=40
    )
    for hostile in (
        {"cpu_percent": 100.5, "cpus": 0, "load1": -0.1, "load5": 1e7, "uptime": float("nan")},
        {"cpu_percent": True, "cpus": 8.0, "load1": "1", "memory_total": 1 << 61, "uptime": 1e300},
        {"memory_total": 100, "memory_used": 101, "swap_total": None, "swap_used": 5},
        {"cpus": 10**4000, "load1": [1], "memory_used": {"x": 1}, "uptime": -5},
    ):
        metrics = HostMetrics.from_wire(hostile)
        assert metrics is not None and in_domain(metrics) == []
        assert metrics.memory_used is None and metrics.swap_used is None and metrics.uptime is None
    assert HostMetrics.from_wire([1, 2]) is None and HostMetrics.from_wire("host") is None


# -- escapes -------------------------------------------------------------------------------------


async def test_escapes_reach_the_fleet_literally_and_nothing_breaks():
    async with hostile("escapes") as (_fleet, view, watch):
        assert await eventually(
            lambda: len(watch.samples) >= 4 and watch.events >= 4 and len(watch.errors) >= 4, PATIENCE
        )
        watch.contained()
        proc = view.sample.processes[0]
        # Parsed once at the edge: every string made printable (gputui.model.textsafe), so no output path
        # can pass a host's escape to the terminal; what is shown is still every character's trace.
        shown = printable(NASTY)
        assert "\x1b" not in shown and "\u202e" not in shown and "\\e]52" in shown
        assert proc.name == "python" + shown and proc.command[0] == "python" + shown
        assert proc.user == "alice" + shown and view.sample.gpus[0].name.endswith(shown)
        assert view.facts.hostname == "hostile" + shown
        # A kind the app does not know is not trusted as one.
        assert {p.kind for p in view.sample.processes} <= {"user", "ghost", "hidden", "monitor", "zombie"}
        assert view.status == LIVE


# -- numbers -------------------------------------------------------------------------------------


async def test_nan_and_infinity_samples_are_refused_and_never_make_the_host_live():
    """NaN, Infinity and -Infinity are not JSON: the wire refuses those samples (bad-json). Before,
    they were recorded and the host shown live on them."""
    async with hostile("numbers", variant=1) as (_fleet, view, watch):
        assert await eventually(lambda: watch.errors.count("bad-json") >= 5, PATIENCE)
        watch.contained()
        assert watch.samples == [] and not watch.was_live and view.sample is None


async def test_nan_samples_between_good_ones_only_good_ones_are_shown():
    async with hostile("numbers", variant=1, mix=True) as (_fleet, view, watch):
        assert await eventually(
            lambda: watch.errors.count("bad-json") >= 5 and len(watch.samples) >= 5, PATIENCE
        )
        watch.contained()
        assert view.status == LIVE and view.sample.seq < BAD_SEQ


async def test_absurd_but_valid_numbers_do_not_crash_the_session():
    async with hostile("numbers", variant=2) as (_fleet, view, watch):
        await eventually(lambda: len(watch.samples) >= 5 or bool(watch.app_exceptions), timeout=15)
        watch.contained()
        assert view.connects == 1 and view.status == LIVE
        assert view.sample.host is not None
        assert [w for h in watch.hosts for w in in_domain(h)] == []


# -- types ---------------------------------------------------------------------------------------


async def test_wrong_types_in_the_hello_do_not_crash_the_session():
    problems = []
    for variant in range(10):
        async with hostile("types", variant=variant) as (_fleet, view, watch):
            await eventually(lambda: view.connects >= 1 or bool(watch.app_exceptions), timeout=15)
            await asyncio.sleep(0.5)
            problems += [f"hello variant {variant}: {e}" for e in watch.app_exceptions]
            if view.connects != 1:
                problems.append(f"hello variant {variant}: connects={view.connects}")
    assert not problems, problems


async def test_wrong_types_in_samples_events_and_errors_do_not_crash_the_session():
    async with hostile("types", variant=-1, mix=True) as (_fleet, view, watch):
        await eventually(lambda: len(watch.samples) >= 20 or bool(watch.app_exceptions), timeout=20)
        watch.contained()
        assert view.connects == 1
        assert [w for h in watch.hosts for w in in_domain(h)] == []
        assert None in watch.hosts  # a host object of the wrong type is no metrics, not an error


# -- huge ----------------------------------------------------------------------------------------


async def test_fifteen_thousand_small_records_fit_a_line_and_are_taken():
    async with hostile("huge", compact=True, interval=1.0) as (_fleet, view, watch):
        assert await eventually(lambda: len(watch.samples) >= 2, timeout=30)
        watch.contained()
        # The app takes the first MAX_PROCESSES (the probe sends the GPU users first) and counts the rest.
        assert len(view.sample.processes) == MAX_PROCESSES and view.status == LIVE
        assert view.sample.omitted == 15_000 - MAX_PROCESSES
        # What `snapshot --json` gives of it is what the app took, not the 15,000 as received.
        assert view.raw_sample is not None and len(view.raw_sample["processes"]) == MAX_PROCESSES


async def test_fifteen_thousand_full_records_are_one_over_long_line_refused_whole():
    async with hostile("huge", interval=0.5) as (_fleet, _view, watch):
        assert await eventually(lambda: watch.errors.count("too-long") >= 3, timeout=30)
        watch.contained()
        assert watch.samples == [] and not watch.was_live
        assert watch.max_buffer <= MAX_LINE + RecordStream.CHUNK


# -- flood ---------------------------------------------------------------------------------------


async def test_an_error_flood_is_handled_in_bounded_memory():
    """The link reads everything; the app is told at most NOTES_PER_SECOND error lines a second and
    one line a second saying how many more were dropped."""
    started = time.monotonic()
    async with hostile("flood") as (fleet, _view, watch):
        assert await eventually(lambda: watch.errors.count("flood") >= 3, timeout=60)
        watch.contained()
        seconds = time.monotonic() - started
        assert len(watch.errors) <= (NOTES_PER_SECOND + 1) * (seconds + 1)
        assert watch.max_pending <= 1 and watch.max_buffer <= MAX_LINE + RecordStream.CHUNK
        assert fleet.sessions[NAME].waiters == {}


async def test_fleet_stops_while_a_probe_floods():
    fleet, _view, links = hostile_fleet("flood", NAME)
    watch = Watch(fleet, _view, links)
    fleet.start()
    try:
        assert await eventually(lambda: watch.errors.count("flood") >= 3, timeout=60)
        pids = [link.pid for link in links if link.pid is not None]
        stopped = True
        try:
            await asyncio.wait_for(fleet.stop(), 10)
        except asyncio.TimeoutError:
            stopped = False
        # The stop cancels the link's close while it asks the flooding probe to quit (a probe blocked
        # on its writes reads nothing): the probe is ended all the same, never left running.
        ended = await eventually(lambda: not any(running(pid) for pid in pids), timeout=3)
    finally:
        await stop_fleet(fleet, links)
    assert stopped, "Fleet.stop() did not return within 10 s of a flood"
    assert pids and ended, f"a probe outlived Fleet.stop(): {[p for p in pids if running(p)]}"


def running(pid: int) -> bool:
    """Alive, not a zombie (a zombie has ended; its parent's watcher reaps it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


async def test_an_event_flood_for_a_running_plan_is_bounded():
    async with hostile("flood") as (fleet, _view, watch):
        assert await eventually(lambda: len(watch.samples) >= 1, PATIENCE)
        plan = {"id": "flood-plan", "targets": [{"pid": USER_PID, "start_time": USER_START}], "gpus": [0]}
        events = fleet.execute(NAME, plan)
        first = await asyncio.wait_for(events.__anext__(), 20)  # then a slow consumer: reads nothing
        assert first.plan == "flood-plan"
        waiting = next(iter(fleet.sessions[NAME].waiters.values()))
        assert await eventually(lambda: waiting.qsize() >= PLAN_EVENTS_MAX, timeout=60)
        await asyncio.sleep(2)  # the flood goes on: nothing more is kept
        queued = waiting.qsize()
        await events.aclose()
        watch.contained()
        assert queued <= PLAN_EVENTS_MAX + 1, f"{queued} events queued for one plan"


# -- silence -------------------------------------------------------------------------------------


async def test_hello_then_silence_is_down_never_live():
    async with hostile("silence") as (_fleet, view, watch):
        assert await eventually(lambda: (DOWN, "silent") in [(s, r) for s, r, _ in watch.statuses], PATIENCE)
        assert await eventually(lambda: view.connects >= 2, PATIENCE)  # and it tries again
        watch.contained()
        assert not watch.was_live and watch.samples == []


async def test_silence_after_a_plan_is_accepted_ends_the_plan_as_outcome_unknown():
    async with hostile("silence", after="plan") as (fleet, _view, watch):
        assert await eventually(lambda: len(watch.samples) >= 1, PATIENCE)
        plan = {
            "id": "silent-plan",
            "targets": [{"pid": USER_PID, "start_time": USER_START}],
            "gpus": [0],
            "term_timeout": 0.5,
            "verify_timeout": 0.5,
        }
        seen = []

        async def run() -> None:
            async for event in fleet.execute(NAME, plan):
                seen.append(event)

        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(run(), 30)
        watch.contained()
        assert [e.stage for e in seen][:1] == ["accepted"]
        assert seen[-1].stage == "done" and seen[-1].result == "outcome-unknown", [e.stage for e in seen]


# -- nested --------------------------------------------------------------------------------------


async def test_deeply_nested_lines_are_error_records_and_the_link_stays_up():
    """100,000 "[" raised RecursionError in the decoder: the session's catch-all then dropped the link
    (down, "probe-crashed") and reconnected; now each is a bad-json error record."""
    async with hostile("nested", mix=True) as (_fleet, view, watch):
        assert await eventually(
            lambda: watch.errors.count("bad-json") >= 10 and len(watch.samples) >= 10, PATIENCE
        )
        watch.contained()
        assert view.connects == 1 and view.status == LIVE
        assert all(s != DOWN for s, _, _ in watch.statuses)


async def test_only_nested_lines_never_make_the_host_live():
    async with hostile("nested") as (_fleet, view, watch):
        assert await eventually(lambda: watch.errors.count("bad-json") >= 10, PATIENCE)
        watch.contained()
        assert not watch.was_live and view.connects == 1


# -- hugeline ------------------------------------------------------------------------------------


async def test_over_long_lines_are_dropped_in_bounded_memory():
    async with hostile("hugeline", mix=True) as (_fleet, view, watch):
        assert await eventually(
            lambda: watch.errors.count("too-long") >= 6 and len(watch.samples) >= 6, timeout=40
        )
        watch.contained()
        assert view.connects == 1 and view.status == LIVE
        assert watch.max_buffer <= MAX_LINE + RecordStream.CHUNK and watch.max_pending <= 1


# -- slow ----------------------------------------------------------------------------------------


async def test_a_trickled_sample_is_shown_only_once_whole():
    """At 400 bytes/s a sample line takes seconds; the host is live only once it is all there."""
    async with hostile("slow", rate=400.0, interval=5.0, fleet_interval=5.0) as (_fleet, view, watch):
        assert await eventually(lambda: len(watch.samples) >= 1, timeout=30)
        watch.contained()
        assert watch.samples[0] == 1 and len(view.sample.processes) == 2 and len(view.sample.gpus) == 2


async def test_a_sample_slower_than_the_silence_limit_is_down_never_live():
    async with hostile("slow", rate=200.0, interval=0.2, fleet_interval=0.2) as (_fleet, view, watch):
        assert await eventually(lambda: view.connects >= 2 and view.status == DOWN, timeout=30)
        watch.contained()
        assert not watch.was_live and watch.samples == []


# -- forged --------------------------------------------------------------------------------------


async def test_forged_verdict_reaches_the_caller_unchanged(tmp_path):
    """The fleet routes a plan's events as they come: the forged `done` is what the caller gets."""
    async with hostile("forged") as (fleet, _view, watch):
        assert await eventually(lambda: len(watch.samples) >= 1, PATIENCE)
        plan = {"id": "forge-me", "targets": [{"pid": USER_PID, "start_time": USER_START}], "gpus": [0]}
        events = [e async for e in fleet.execute(NAME, plan)]
        watch.contained()
        done = events[-1]
        assert done.stage == "done" and done.data["clean"] is True
        assert {p["pid"] for p in done.data["processes"]} == set(FORGED_PIDS)


async def test_clean_does_not_believe_a_verdict_about_processes_it_did_not_target(tmp_path):
    from gputui.cli import clean

    fleet, _view, _links = hostile_fleet("forged", NAME)
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.wait_for(
        clean.run_clean(clean_args(tmp_path, "--all"), fleet, stdout=out, stderr=err, operator="test"), 60
    )
    doc = json.loads(out.getvalue())
    host = doc["hosts"][0]
    assert host["plan"] is not None  # it did plan, for our user and hidden holder
    assert code != 0 and host["status"] != "clean", (code, host["status"], err.getvalue()[-500:])


# -- the app -------------------------------------------------------------------------------------

# What must never reach the terminal raw: C0 and C1 controls (ESC, BEL, NUL, CR, CSI, NEL), DEL,
# bidi overrides and isolates, zero-width characters and the BOM.


async def test_escapes_in_every_field_render_literally_in_the_app():
    """The dashboard on the escapes mode: nothing the probe sends reaches the terminal as a control
    sequence or as markup, on the host list, the GPU table and the process table."""
    from xml.etree import ElementTree

    from gputui.ui import make_app
    from tests.support.pilot import redrawn, screen_text

    fleet, view, links = hostile_fleet("escapes", NAME)
    watch = Watch(fleet, view, links)
    app = make_app(fleet, interval=0.2)
    # Wide enough for the whole host header: the host's load comes before the (hostile) driver facts.
    async with app.run_test(size=(320, 50)) as pilot:
        deadline = time.monotonic() + 30
        while view.status != LIVE and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert view.status == LIVE
        main = app._main
        main.select_host(NAME)
        main.proc_table.focus()
        await redrawn(pilot)
        text = screen_text(app)
        bad = [line for line in text.splitlines() if RAW.search(line)]
        assert not bad, bad
        assert "[bold red]markup" in text  # shown as text, not as style
        ElementTree.fromstring(app.export_screenshot())  # a valid SVG: no raw control characters in it
        assert not watch.app_exceptions


def test_per_process_utilization_from_a_hostile_probe_is_checked_field_by_field():
    from gputui.model import Sample

    record = {
        "pid": 7,
        "kind": "user",
        "gpu_util": {
            "0": {"sm": 50, "mem": 101, "enc": -1, "dec": True},  # out of range, negative, a bool
            "x": {"sm": 9},  # not a GPU index
            "1": "busy",  # not a share
            "²": {"sm": 9},  # a digit to str.isdecimal, not ASCII
        },
    }
    sample = Sample.from_wire(
        {"seq": 1, "gpus": [], "processes": [record], "proc_util": {"state": "\x1b[31m"}}
    )
    [proc] = sample.processes
    assert proc.gpu_util is not None and set(proc.gpu_util) == {0}
    share = proc.gpu_util[0]
    assert (share.sm, share.mem, share.enc, share.dec) == (50, None, None, None)
    assert proc.sm_util() == 50 and proc.sm_util(1) is None
    assert sample.proc_util.state == "unsupported"  # an unknown state is not believed
    bad = Sample.from_wire({"seq": 1, "gpus": [], "processes": [dict(record, gpu_util=[1, 2])]})
    assert bad.processes[0].gpu_util is None

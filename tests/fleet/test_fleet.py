"""The fleet on real probe subprocesses: status transitions, reconnects, plans cut by a lost link."""

import asyncio
import dataclasses
import os
import signal
import time

import pytest

from gputui.config.file import HostSpec
from gputui.fleet.fleet import Fleet
from gputui.fleet.session import (
    DOWN,
    LIVE,
    STALE,
    HelloArrived,
    HostSession,
    HostView,
    SampleArrived,
    StatusChanged,
)
from gputui.transport.local import LocalLink
from tests.support.waiting import eventually


def sim_host(name, interval=0.2, scenario="empty"):
    return HostSpec(name=name, reader="sim", sim_scenario=scenario)


async def test_hosts_stream_then_go_stale_then_down_then_live_again(monkeypatch):
    import gputui.fleet.session as fleet_mod

    monkeypatch.setattr(fleet_mod, "BACKOFF_FIRST", 0.1)
    links = []

    def make(spec, interval):
        def factory():
            link = LocalLink(spec, interval=interval)
            links.append(link)
            return link

        return factory

    fleet = Fleet()
    history = []
    fleet.listen(
        lambda e: history.append((e.view.name, e.view.status)) if isinstance(e, StatusChanged) else None
    )
    a = fleet.add("a", make(sim_host("a"), 0.2), interval=0.2)
    b = fleet.add("b", make(sim_host("b"), 0.2), interval=0.2)
    fleet.start()
    try:
        assert await eventually(lambda: a.status == LIVE and b.status == LIVE, 60)
        # Host a's probe goes quiet (a long interval): a turns stale while b keeps streaming.
        await fleet.sessions["a"].send({"type": "configure", "v": 1, "interval": 60})
        assert await eventually(lambda: a.status == STALE, 60)
        seq = b.sample.seq
        assert await eventually(lambda: b.sample.seq > seq + 3, 60)
        # Then its probe dies: down, with a reason, then reconnected by itself.
        first = links[0]
        connects = a.connects
        os.kill(first.pid, signal.SIGKILL)
        assert await eventually(lambda: a.status == DOWN, 60)
        assert a.reason in ("probe-crashed", "closed", "silent")
        assert await eventually(lambda: a.status == LIVE and a.connects > connects, 60)
        assert ("a", STALE) in history and ("a", DOWN) in history
    finally:
        await fleet.stop()
    for link in links:  # every probe we started has been reaped
        assert link.pid is None or not os.path.exists(f"/proc/{link.pid}") or _is_zombie_free(link.pid)


async def test_listeners_are_told_each_change_as_one_typed_event():
    """A listener is given one event per change, its class saying what changed and carrying what
    came with it: the hello's facts, the sample as recorded. Frozen and slotted: cheap, one per sample."""
    fleet = Fleet()
    seen = []
    fleet.listen(seen.append)
    a = fleet.add("a", lambda: LocalLink(sim_host("a"), interval=0.2), interval=0.2)
    fleet.start()
    try:
        assert await eventually(lambda: sum(isinstance(e, SampleArrived) for e in seen) >= 2, 60)
    finally:
        await fleet.stop()
    assert all(e.view is a for e in seen)
    kinds = [type(e) for e in seen]
    assert StatusChanged in kinds and kinds.index(HelloArrived) < kinds.index(SampleArrived)  # (live)
    hello = next(e for e in seen if isinstance(e, HelloArrived))
    assert hello.facts is a.facts
    samples = [e.sample for e in seen if isinstance(e, SampleArrived)]
    assert samples[-1] is a.sample and samples[0].seq < samples[-1].seq
    with pytest.raises(dataclasses.FrozenInstanceError):
        hello.view = a
    assert not hasattr(hello, "__dict__")


def _is_zombie_free(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return True


async def test_unreachable_host_is_down_with_a_reason_and_does_not_block_others():
    fleet = Fleet()
    bad = fleet.add("bad", lambda: LocalLink(HostSpec(name="bad", python="/nonexistent/python3")))
    good = fleet.add("good", lambda: LocalLink(sim_host("good")), interval=0.2)
    fleet.start()
    try:
        assert await eventually(lambda: bad.status == DOWN and good.status == LIVE, 60)
        assert bad.reason == "no-python" and "nonexistent" in bad.detail
    finally:
        await fleet.stop()


async def test_plan_cut_by_a_lost_link_ends_with_outcome_unknown():
    fleet = Fleet()
    links = []

    def factory():
        links.append(LocalLink(sim_host("h", scenario="demo")))
        return links[-1]

    view = fleet.add("h", factory)
    fleet.start()
    try:
        assert await eventually(lambda: view.sample is not None, 60)
        target = next(p for p in view.sample.processes if p.kind == "user")
        plan = {
            "targets": [
                {
                    "pid": target.pid,
                    "start_time": target.start_time,
                    "reason": "test",
                    "gpus": list(target.gpus),
                }
            ],
            "gpus": list(target.gpus),
            "term_timeout": 30.0,
            "verify_timeout": 30.0,
        }
        events = []

        async def run():
            async for event in fleet.execute("h", plan):
                events.append(event)
                if event.stage == "signal":
                    os.kill(links[0].pid, signal.SIGKILL)  # the probe dies mid-action

        await asyncio.wait_for(run(), 20)
        assert events[-1].stage == "done" and events[-1].result == "outcome-unknown"
    finally:
        await fleet.stop()


async def test_request_detail_reads_one_process_on_a_real_probe():
    from gputui.model import ProcDetail

    fleet = Fleet()
    view = fleet.add("w", lambda: LocalLink(sim_host("w", scenario="workers"), interval=0.2), interval=0.2)
    fleet.start()
    try:
        assert await eventually(lambda: view.sample is not None and len(view.sample.processes) >= 6, 60)
        sample = view.sample
        launcher = next(p for p in sample.processes if p.kind == "user" and p.command[-1:] == ("3",))
        # The sim's session process is every job's parent: not listed, it comes as a parent.
        [session] = [p for p in sample.parents if p.pid == launcher.ppid]
        assert session.start_time is not None and session.name
        detail = await fleet.request_detail("w", launcher.pid, launcher.start_time)
        assert isinstance(detail, ProcDetail) and detail.ok and not detail.gone
        assert detail.command == launcher.command and detail.cwd and detail.threads
        assert detail.parents[0].pid == session.pid and detail.parents_end == "probe"
        assert {f.path for f in detail.fds} >= set(launcher.holds)
        other = await fleet.request_detail("w", launcher.pid, launcher.start_time + 1)
        assert other is not None and other.result == "pid-reused" and other.gone and other.command == ()
        assert await fleet.request_detail("nowhere", 1, 1) is None
    finally:
        await fleet.stop()


async def test_request_detail_gives_up_and_believes_no_answer_about_another_process():
    from gputui.recording.player import ReplayLink

    hello = {"type": "hello", "v": 1, "pid": 9, "read_only": False, "host": {"hostname": "x"}}
    answers = []

    class Liar(ReplayLink):
        """Answers every detail request about the next PID."""

        def __init__(self):
            super().__init__([hello])
            self.inbox = asyncio.Queue()

        async def recv(self):
            if not self._hello_sent:
                return await super().recv()
            return await self.inbox.get()

        async def send(self, message):
            if message.get("type") == "detail":
                answer = dict(message, type="detail", pid=message["pid"] + 1, result="ok")
                answers.append(answer)
                self.inbox.put_nowait(answer)

        async def close(self):
            self.inbox.put_nowait(None)

    class Silent(ReplayLink):
        async def send(self, message):
            self.sent.append(message)  # never answers

    silent = Fleet()
    silent.add("s", lambda: Silent([hello]))
    liar = Fleet()
    liar.add("l", Liar)
    for fleet in (silent, liar):
        fleet.start()
    try:
        await asyncio.sleep(0.1)
        assert await silent.request_detail("s", 5, 7, timeout=0.3) is None
        assert await liar.request_detail("l", 5, 7, timeout=60) is None
        assert len(answers) == 1 and answers[0]["pid"] == 6  # answered, and not believed
        # A recording answers for the processes it has a detail record of, and calls others exited.
        recorded = {"type": "detail", "v": 1, "pid": 5, "start_time": 7, "result": "ok", "cwd": "/x"}
        replay = Fleet()
        replay.add("r", lambda: ReplayLink([hello, recorded]))
        replay.start()
        try:
            await asyncio.sleep(0.1)
            found = await replay.request_detail("r", 5, 7)
            gone = await replay.request_detail("r", 5, 8)
            assert found is not None and found.ok and found.cwd == "/x"
            assert gone is not None and gone.result == "exited" and gone.gone
        finally:
            await replay.stop()
    finally:
        await silent.stop()
        await liar.stop()


async def test_a_reader_that_ends_late_wakes_only_its_own_links_stream():
    """The stream sleeps on one alarm until its reader ends or the link goes silent; a reader of a
    link already dropped that ends late must not wake the next link's stream (it would read as
    silence: a live host called stale)."""
    session = HostSession(HostView("h"), lambda: LocalLink(sim_host("h")), lambda *_: None)
    loop = asyncio.get_running_loop()
    old, new = loop.create_future(), loop.create_future()
    session._reader, session._alarm = new, loop.create_future()
    session._ring(old)
    assert not session._alarm.done()
    session._ring(new)
    assert session._alarm.done()


async def test_an_app_that_stalls_past_the_silence_limit_does_not_call_its_streaming_hosts_silent():
    """The loop blocked (a busy app: thousands of hosts connecting on two cores) while the probe kept
    sending: when it runs again, the host's records are there, queued for the reader. That is the
    app's lag, not the host's silence: the host stays live, its link is not made again."""
    fleet = Fleet()
    history = []
    fleet.listen(
        lambda e: history.append((e.view.status, e.view.reason)) if isinstance(e, StatusChanged) else None
    )
    a = fleet.add("a", lambda: LocalLink(sim_host("a"), interval=0.2), interval=0.2)
    fleet.start()
    try:
        assert await eventually(lambda: a.status == LIVE, 60)
        history.clear()
        connects, seq = a.connects, a.sample.seq
        limit = fleet.sessions["a"]._silence_limit()
        for _ in range(3):
            time.sleep(limit + 0.5)  # the stall under test: the whole loop blocked
            await asyncio.sleep(0.3)  # the loop runs again: the silence timer is due at once
        assert await eventually(lambda: a.sample.seq > seq + 3, 60)
        assert not [s for s, _ in history if s in (STALE, DOWN)], history
        assert a.status == LIVE and a.connects == connects
    finally:
        await fleet.stop()


async def test_a_host_trying_again_keeps_the_words_of_why_it_went_down():
    """Between two attempts the session says "connecting" and the host is shown down: the lists, the
    status line and the server say why, in the failed attempt's own words, until it is live again."""
    from gputui.serve.frames import host_status
    from gputui.transport.base import TransportError

    opened: list[int] = []
    forever = asyncio.Event()

    class Refused:
        hello = None
        failure = None

        async def open(self) -> None:
            opened.append(1)
            if len(opened) == 1:
                raise TransportError("unreachable", "response over 1 MiB")
            await forever.wait()  # the second attempt hangs, as a slow source does

        async def close(self) -> None:
            pass

    fleet = Fleet()
    view = fleet.add("big", lambda: Refused(), read_only=True)
    fleet.start()
    try:
        assert await eventually(lambda: len(opened) == 2, 60)
        assert view.status == "connecting" and view.shown_status == DOWN
        assert view.shown_detail == "response over 1 MiB"
        assert host_status(view) == (DOWN, "unreachable", "response over 1 MiB")
    finally:
        await fleet.stop()
    view.status, view.last_down, view.last_detail = LIVE, None, None
    assert view.shown_detail is None  # live: nothing is wrong

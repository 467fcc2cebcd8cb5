"""The fleet: every host's session, and what the commands and the dashboard ask of all of them.

What the kill flow needs of the fleet is here once: `full_scans` (a sample taken after a full holder
scan from each host, within a timeout) and `execute` (a plan's events, ending in exactly one `done`).
A link that breaks under a running plan, or a plan that outlives its deadline or stays silent past
what its stages allow, ends with "outcome unknown": a probe stopped mid-plan (SIGSTOP, stuck in the
driver) never hangs the operator.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from ..model import Event, ProcDetail, Sample, done_event
from ..probe.common import TERM_TIMEOUT, VERIFY_TIMEOUT, plan_deadline, plan_silence_limit
from ..transport.base import Link, TransportError
from .session import DOWN, FleetEvent, HostSession, HostView, Listener

FULL_SCAN_FRESH = 0.5  # seconds a full-scan sample stays good enough to plan on
DETAIL_TIMEOUT = 3.0  # seconds a probe has to answer a `detail` request (it reads one process)
# Processes' history (gputui/fleet/history.py ProcHistories) is kept on every host of a fleet of up
# to PROCESS_HOSTS hosts; in a larger one, only on the FOLLOWED hosts whose processes were looked
# at last (Fleet.follow): at most 64 hosts' 16 processes, 5 MB, however large the fleet.
PROCESS_HOSTS = 64
FOLLOWED = 4


class Fleet:
    """All host sessions. `listen` callbacks run on the event loop, after each change, and are given
    one FleetEvent (gputui/fleet/session.py) that says what changed."""

    def __init__(self) -> None:
        self.sessions: dict[str, HostSession] = {}
        self.listeners: list[Listener] = []
        self.followed: list[str] = []  # the hosts whose processes' history a large fleet keeps, latest last

    def add(
        self,
        name: str,
        make_link: Callable[[], Link],
        read_only: bool = False,
        interval: float = 1.0,
        group: str | None = None,
    ) -> HostView:
        view = HostView(name=name, read_only=read_only, interval=interval, group=group)
        self.sessions[name] = HostSession(view, make_link, self._notify)
        if len(self.sessions) == PROCESS_HOSTS + 1:  # too large to keep every host's: only followed
            for other in self.sessions.values():
                self._keep(other.view, other.view.name in self.followed)
        elif len(self.sessions) > PROCESS_HOSTS:
            view.keep_processes = False
        return view

    def follow(self, name: str) -> None:
        """Keep the history of `name`'s processes from now on (a screen shows them), and of the
        FOLLOWED-1 hosts followed before it; in a fleet of up to PROCESS_HOSTS it is kept anyway."""
        if name not in self.sessions:
            return
        if name in self.followed:
            self.followed.remove(name)
        self.followed.append(name)
        dropped, self.followed = self.followed[:-FOLLOWED], self.followed[-FOLLOWED:]
        if len(self.sessions) > PROCESS_HOSTS:
            for host in dropped:
                self._keep(self.sessions[host].view, False)
            self._keep(self.sessions[name].view, True)

    @staticmethod
    def _keep(view: HostView, keep: bool) -> None:
        view.keep_processes = keep
        if not keep:
            view.processes.clear()

    @property
    def hosts(self) -> list[HostView]:
        return [s.view for s in self.sessions.values()]

    def view(self, name: str) -> HostView:
        return self.sessions[name].view

    def listen(self, listener: Listener) -> None:
        self.listeners.append(listener)

    def unlisten(self, listener: Listener) -> None:
        """Stop calling `listener` (a screen that listened while it was open)."""
        with contextlib.suppress(ValueError):
            self.listeners.remove(listener)

    def _notify(self, event: FleetEvent) -> None:
        for listener in self.listeners:
            listener(event)

    def start(self) -> None:
        for s in self.sessions.values():
            if s.task is None:
                s.task = asyncio.create_task(s.run(), name=f"host-{s.view.name}")

    async def stop(self) -> None:
        pending = {s.task for s in self.sessions.values() if s.task is not None}
        while pending:
            # Cancel again until each task has ended: on Python 3.10/3.11 `wait_for` can swallow a
            # cancellation that lands just as its inner await completes.
            for t in pending:
                t.cancel()
            _, pending = await asyncio.wait(pending, timeout=0.5)
        for s in self.sessions.values():
            s.task = None

    async def wait_first_samples(self, timeout: float) -> None:
        """Until every host has sent a sample or is down; at most `timeout` seconds."""

        async def one(s: HostSession) -> None:
            while not s.first_sample.is_set() and s.view.status != DOWN:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(s.first_sample.wait(), 0.05)

        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(one(s) for s in self.sessions.values())), timeout)

    async def configure(self, interval: float, preflight_every: int | None = None) -> None:
        """Every probe's sample interval; `preflight_every`: a preflight reading in every Nth sample
        (None: the probe's default)."""
        message: dict[str, Any] = {"type": "configure", "v": 1, "interval": interval}
        if preflight_every is not None:
            message["preflight_every"] = preflight_every
        for s in self.sessions.values():
            s.view.interval = s.asked = interval
            if s.link is not None:
                with contextlib.suppress(TransportError):
                    await s.send(message)

    async def request_sample(self, host: str) -> None:
        """Ask `host`'s probe for a sample now (after a plan: its verdict's GPUs, drawn at once)."""
        with contextlib.suppress(TransportError, KeyError):
            await self.sessions[host].send({"type": "sample", "v": 1})

    async def request_detail(
        self,
        host: str,
        pid: int,
        start_time: int,
        timeout: float = DETAIL_TIMEOUT,
        *,
        environ: bool = False,
        secrets: bool = False,
    ) -> ProcDetail | None:
        """One process of `host` in full, read by its probe now (docs/PROTOCOL.md "detail"), or None
        when there is no answer within `timeout` (not connected, the link broke, a plan keeps the
        probe busy) or the answer is about another process than (pid, start_time). `environ`: its
        environment too; `secrets`: with the values of secret-looking names."""
        session = self.sessions.get(host)
        if session is None:
            return None
        rid = uuid.uuid4().hex[:12]
        future: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()
        session.detail_waiters[rid] = future
        try:
            request: dict[str, Any] = {
                "type": "detail",
                "v": 1,
                "id": rid,
                "pid": pid,
                "start_time": start_time,
            }
            if environ:
                request.update(environ=True, secrets=secrets)
            await session.send(request)
            record = await asyncio.wait_for(future, timeout)
        except (TransportError, asyncio.TimeoutError):
            return None
        finally:
            session.detail_waiters.pop(rid, None)
        detail = ProcDetail.from_wire(record) if record is not None else None
        if detail is None or detail.pid != pid or detail.start_time != start_time:
            return None  # an answer about another process is not believed
        return detail

    async def cancel(self, host: str, plan: str, reason: str) -> None:
        """Ask `host`'s probe to send no further signal for `plan` (it still verifies and reports).
        Best effort: a link that is gone cannot carry it, and the plan's verdict says what happened."""
        with contextlib.suppress(TransportError, KeyError):
            await self.sessions[host].send({"type": "cancel", "v": 1, "plan": plan, "reason": reason})

    async def full_scans(self, hosts: list[str], timeout: float) -> tuple[dict[str, Sample], set[str]]:
        """A sample taken after a full holder scan from each host (a plan trusts no incremental view:
        a holder that opened a device file since the last scan would be missed), or its latest
        sample where none came within `timeout`; and the hosts that got the latest one although a
        full scan was asked (none when `timeout` is 0: nothing asked). Hosts without any sample are
        left out."""
        names = list(dict.fromkeys(hosts))
        out: dict[str, Sample] = {}
        asked: dict[str, asyncio.Future[Sample]] = {}
        if timeout > 0:
            loop = asyncio.get_running_loop()
            for name in names:
                session = self.sessions[name]
                view = session.view
                age = view.age
                if (
                    view.sample is not None
                    and view.sample.full_scan
                    and age is not None
                    and age < FULL_SCAN_FRESH
                    and not session.waiters
                    and view.received > session.acted
                ):
                    # A probe's first sample is a full scan: a command that has just connected
                    # plans on it instead of asking for another (on a busy host, 0.8 s saved).
                    # Never one from before an action: it would show what the action changed.
                    out[name] = view.sample
                    continue
                future: asyncio.Future[Sample] = loop.create_future()
                session.full_scan_waiters.append(future)
                asked[name] = future
                with contextlib.suppress(TransportError):
                    await session.send({"type": "sample", "v": 1, "full": True})
            if asked:
                await asyncio.wait(list(asked.values()), timeout=timeout)
        late: set[str] = set()
        for name in names:
            if name in out:
                continue
            pending = asked.get(name)
            if pending is not None and pending.done() and not pending.cancelled():
                out[name] = pending.result()
                continue
            if pending is not None:
                pending.cancel()
                waiting = self.sessions[name].full_scan_waiters
                if pending in waiting:
                    waiting.remove(pending)
                late.add(name)
            sample = self.view(name).sample
            if sample is not None:
                out[name] = sample
        return out, late

    async def execute(
        self,
        host: str,
        plan: dict[str, Any],
        *,
        deadline: float | None = None,
        silence: float | None = None,
        kind: str = "plan",
    ) -> AsyncIterator[Event]:
        """Send a plan to `host`'s probe and yield its events until `done` (exactly one).

        If the link breaks first, or `deadline` seconds pass, or the probe says nothing for `silence`
        seconds, yields a `done` event of the app's own with result "outcome-unknown". Raises
        TransportError when the plan cannot be sent at all."""
        session = self.sessions[host]
        plan = dict(plan, type=kind, v=1)  # a kill plan, or a reset ("reset"): events alike
        plan.setdefault("id", uuid.uuid4().hex[:12])
        if deadline is None or silence is None:
            # The plan's own timeouts bound it, whoever sent it (the probe's defaults where absent).
            soft, term, verify = _plan_times(plan)
            deadline = plan_deadline(soft, term, verify) if deadline is None else deadline
            silence = plan_silence_limit(term, verify) if silence is None else silence
        plan_id = str(plan["id"])
        q: asyncio.Queue[Event | None] = asyncio.Queue()
        session.waiters[plan_id] = q
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline if deadline is not None else None
        session.acted = time.monotonic()
        # One get at a time, kept across waits, awaited through asyncio.wait: wait_for on Python
        # 3.10/3.11 can swallow a cancellation that comes as the event does (Ctrl+C during `gputui
        # clean` then went unheard until the plan's end: seen under load), as in _stream.
        getting: asyncio.Future[Event | None] | None = None
        try:
            await session.send(plan)
            while True:
                wait = silence
                if end is not None:
                    left = end - loop.time()
                    wait = left if wait is None else min(wait, left)
                if getting is None:
                    getting = asyncio.ensure_future(q.get())
                done, _ = await asyncio.wait({getting}, timeout=None if wait is None else max(0.0, wait))
                if done:
                    event, getting = getting.result(), None
                else:
                    past = end is not None and loop.time() >= end
                    why = (
                        f"no verdict within the plan's deadline ({deadline:g} s)"
                        if past
                        else f"{host}'s probe said nothing for {silence:g} s during the plan"
                    )
                    yield done_event(
                        plan_id,
                        "outcome-unknown",
                        f"{why}: outcome unknown (the probe may be stopped or stuck; check the host)",
                    )
                    return
                if event is None:
                    yield done_event(
                        plan_id,
                        "outcome-unknown",
                        f"connection to {host} lost during the action: outcome unknown",
                    )
                    return
                yield event
                if event.stage == "done":
                    return
        finally:
            if getting is not None:
                getting.cancel()
            session.waiters.pop(plan_id, None)
            session.acted = time.monotonic()


def _plan_times(plan: dict[str, Any]) -> tuple[int, float, float]:
    """A plan record's soft-signal count and timeouts, with the probe's defaults where absent."""

    def seconds(key: str, default: float) -> float:
        value = plan.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf"):
            return float(value)
        return default

    signals = plan.get("signals")
    soft = len(signals) if isinstance(signals, list) else 1
    return soft, seconds("term_timeout", TERM_TIMEOUT), seconds("verify_timeout", VERIFY_TIMEOUT)

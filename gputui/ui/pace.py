"""The probes' samples slowed down while the dashboard cannot keep up with them (gputui/fleet/pacing.py
decides; this is GpuTuiApp's part that looks and asks)."""

from __future__ import annotations

import asyncio
import time

from gputui.fleet.pacing import Pacer

from .intake import APP_HOST, FleetIntake

PACE_TICK = 1.0  # seconds between two looks at whether the app keeps up (gputui/fleet/pacing.py)


class Pacing(FleetIntake):
    """Once a second, a look at whether the app keeps up, and the probes' interval changed when the
    pacer says so (GpuTuiApp sets the attributes below in its __init__)."""

    pacer: Pacer | None
    paced: float | None  # the interval the probes are asked for while paced (None: as asked)
    _pace_asked: float | None  # when the look now on its way was asked for
    _pace_cpu: tuple[float, float]  # (loop time, process time) at the last pacing tick

    def _init_pacing(self, interval: float, hosts: int, pace: bool) -> None:
        """Pacing from the start (`pace`: `gputui` unless --no-pace): the interval the probes are
        asked for while the app cannot keep up at `interval` (None: as asked), checked once a second
        through the app's message queue and the next frame, which is where a key waits too."""
        self.pacer = Pacer(interval, hosts) if pace else None
        self.paced = None
        self._pace_asked = None
        self._pace_cpu = (0.0, 0.0)

    def _pace_post(self) -> None:
        """Once a second on the event loop's clock: a look at whether the app keeps up. The look
        runs once the messages before it are handled and the screen is drawn, as a key is seen
        (behind the message queue alone it ran on time while frames waited for seconds); one
        that has not run by the next second counts as behind by then, so a starved screen that
        never gets to it still paces."""
        if not self.is_running:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        loop.call_later(PACE_TICK, self._pace_post)
        if self._pace_asked is not None:
            self._pace_tick(now - self._pace_asked)  # the last look has not run yet
            return
        self._pace_asked = now
        self.call_after_refresh(self._pace_looked, now)

    def _pace_looked(self, asked: float) -> None:
        self._pace_asked = None
        if self.is_running:
            self._pace_tick(asyncio.get_running_loop().time() - asked)

    def _pace_tick(self, lateness: float) -> None:
        pacer = self.pacer
        if pacer is None:
            return
        now, cpu = asyncio.get_running_loop().time(), time.process_time()
        (then, cpu_then), self._pace_cpu = self._pace_cpu, (now, cpu)
        busy = (cpu - cpu_then) / max(now - then, 1e-3)
        change = pacer.tick(lateness, busy)
        if change is None:
            return
        self.paced = change.interval if pacer.paced else None
        self.run_worker(self.fleet.configure(change.interval), exit_on_error=False, group="configure")
        every = f"{change.interval:g} s"
        if pacer.paced:
            text = f"samples every {every}, not {pacer.asked:g} s: {change.why} (--no-pace: keep the rate)"
            self.log_note(APP_HOST, text, "warn", tag="pace")
        else:
            self.log_note(APP_HOST, f"samples every {every} again: {change.why}", "info", tag="pace")

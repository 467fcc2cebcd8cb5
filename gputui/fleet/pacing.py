"""Pacing: slower samples when the app cannot keep up with its hosts.

Each sample costs the app a little CPU to take and draw, so a fleet's cost grows with hosts x rate.
Past what one core can do (some thousands of hosts at 1 Hz on a small machine) the event loop falls
behind: every key waits for seconds of samples queued before it, and the screen shows the past.
Then the app asks every probe for samples half as often (`configure` `interval`), says so on screen
and in the action log, and asks again for the rate it was given once the app has the room for it.

The rule, once a second (`Pacer.tick`):
- behind: the tick came `late` seconds or more after its time, `ticks` ticks in a row: the interval
  doubles, to at most `most` times the one asked for (`--interval`, the config);
- room again: on a slowed interval, `calm` ticks in a row on time, with the app's CPU at the faster
  rate (twice what it uses now: the cost follows the rate) within `room` of a core: it halves.
- fewer than `min_hosts` hosts: never. Samples are not what keeps such an app busy (a slow terminal,
  a loaded machine), and slower samples would only hide the hosts' news.

Pure and typed: the app feeds it how late its tick ran and how busy it was; the fleet does the asking.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_HOSTS = 64  # fewer hosts than this: never paced
LATE = 1.0  # seconds a tick may run late before it counts as behind
TICKS = 5  # ticks in a row behind before the interval doubles
MOST = 8.0  # the interval never exceeds this many times the one asked for
CALM = 30  # ticks in a row on time before a halving is considered
ROOM = 0.7  # of a core: the app's CPU at the faster rate must fit in this


@dataclass(frozen=True, slots=True)
class Pace:
    """A change of pace: the new interval (seconds), and why, in words for the screen and the log."""

    interval: float
    why: str


class Pacer:
    """When to slow the fleet's samples down, and when to speed them up again."""

    def __init__(
        self,
        asked: float,
        hosts: int,
        *,
        min_hosts: int = MIN_HOSTS,
        late: float = LATE,
        ticks: int = TICKS,
        most: float = MOST,
        calm: int = CALM,
        room: float = ROOM,
    ) -> None:
        self.asked = asked  # the interval the user asked for
        self.interval = asked  # the interval the probes are asked for now
        self.active = hosts >= min_hosts
        self.late, self.ticks, self.most, self.calm, self.room = late, ticks, most, calm, room
        self._behind = 0  # ticks in a row that ran late
        self._on_time = 0  # ticks in a row on time (and the busiest of them)
        self._busiest = 0.0

    @property
    def paced(self) -> bool:
        """Whether samples come slower than asked."""
        return self.interval > self.asked

    def tick(self, lateness: float, busy: float) -> Pace | None:
        """One tick: it ran `lateness` seconds after its time, and the app used `busy` of a core
        (CPU time / wall time) since the last one. A Pace when the interval should change."""
        if not self.active:
            return None
        if lateness >= self.late:
            self._behind += 1
            self._on_time, self._busiest = 0, 0.0
            if self._behind >= self.ticks and self.interval < self.asked * self.most:
                self._behind = 0
                self.interval = min(self.interval * 2, self.asked * self.most)
                return Pace(self.interval, f"the screen was {lateness:.0f} s behind its hosts")
            return None
        self._behind = 0
        if not self.paced:
            return None
        if lateness > self.late / 4:
            self._on_time, self._busiest = 0, 0.0
            return None
        self._on_time += 1
        self._busiest = max(self._busiest, busy)
        if self._on_time < self.calm:
            return None
        faster = 2 * self._busiest
        self._on_time, self._busiest = 0, 0.0
        if faster > self.room:
            return None
        self.interval = max(self.interval / 2, self.asked)
        return Pace(self.interval, f"the app has room again ({faster:.0%} of a core at that rate)")

"""The dashboard's view state: what the operator chose to see, apart from how it is drawn.

The main screen and its panels read and change one `DashboardState` (htop's one State): the host in
view, the filter of each table, the free-only switch, pause, the process followed, the selection,
the GPU row each host's cursor was on, whether the host list is shown. It imports no Textual, so it
is tested without an app (tests/ui/test_dashboard_state.py); the panels draw from it. What it
needs of the live fleet (its hosts, their ages, the clock) is passed in, so a test hands in plain
values.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

from gputui.fleet.session import HostView
from gputui.views.filter import EVERYTHING, Query, parse
from gputui.views.problems import FleetProblems

from .selection import Selection


class TableFilter:
    """A table's filter: the text as typed, and the query as the filter language read it (the last
    text that could be read: a text with a mistake leaves the table as it was)."""

    def __init__(self) -> None:
        self.text = ""
        self.query: Query = EVERYTHING

    def set(self, text: str) -> bool:
        """Read `text` (FilterError where it cannot be); whether the filter changed."""
        query = parse(text)
        if text == self.text:
            return False
        self.text, self.query = text, query
        return True


class Pause:
    """Paused (z): the hosts as they were, drawn instead of the fleet's until resumed. Samples keep
    arriving into the fleet (the kill flow plans from fresh scans, never from these)."""

    def __init__(self) -> None:
        self.frozen: dict[str, HostView] | None = None
        self.ages: dict[str, float | None] = {}
        self.since: float | None = None  # the app's clock when paused

    @property
    def on(self) -> bool:
        return self.frozen is not None

    def toggle(self, live: Sequence[HostView], ages: Mapping[str, float | None], now: float) -> None:
        """Freeze `live` (with the ages of their samples) at `now`, or resume."""
        if self.frozen is None:
            self.frozen = {v.name: frozen_copy(v) for v in live}
            self.ages = {v.name: ages.get(v.name) for v in live}
            self.since = now
        else:
            self.frozen, self.ages, self.since = None, {}, None

    def views(self, live: Sequence[HostView]) -> list[HostView]:
        """The hosts as shown: the fleet's, or as they were when paused (a host added since: live)."""
        frozen = self.frozen
        return list(live) if frozen is None else [frozen.get(v.name, v) for v in live]

    def view(self, live: HostView) -> HostView:
        frozen = self.frozen
        return frozen.get(live.name, live) if frozen is not None else live

    def paused_for(self, now: float) -> float:
        return max(0.0, now - self.since) if self.since is not None else 0.0

    def age_of(self, host: str, live_age: float | None, now: float) -> float | None:
        """The age of the sample shown: while paused, its age then plus the time since."""
        if self.since is None:
            return live_age
        age = self.ages.get(host)
        return None if age is None else age + self.paused_for(now)


class Following:
    """The process row the cursor follows (.), by row key, and the host it was on: on another host
    following ends."""

    def __init__(self) -> None:
        self.key: str | None = None
        self.host: str | None = None

    def follow(self, key: str, host: str | None) -> None:
        self.key, self.host = key, host

    def end(self) -> None:
        self.key = None


class DashboardState:
    """What the main screen shows, as the operator chose it."""

    def __init__(self, start_filter: str = "") -> None:
        """`start_filter`: what both tables are filtered by at the start (the command line's
        --user, --pid, --gpu, --compute, gputui/cli/options.py); FilterError where it cannot be read."""
        self.host: str | None = None  # None: the fleet ("All hosts")
        self.procs = TableFilter()
        self.fleet = TableFilter()
        self.procs.set(start_filter)
        self.fleet.set(start_filter)
        # What is wrong with each host and GPU, and which groups fold (gputui/views/problems.py):
        # shared by the fleet table and the host list.
        self.problems = FleetProblems()
        self.free_only = False
        self.selection = Selection()  # survives refreshes; by (pid, start time)
        self.pause = Pause()
        self.following = Following()
        self.hosts_toggled: bool | None = None  # b: shown or hidden; None: the width decides
        self.busy: dict[str, tuple[int, int]] = {}  # per host: (busy GPUs, GPUs)
        self.order: dict[str, int] = {}  # each host's place in the fleet (the fleet table's sort)
        self._gpu_cursor: dict[str, str] = {}  # per host: the GPU row the cursor was on

    # -- the host in view ----------------------------------------------------------------------

    def switch_host(self, host: str | None, gpu_row: str | None) -> None:
        """Show `host` (None: the fleet); `gpu_row` is where the GPU cursor of the host left is."""
        if self.host is not None and gpu_row is not None:
            self._gpu_cursor[self.host] = gpu_row
        self.host = host

    def gpu_row(self, host: str, default: str) -> str:
        """The GPU row `host`'s cursor was on when it was last left (`default` the first time)."""
        return self._gpu_cursor.get(host, default)

    def enter_at(self, host: str, gpu_row: str) -> None:
        """The next visit of `host` puts its GPU cursor on `gpu_row` (enter on a fleet table row)."""
        self._gpu_cursor[host] = gpu_row

    def step_host(self, hosts: Sequence[str], delta: int) -> str | None:
        """The host `delta` places on from the one in view, "All hosts" first; None: "All hosts"."""
        keys: list[str | None] = [None, *hosts]
        index = (keys.index(self.host) + delta) % len(keys) if self.host in keys else 0
        return keys[index]

    def place_hosts(self, views: Sequence[HostView]) -> dict[str, int]:
        """Each host's place in the fleet, kept while the fleet has the same number of hosts."""
        if len(self.order) != len(views):
            self.order = {v.name: i for i, v in enumerate(views)}
        return self.order

    def filter_of(self, target: str) -> TableFilter:
        """The filter of "fleet" or "procs"."""
        return self.fleet if target == "fleet" else self.procs

    # -- what the screen counts ----------------------------------------------------------------

    def free_gpus(self) -> tuple[int, int]:
        """(GPUs, free GPUs) on the live hosts, from the busy counts of the hosts drawn."""
        total = sum(t for _, t in self.busy.values())
        return total, sum(t - b for b, t in self.busy.values())


def frozen_copy(view: HostView) -> HostView:
    """`view` as it is now: the fleet replaces its sample and appends to its histories in place."""
    frozen = copy.copy(view)
    frozen.history = copy.deepcopy(view.history)
    frozen.host_history = copy.deepcopy(view.host_history)
    frozen.processes = copy.deepcopy(view.processes)
    frozen.preflight = dict(view.preflight)
    frozen.idle = view.idle.copy()
    return frozen

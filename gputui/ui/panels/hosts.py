"""The host list: every host with its state, "All hosts" first, groups folded; shown where the
terminal is wide enough for it and the fleet has more than one host, or as `b` says."""

from __future__ import annotations

from textual.screen import Screen

from gputui.fleet.session import HostView

from ..context import Dashboard
from ..state import DashboardState
from ..widgets.host_list import ALL_HOSTS, GROUP, HostList
from .base import Panel

NARROW = 100  # columns: below this the host list starts hidden (b shows it)


class HostsPanel(Panel):
    def __init__(self, screen: Screen[None], state: DashboardState, dash: Dashboard, table: HostList) -> None:
        super().__init__(screen, state, dash)
        self.table = table

    def show(self, listed: list[HostView], fleet: list[HostView] | None) -> None:
        """`listed` drawn again; `fleet`: the fleet's counts too (None: they wait)."""
        ages = {v.name: self.age_of(v.name) for v in listed}
        self.table.show(listed, ages, self.state.busy, fleet, self.state.problems)

    def point_at(self, host: str | None) -> None:
        """The list's cursor on `host`'s row, or on its group's line where it is folded into it."""
        problems = self.state.problems
        if host is not None and problems.folded(host):
            self.table.move_to(GROUP + problems.group(host))
            return
        self.table.move_to(ALL_HOSTS if host is None else host)

    def on_line_of(self, host: str | None) -> bool:
        """Whether the list's cursor is on the group line `host` is folded into (where `point_at`
        put it): that line stands for the host in view, not for "All hosts"."""
        problems = self.state.problems
        return host is not None and problems.folded(host) and self.table.cursor_group == problems.group(host)

    def fit(self, width: int) -> None:
        show = self.state.hosts_toggled
        if show is None:
            show = len(self.dash.fleet.hosts) > 1 and width >= NARROW
        self.table.display = show

    def toggle(self, width: int) -> None:
        """b: show or hide the list, whatever the width; shown, it takes the focus."""
        self.state.hosts_toggled = not self.table.display
        self.fit(width)
        if self.table.display:
            self.table.focus()

    def folded(self, group: str) -> None:
        self.table.move_to(GROUP + group, scroll=True)

"""The header: the status line (the host in view, or the fleet's counts), and the legend (with the
host's CPU and RAM over its last samples first)."""

from __future__ import annotations

from textual.screen import Screen

from gputui.fleet.session import HostView

from ..context import Dashboard
from ..state import DashboardState
from ..widgets.status import Legend, StatusLine
from .base import Panel


class HeaderPanel(Panel):
    def __init__(
        self, screen: Screen[None], state: DashboardState, dash: Dashboard, status: StatusLine, legend: Legend
    ) -> None:
        super().__init__(screen, state, dash)
        self.status_line, self.legend = status, legend

    def show_fleet(self, views: list[HostView]) -> None:
        self.status_line.show_fleet(
            views, self.state.busy, self.dash.read_only, paused=self.paused_for(), paced=self.dash.paced
        )
        self.legend.show_load(None)

    def show_host(self, view: HostView) -> None:
        self.status_line.show_host(
            view,
            self.age_of(view.name),
            self.dash.read_only,
            paused=self.paused_for(),
            exact=self.dash.exact_memory,
            paced=self.dash.paced,
        )
        self.legend.show_load(view.host_history)  # the host's CPU and RAM over the last samples

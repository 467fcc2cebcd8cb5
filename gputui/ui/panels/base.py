"""What every panel shares: the screen it draws on, the view state, the app as the screens know it,
and the hosts as the screen shows them (the fleet's, or as they were when paused)."""

from __future__ import annotations

from textual.screen import Screen

from gputui.fleet.session import LIVE, HostView

from ..context import Dashboard
from ..state import DashboardState
from ..widgets.host_list import seen


class Panel:
    def __init__(self, screen: Screen[None], state: DashboardState, dash: Dashboard) -> None:
        self.screen = screen
        self.state = state
        self.dash = dash

    def views(self) -> list[HostView]:
        return self.state.pause.views(self.dash.fleet.hosts)

    def view(self, host: str) -> HostView:
        return self.state.pause.view(self.dash.fleet.view(host))

    def age_of(self, host: str) -> float | None:
        return self.state.pause.age_of(host, self.dash.age_of(host), self.dash.clock())

    def paused_for(self) -> float | None:
        """Seconds the view has been frozen; None: live."""
        pause = self.state.pause
        return pause.paused_for(self.dash.clock()) if pause.on else None

    def not_live(self, view: HostView) -> str:
        """` · down, last seen 2m ago` for a host whose numbers are from a sample that is not live."""
        if view.status == LIVE or view.sample is None:
            return ""
        return f" · {view.status}, {seen(self.age_of(view.name))}"

"""The GPU pane: a host's GPU table (with its notice), or on "All hosts" the fleet table, and their
titles; which GPU (or host) the cursor is on, for the process pane and the kill keys."""

from __future__ import annotations

from textual.screen import Screen

from gputui.fleet.session import HostView
from gputui.text.words import count
from gputui.views.filter import NOTHING_MATCHES

from .. import fmt
from ..context import Dashboard
from ..state import DashboardState
from ..widgets.borders import set_subtitle, set_title
from ..widgets.fleet_table import FleetTable
from ..widgets.gpu_table import ALL, GpuTable
from ..widgets.host_list import GROUP, not_live
from ..widgets.proc_table import ProcScope
from ..widgets.status import HostNotice
from .base import Panel


class GpusPanel(Panel):
    def __init__(
        self,
        screen: Screen[None],
        state: DashboardState,
        dash: Dashboard,
        gpus: GpuTable,
        fleet: FleetTable,
        notice: HostNotice,
    ) -> None:
        super().__init__(screen, state, dash)
        self.gpu_table, self.fleet_table, self.notice = gpus, fleet, notice

    def scope(self) -> ProcScope | None:
        """The processes to list: of the GPU under the GPU (or fleet) cursor, or of the whole host."""
        if self.state.host is not None:
            return ProcScope(self.state.host, self.gpu_table.cursor_gpu)
        at = self.fleet_table.cursor_gpu
        return ProcScope(at[0], at[1]) if at is not None else None

    def target_host(self) -> str | None:
        """The host in view, or the one under the fleet cursor: where the kill keys act."""
        if self.state.host is not None:
            return self.state.host
        at = self.fleet_table.cursor_gpu
        return at[0] if at is not None else None

    def switch(self, host: str | None) -> None:
        """The GPU table of `host`, or the fleet table for None; focus on the pane that goes away
        moves to the one that comes."""
        self.state.switch_host(host, self.gpu_table.cursor_key)
        fleet_view = host is None
        refocus = self.screen.focused in (self.fleet_table, self.gpu_table)
        self.fleet_table.display = fleet_view
        self.gpu_table.display = not fleet_view
        if refocus:
            self.table().focus()
        self.notice.display = False
        self.gpu_table.forget()

    def table(self) -> GpuTable | FleetTable:
        """The pane's table now: the fleet's on "All hosts", else the host's GPUs."""
        return self.fleet_table if self.state.host is None else self.gpu_table

    def restore_cursor(self) -> None:
        """The GPU cursor where it was when this host was last left."""
        host = self.state.host
        if host is not None:
            self.gpu_table.move_to(self.state.gpu_row(host, ALL), scroll=True)

    def show_fleet(self, views: list[HostView], touched: list[HostView]) -> None:
        if touched:
            ages = {v.name: self.age_of(v.name) for v in touched}
            self.fleet_table.show_hosts(
                touched,
                self.state.place_hosts(views),
                self.state.fleet.query,
                self.state.free_only,
                ages,
                fleet=views,
                problems=self.state.problems,
            )

    def fleet_title(self) -> None:
        state = self.state
        total, free = state.free_gpus()
        unknown = sum(not_live(v) for v in self.views())  # on hosts not live: neither busy nor free
        title = f"All GPUs · {total + unknown} on {count(len(self.dash.fleet.hosts), 'host')}, {free} free"
        if unknown:
            title += f", {unknown} not live"
        troubled = state.problems.troubled()
        order = self.fleet_table.sorted_words()  # a sort by a column: problems are not first then
        if order:
            title += f" · {order}"
        elif troubled:
            title += f" · {count(troubled, 'host')} with problems first"
        folded = self.fleet_table.folded_hosts
        if folded and not state.free_only and not state.fleet.query:
            title += f" · {count(folded, 'healthy host')} folded (enter: unfold)"
        if state.free_only:
            title += f" · showing free only ({self.fleet_table.row_count})"
        if state.fleet.text:
            title += f" · filter: {fmt.safe(state.fleet.text, 30)}"
            if not self.fleet_table.row_count:
                title += f" · {NOTHING_MATCHES}"
        set_title(self.fleet_table, title)
        set_subtitle(self.fleet_table, self.fleet_table.hidden_sort())

    def show_host(self, view: HostView) -> None:
        self.notice.display = self.notice.show_host(view)
        self.gpu_table.display = bool(view.sample and view.sample.gpus)
        self.gpu_table.idle_after = self.dash.idle_after
        self.gpu_table.show(view)
        set_title(self.gpu_table, f"GPUs · {fmt.safe(view.name, 40)}{self.not_live(view)}")

    def folded(self, group: str) -> None:
        """The cursor on the group's line, now that it folded."""
        self.fleet_table.move_to(GROUP + group, scroll=True)

    def first_of(self, host: str) -> None:
        """The cursor on `host`'s first GPU row."""
        self.fleet_table.move_to(min(self.fleet_table.keys_of(host), default=None), scroll=True)

"""Drawing what changed: the app calls the screen's `refresh_data` from a short timer with the names
of the hosts that changed since the last call, and only those hosts' rows (and the visible panes)
are touched; the fleet's counts of a large fleet wait for the once-a-second tick."""

from __future__ import annotations

from textual.screen import Screen

from gputui.fleet.session import LIVE, HostView

from ..context import Dashboard
from ..state import DashboardState
from ..widgets.action_log import ActionLog
from ..widgets.host_list import busy_total
from .base import Panel
from .gpus import GpusPanel
from .header import HeaderPanel
from .hosts import HostsPanel
from .processes import ProcessesPanel

# Above this many hosts, the fleet's counts (the table's title, the status line) are drawn once a
# second, with the ages, not on every redraw: at a thousand hosts they changed ten times a second,
# and a new title repaints the whole table.
SUMMARY_HOSTS = 256


class Redraw(Panel):
    def __init__(
        self,
        screen: Screen[None],
        state: DashboardState,
        dash: Dashboard,
        panes: tuple[HeaderPanel, HostsPanel, GpusPanel, ProcessesPanel],
        log: ActionLog,
    ) -> None:
        super().__init__(screen, state, dash)
        self.header, self.hosts, self.gpus, self.procs = panes
        self.action_log = log

    def hosts_changed(self, changed: set[str], *, everything: bool, ages: bool) -> None:
        """Bring the visible widgets up to date with the fleet, touching only what `changed` names.

        `everything`: every host (after a theme switch or a filter change); `ages`: refresh the age
        column of every host (once a second: ages move even when nothing arrives)."""
        views = self.gpus.views()
        if self.state.pause.on and not everything:
            changed = set()  # frozen: only the PAUSED time moves
        elif ages:
            # An idle holder's time moves with its host's samples, which may have no news (and not
            # be drawn: gputui/fleet/news.py): the tick that moves ages draws the hosts that have one
            # (and one that just became one).
            after = self.dash.idle_after
            changed = changed | {v.name for v in views if v.idle.any_for(after)}
        touched = views if everything else [v for v in views if v.name in changed]
        touched = self._regroup(touched, views, everything)
        self._count(touched)
        listed = views if (ages or everything) else touched
        # A host that is not live says how old its numbers are: the tick that moves ages redraws it.
        aging = {v.name for v in views if v.status != LIVE and v.sample is not None} if ages else set()
        summary = everything or ages or len(views) <= SUMMARY_HOSTS  # the fleet's counts too
        with self.screen.app.batch_update():
            if listed:
                self.hosts.show(listed, views if summary else None)
            host = self.state.host
            if host is None:
                names = {v.name for v in touched}
                self._refresh_fleet(views, touched + [v for v in views if v.name in aging - names], summary)
            else:
                self._refresh_host(self.gpus.view(host), everything or bool({host} & (changed | aging)))
            scope = self.procs.scope
            redo = scope is not None and scope.host in changed | aging
            self.procs.refresh(force=everything or redo)

    def _regroup(self, touched: list[HostView], views: list[HostView], everything: bool) -> list[HostView]:
        """What is wrong where (problems first, healthy hosts folded by group): worked out again for
        the hosts that changed; a group whose folding changed is drawn again whole."""
        if not touched:
            return touched
        problems = self.state.problems
        regrouped = problems.update(touched, views, self.dash.idle_after)
        if not regrouped or everything:
            return touched
        names = {v.name for v in touched}
        return touched + [v for v in views if v.name not in names and problems.group(v.name) in regrouped]

    def _count(self, touched: list[HostView]) -> None:
        """The busy GPUs of the hosts drawn again; the selected processes that left them, dropped."""
        for view in touched:
            self.state.busy[view.name] = busy_total(view)
            for gone in self.state.selection.prune(view.name, view.sample):
                self.action_log.note(
                    view.name, f"selected {gone.label} is gone: dropped from the selection", "warn"
                )

    def _refresh_fleet(self, views: list[HostView], touched: list[HostView], summary: bool) -> None:
        self.gpus.show_fleet(views, touched)
        if not summary:
            return  # (SUMMARY_HOSTS) the counts wait for the next ages tick
        if touched or len(views) > SUMMARY_HOSTS:
            self.gpus.fleet_title()
        self.header.show_fleet(views)

    def _refresh_host(self, view: HostView, changed: bool) -> None:
        self.header.show_host(view)
        if changed:
            self.gpus.show_host(view)

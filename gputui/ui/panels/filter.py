"""The filter box (/): it filters the focused table (the fleet's, the processes', the log's) as the
operator types; what cannot be read yet is said beside it and the table keeps its last filter."""

from __future__ import annotations

from textual.screen import Screen
from textual.widget import Widget

from gputui.views.filter import FilterError

from .. import fmt
from ..context import Dashboard
from ..state import DashboardState
from ..widgets.filter_bar import FilterBar, FilterProblem
from .base import Panel
from .log import LogPanel


class FilterPanel(Panel):
    def __init__(
        self,
        screen: Screen[None],
        state: DashboardState,
        dash: Dashboard,
        row: Widget,
        log: LogPanel,
    ) -> None:
        super().__init__(screen, state, dash)
        self.row = row
        self.bar = row.query_one(FilterBar)
        self.problem = row.query_one(FilterProblem)
        self.log = log
        self._focus_before: Widget | None = None

    def target(self, procs: Widget) -> str:
        """What `/` filters: the log where it has the focus, the fleet on "All hosts" unless the
        process table (`procs`) has it, else the processes."""
        if self.log.has_focus():
            return "log"
        if self.state.host is None and self.screen.focused is not procs:
            return "fleet"
        return "procs"

    def open(self, target: str) -> None:
        log = self.log.action_log
        text = log.filter_text if target == "log" else self.state.filter_of(target).text
        self._focus_before = self.screen.focused
        self.row.display = True
        self.bar.open(target, text)
        self.screen.call_after_refresh(self.log.lift_toasts)

    def set(self, target: str, text: str) -> bool:
        """Filter `target` by `text`; whether the fleet's or the processes' filter changed (their
        table is drawn again)."""
        if target == "log":
            self.log.action_log.set_filter(text)
            return False
        try:
            changed = self.state.filter_of(target).set(text)
        except FilterError as exc:
            # Said beside the box; the table keeps the last filter that could be read.
            self.problem.say(fmt.safe(exc.message, 300))
            return False
        self.problem.say("")
        return changed

    def unreadable(self) -> bool:
        """Whether the box holds text that cannot be read (its problem said beside it)."""
        return bool(self.problem.display)

    def close(self, fallback: Widget) -> None:
        """The box goes, the focus back where it was (or to `fallback`)."""
        self.problem.say("")
        target = self.bar.target
        if target in ("fleet", "procs"):
            self.bar.value = self.state.filter_of(target).text
        self.row.display = False
        self.screen.call_after_refresh(self.log.lift_toasts)
        before = self._focus_before
        # Now, as the box opened: keys queued behind the enter are the table's, not the hidden box's.
        self.screen.set_focus(before if before is not None and before.is_attached else fallback)

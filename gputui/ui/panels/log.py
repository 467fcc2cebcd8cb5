"""The action log's pane (l) and the toasts, which stack above it while it shows, so a toast never
covers the log's last lines (a verdict's toast would hide the verdict's own line)."""

from __future__ import annotations

from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widget import Widget

from ..context import Dashboard
from ..state import DashboardState
from ..widgets.action_log import ActionLog
from .base import Panel


class LogPanel(Panel):
    def __init__(self, screen: Screen[None], state: DashboardState, dash: Dashboard, log: ActionLog) -> None:
        super().__init__(screen, state, dash)
        self.action_log = log

    def has_focus(self) -> bool:
        focused = self.screen.focused
        return focused is not None and (focused is self.action_log or self.action_log in focused.ancestors)

    def show(self) -> None:
        self.action_log.display = True
        self.screen.call_after_refresh(self.lift_toasts)

    def toggle(self, focus_after: Widget) -> None:
        """l: show or hide the log; hidden with the focus in it, the focus goes to `focus_after`."""
        log = self.action_log
        log.display = not log.display
        self.screen.call_after_refresh(self.lift_toasts)
        focused = self.screen.focused
        if not log.display and focused is not None and log in focused.ancestors:
            focus_after.focus()

    def lift_toasts(self) -> None:
        """The toasts inside the process table's pane: above its bottom border, left of its right
        border and scroll bar, so they cover no border, nor the log below it (while it shows), the
        legend or the footer. Without that pane laid out, Textual's own place: above the footer."""
        try:
            rack = self.screen.query_one("#textual-toastrack")
            procs = self.screen.query_one("#procs")
        except NoMatches:  # notifications are off
            return
        size = self.screen.size
        inside = procs.scrollable_content_region
        margin = (0, 0, 1, 0)
        if procs.display and inside.height:
            margin = (0, max(size.width - inside.right, 0), max(size.height - inside.bottom, 1), 0)
        if tuple(rack.styles.margin) != margin:
            rack.styles.margin = margin

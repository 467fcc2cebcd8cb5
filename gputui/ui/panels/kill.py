"""The kill keys (f, F, x, X, T, K, I, and where they are not offered, why): they gather the targets from the
panes and post a request; gputui.kill plans it and the app confirms it (gputui/ui/app.py)."""

from __future__ import annotations

from dataclasses import replace

from textual.screen import Screen

from gputui.fleet.session import LIVE, REASONS, HostView
from gputui.kill.operate import Request
from gputui.model.host import NOT_THROUGH_A_HUB

from .. import fmt
from ..context import Dashboard
from ..messages import PlanRequested, View
from ..state import DashboardState
from .base import Panel
from .gpus import GpusPanel
from .processes import ProcessesPanel

KILL_ACTIONS = (
    "toggle_select",
    "free_gpu",
    "free_host",
    "plan",
    "tag_user",
    "stop_job",
    "select_idle",
    "signal_plan",
    "signal_menu",
)
ACTION_NAMES = {
    "free_gpu": "Free GPU",
    "free_host": "Free host",
    "plan": "Plan",
    "toggle_select": "Select",
    "tag_user": "Tag user",
    "stop_job": "Stop job",
    "select_idle": "Idle holders",
    "signal_plan": "Signal",
    "signal_menu": "Signal",
}


def not_relayed(view: HostView, what: str) -> str | None:
    """Why `what` ("Signals", "GPU resets") cannot go to a host read through a hub, said before any
    dialog; None for a host read directly. The hub runs kill plans from its own scan and sends
    neither: the operator is told where to run them."""
    if view.facts is None or not view.facts.hub:
        return None
    return f"{fmt.safe(view.name, 40)}: " + NOT_THROUGH_A_HUB.format(what=what)


class KillPanel(Panel):
    def __init__(
        self,
        screen: Screen[None],
        state: DashboardState,
        dash: Dashboard,
        gpus: GpusPanel,
        procs: ProcessesPanel,
    ) -> None:
        super().__init__(screen, state, dash)
        self.gpus, self.procs = gpus, procs

    def refusal(self) -> str | None:
        """Why no kill action is offered for the host in view (or under the fleet cursor), in words
        for a notification; None when they are."""
        if self.dash.read_only:
            return self.dash.read_only_why
        host = self.gpus.target_host()
        if host is None:
            return None  # nothing under the cursor: the actions themselves say what to do
        view = self.dash.fleet.view(host)
        name = fmt.safe(host, 40)
        facts = view.facts
        if view.read_only:
            return f"{name} is marked read-only (read_only in the config): gputui signals nothing there."
        if facts is not None and facts.read_only:
            return f"the probe on {name} runs read-only: it refuses every plan."
        if facts is not None and facts.error_code:
            why = REASONS.get(facts.error_code, fmt.safe(facts.error_code, 40))
            return f"{name} has no GPU to free ({why})."
        if view.status != LIVE or view.sample is None:
            why = REASONS.get(view.reason or "", fmt.safe(view.reason, 40)) if view.reason else ""
            state = f"{view.status}: {why}" if why else view.status
            return f"{name} is not connected ({state}): nothing can be sent to it now."
        if not view.sample.gpus:
            return f"{name} has no GPU to free."
        return None

    def menu_refusal(self) -> str | None:
        """Why F9's menu of signals is not offered: what refuses every kill key, or a host read
        through a hub (the menu's other ladders are not relayed; T, K and I still are)."""
        reason = self.refusal()
        host = self.gpus.target_host()
        if reason is None and host is not None:
            reason = not_relayed(self.dash.fleet.view(host), "Signals")
        return reason

    def refuse(self, action: str) -> None:
        """A kill key where it is not offered: why."""
        reason = self.menu_refusal() if action == "signal_menu" else self.refusal()
        if reason is not None:
            what = ACTION_NAMES.get(action, "Kill")
            self.screen.notify(reason, title=f"{what}: not offered here", severity="warning", timeout=6)

    def free_gpu(self) -> None:
        scope = self.gpus.scope()
        if scope is None or scope.gpu is None:
            self.screen.notify("Put the cursor on a GPU to free it (F frees every GPU of the host).")
            return
        host = self.gpus.target_host()
        if host is not None:
            self._ask(Request(host, "gpus", gpus=(scope.gpu,)))

    def free_host(self, sweep: bool) -> None:
        host = self.gpus.target_host()
        if host is None:
            return
        sample = self.dash.fleet.view(host).sample
        gpus = tuple(g.index for g in sample.gpus) if sample else ()
        self._ask(Request(host, "host", gpus=gpus, sweep=sweep))

    def sweep_candidates(self, host: str) -> int:
        """Hidden holders of `host` tied to no GPU: what a sweep would add."""
        sample = self.dash.fleet.view(host).sample
        return sum(1 for p in sample.processes if p.kind == "hidden" and not p.gpus) if sample else 0

    def stop_job(self) -> None:
        """X: a plan that stops the job under the cursor (its root first, then every member left),
        in the confirmation dialog."""
        procs = self.procs
        scope = procs.scope
        if scope is None or procs.table.cursor_key is None:
            self.screen.notify(
                "Put the process table's cursor on a job (J lists them) or one of its processes."
            )
            return
        job = procs.cursor_job()
        if job is None:
            at = procs.table.cursor_any_key
            pid = f"PID {at[0][0]}" if at is not None else "This row"
            self.screen.notify(
                f"{pid} belongs to no job the probe named (a monitor, or a process without a GPU): "
                "x stops the process itself.",
                timeout=6,
            )
            return
        self._ask(Request(scope.host, "jobs", jobs=(job,)))

    def plan(self, signals: str | None = None) -> None:
        """x (and T, K, I with their ladder): the selection, or the process under the cursor, planned
        in the confirmation dialog."""
        requests = self.chosen()
        if requests:
            self._ask(*(replace(r, signals=signals) for r in requests))

    def _ask(self, *requests: Request) -> None:
        """The app plans them, and shows the dialog if the operator is still in this view then."""
        self.screen.post_message(PlanRequested(*requests, view=View(self.screen, self.state.host)))

    def chosen(self) -> list[Request]:
        """The requests for the selection (or the cursor's process); none: it says what to do."""
        requests = self.procs.selected_requests()
        if not requests:
            self.screen.notify("Select processes with space first (or put the cursor on one).")
        return requests

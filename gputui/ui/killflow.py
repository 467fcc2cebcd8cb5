"""The kill and reset flows of the dashboard: GpuTuiApp's part that plans, confirms and runs.

The kill flow (f, F, x): the screen posts `PlanRequested`; the app hands the requests to
gputui.kill.operate (the same headless owner `gputui clean` uses), which asks each host for a sample after a
full holder scan and builds one plan per host; the app shows them in `PlanScreen` and, once
confirmed, runs each plan in its own worker through `Operations.run`: the plan and its intents are in
the audit log before the probe is sent anything. The probe runs the stages; the app only renders the
events, live, in the action log pane, with a status line while it waits, and the typed verdict.
At start, actions that an earlier gputui began and never saw finish are reported, then acknowledged.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

from textual import work
from textual.timer import Timer

from gputui.fleet.fleet import Fleet
from gputui.kill.operate import FRESH_TIMEOUT, AnyRequest, Operations, Request, status_of
from gputui.kill.plan import KillOptions, Plan
from gputui.model import Event, PlanVerdict
from gputui.text.words import KEY_JOB_STOP, toast_title, verdict_summary

from . import fmt
from . import spinner as actions
from .intake import FleetIntake
from .messages import PlanRequested, ResetRequested, View
from .screens.plan import PlanScreen
from .screens.reset import ResetScreen
from .terminal import Lifeline

LEFT = "the view it was asked from was left before it was ready; nothing signalled (ask again)"


class KillFlow(FleetIntake):
    """Plans asked for, confirmed in a dialog and run, each in its own worker; GPU resets the same
    way (GpuTuiApp sets the attributes below in its __init__)."""

    ops: Operations
    operator: str
    read_only: bool
    fresh_timeout: float  # 0: plan on the latest sample, ask for no scan
    lifeline: Lifeline | None
    _progress_timer: Timer | None

    def _init_kill_flow(
        self, fleet: Fleet, log_path: str | Path | None, kill: KillOptions | None, operator: str | None
    ) -> None:
        """The flow's owner of plans (its audit log file opened at the first write: a plan, or
        acknowledging), no plan running yet."""
        self.ops = Operations.open(fleet, log_path, kill=kill, operator=operator)
        self.audit = self.ops.audit
        self.operator = self.ops.operator
        self.fresh_timeout = FRESH_TIMEOUT
        self.running = {}
        self._progress_timer = None

    def _abandon(self, plan: Plan) -> None:
        """The app ends before `plan`'s verdict: an outcome-unknown `done` line says so (whole and
        fsync'd, as every line is; the next start still reports the plan as unfinished). One writer
        for the dashboard and `gputui clean`: Operations.abandon (once per plan, any thread)."""
        lifeline = self.lifeline
        why = lifeline.reason if lifeline is not None and lifeline.reason else "the operator quit"
        self.ops.abandon(plan.host, plan.id, why)

    def on_plan_requested(self, message: PlanRequested) -> None:
        self.request_plans(message.requests, message.view)

    def view_now(self) -> View:
        """Where the operator is now (as the screens say it in their PlanRequested)."""
        main = self._main
        return View(self.screen, main.state.host if self.screen is main and main is not None else None)

    def request_plans(self, requests: Sequence[AnyRequest], view: View | None = None) -> None:
        """Plan what the operator asked for (one plan per host) and open the confirmation dialog, if
        the operator is still in `view` when the plans are ready (None: wherever they are)."""
        if self.read_only:
            return  # no key leads here; a stray message must not either
        usable: list[AnyRequest] = []
        for request in requests:
            trouble = self.ops.problem(request.host)
            if trouble is not None:
                words = "it takes no plans" if trouble.status != "busy" else ""
                text = f"{request.host}: {trouble.message}" + (f"; {words}" if words else "")
                self.notify(text, severity="warning", markup=False)
            else:
                usable.append(request)
        if usable:
            self._plan_and_confirm(usable, view)

    @work(exclusive=True, group="planning", exit_on_error=False)
    async def _plan_and_confirm(self, requests: list[AnyRequest], view: View | None) -> None:
        try:
            await self._plan_and_confirm_now(requests, view)
        except Exception as exc:  # a bug must say so, not vanish with its worker
            self.notify(
                f"{type(exc).__name__}: {exc}", title="Planning failed", severity="error", markup=False
            )
            raise

    async def _plan_and_confirm_now(self, requests: list[AnyRequest], view: View | None) -> None:
        planned = await self.ops.plan(requests, self.fresh_timeout)
        for problem in planned.problems:
            self.notify(problem, title="Cannot plan", severity="warning", markup=False)
        # A plan of zombies alone is refused as `clean` and the hub refuse it: confirmed, it would
        # signal nothing and its verdict would say "stopped".
        for plan in planned.plans:
            if plan.zombies_refusal is not None:
                self.log_note(
                    plan.host, f"plan {plan.id} refused: {plan.zombies_refusal}", "warning", tag=plan.id
                )
                self.notify(plan.zombies_refusal, title=f"{plan.host}: nothing to stop", severity="warning")
        planned.plans = [p for p in planned.plans if p.zombies_refusal is None]
        if not planned.plans:
            return
        if view is not None and view != self.view_now():
            # The operator moved on while it was made (another screen, another host): a dialog
            # over a view it was not asked from would be read as that view's.
            for plan in planned.plans:
                self.log_note(plan.host, f"plan {plan.id} not shown: {LEFT}", "warning", tag=plan.id)
            self.notify(LEFT, title="Plan not shown", severity="warning")
            return
        # A new dialog every time, from the plans as built: nothing chosen in an earlier one (the
        # sweep, a signal, an included monitor) carries over.
        dialog = PlanScreen(planned.plans, planned.samples, operator=self.operator)
        chosen = await self.push_screen_wait(dialog)
        if not chosen:
            for plan in planned.plans:
                self.log_note(plan.host, f"plan {plan.id} cancelled: nothing signalled", "info", tag=plan.id)
            return
        confirmed = {p.host for p in chosen}
        if self._main is not None:
            for request in requests:
                # Now in a plan: its verdict says what became of them (a signal selects nothing).
                if isinstance(request, Request) and request.host in confirmed:
                    self._main.state.selection.discard(request.host, (p.key for p in request.processes))
        for plan in chosen:
            self.run_plan(plan)

    @work(exclusive=False, group="plans", exit_on_error=False)
    async def run_plan(self, plan: Plan) -> PlanVerdict | None:
        """Send `plan` to its host's probe and render its events until the verdict."""
        host = plan.host
        progress = actions.Progress(host, plan)
        self.running[plan.id] = progress
        self.show_log()
        if self._progress_timer is not None:
            self._progress_timer.resume()
        # `Stop job 4242 (torchrun ...)`, `free GPU 3`, `stop the chosen process`: gputui.kill.plan words it.
        what = plan.title if plan.jobs else plan.title[:1].lower() + plan.title[1:]
        self.log_note(host, f"plan {plan.id}: {what}: {len(plan.signalled)} to signal", tag=plan.id)

        ended = False  # the probe's `done` came: the audit log has the plan's outcome

        def on_event(event: Event) -> None:
            nonlocal ended
            ended = ended or event.stage == "done"
            progress.on_event(event)
            self.log_event(host, event)

        try:
            verdict = await self.ops.run(plan, on_event)
        except asyncio.CancelledError:
            # The app is closing: the probe is ended with it; the next start reports the plan.
            if not ended:
                self._abandon(plan)
            raise
        except Exception as exc:  # a bug: the probe finishes the plan; say that the app lost it
            self._ended(plan, None, f"the app lost track of the plan ({type(exc).__name__}: {exc})")
            raise
        finally:
            self.running.pop(plan.id, None)
            if not self.running:
                self._show_progress()
                if self._progress_timer is not None:
                    self._progress_timer.pause()
        self._ended(plan, verdict, verdict_summary(verdict, KEY_JOB_STOP))
        return verdict

    def _ended(self, plan: Plan, verdict: PlanVerdict | None, text: str) -> None:
        ok = verdict is not None and verdict.ok
        status = status_of(verdict)[0] if verdict is not None else "error"
        # A parent that still runs may start what was stopped again (a supervisor): the verdict
        # says so (words.verdict_summary), and a good verdict with one is a warning, not all clear.
        restarts = verdict is not None and bool(verdict.restarts)
        level = "error" if not ok else "warn" if restarts else "ok"
        self.log_note(plan.host, f"verdict: {text}", level, tag=plan.id)
        title = toast_title(status, plan.cleans_gpus, plan.signal)
        # The verdict's GPUs in the tables now, not at the next sample: ask for one.
        self.run_worker(self.fleet.request_sample(plan.host), group="after-plan", exit_on_error=False)
        self.notify(
            text,
            title=f"{fmt.safe(plan.host, 40)}: {title}" + (" · may restart" if restarts else ""),
            severity="error" if not ok else "warning" if restarts else "information",
            timeout=8 if ok and not restarts else 20,
            markup=False,
        )

    def on_reset_requested(self, message: ResetRequested) -> None:
        if not self.read_only and self.fleet.view(message.host).can_kill:
            self._reset(message.host, message.gpu)

    @work(exclusive=True, group="planning", exit_on_error=False)
    async def _reset(self, host: str, gpu: int) -> None:
        """Dry run (the probe lists what blocks a reset and the steps), the dialog, then the reset,
        every event in the action log and the verdict as a notification."""
        dry = await self.ops.reset(host, gpu, dry_run=True)
        sample = self.fleet.view(host).sample
        account = next((g.accounting for g in sample.gpus if g.index == gpu), None) if sample else None
        if not await self.push_screen_wait(ResetScreen(host, gpu, dry, account)):
            if not dry.blockers and dry.result == "dry-run":
                self.log_note(host, f"reset of GPU {gpu} cancelled: nothing done")
            return
        self.show_log()
        self.log_note(host, f"reset GPU {gpu}: the ladder starts")
        verdict = await self.ops.reset(host, gpu, on_event=lambda e: self.log_event(host, e))
        self.log_note(host, f"verdict: {verdict.message}", "ok" if verdict.ok else "error")
        self.run_worker(self.fleet.request_sample(host), group="after-plan", exit_on_error=False)
        self.notify(
            verdict.message,
            title=f"{fmt.safe(host, 40)}: GPU {gpu} " + ("reset" if verdict.ok else "NOT reset"),
            severity="information" if verdict.ok else "error",
            timeout=10 if verdict.ok else 20,
            markup=False,
        )

    def _show_progress(self) -> None:
        main = self._main
        if main is None or not main.is_mounted or not self.is_running:
            return
        now = time.monotonic()
        lines = [p.line(now) for p in self.running.values()]
        main.action_log.set_progress(f"{actions.spinner(now)} " + " · ".join(lines) if lines else "")

"""The gputui Textual app: renders a `Fleet`, never waits on a host.

How live data reaches the screen:
- The fleet's host sessions are asyncio tasks on the app's loop; they await their links (subprocess
  pipes, SSH channels), so no blocking call (NVML, /proc) ever runs on the UI loop: that happens in
  the probes.
- A fleet callback only records what changed (a set of host names) and, for a sample, when it
  arrived by the app's clock. A newer sample therefore simply replaces an older one that was not
  drawn yet: there is no queue to back up, whatever the number of hosts or their rate.
- The first change after a quiet spell is drawn at once; changes that come while the last redraw
  is less than `REDRAW_GAP` old wait for one timer, so there are at most 10 redraws a second however
  many hosts report, and a sample waits at most `REDRAW_GAP` for its redraw. Above 256 hosts the
  gap grows with the fleet (`redraw_gap`: 0.25 s at 512 hosts, 0.5 s from 1,024): every redraw
  walks the changed hosts and repaints the rows in view, and at a thousand hosts ten of them a
  second were a fifth of the app's work for numbers that change once a second anyway. A redraw draws the
  changed hosts into the visible widgets, in place, inside one `batch_update` (and the tables repaint
  only the rows that changed). A 1 s tick redraws the sample ages. While another screen (help, a
  dialog, the command palette) is on top, nothing is redrawn; the changes are drawn when it closes.

The kill flow (f, F, x): the screen posts `PlanRequested`; the app hands the requests to
gputui.kill.operate (the same headless owner `gputui clean` uses), which asks each host for a sample after a
full holder scan and builds one plan per host; the app shows them in `PlanScreen` and, once
confirmed, runs each plan in its own worker through `Operations.run`: the plan and its intents are in
the audit log before the probe is sent anything. The probe runs the stages; the app only renders the
events, live, in the action log pane, with a status line while it waits, and the typed verdict.
At start, actions that an earlier gputui began and never saw finish are reported, then acknowledged.

A terminal below MIN_SIZE (some report 0x0) gets one line that says so, on a screen of its own over
the others, and nothing is redrawn under it until the terminal grows (`guard_size`; the driver keeps
the size the terminal reported, gputui/ui/terminal.py).

Sample ages come from the `clock` given to `make_app` (time.time by default): the app stamps each
sample with clock() when it arrives and shows clock() - stamp. The probe's own `time` field is not
used, so a remote host's clock skew does not matter, and a frozen clock makes every age 0.0 s
(what the snapshot tests and screenshots use).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from textual import constants, events, work
from textual.app import App, AutopilotCallbackType
from textual.binding import Binding, BindingType
from textual.driver import Driver
from textual.notifications import SeverityLevel
from textual.timer import Timer

from gputui.fleet.fleet import Fleet
from gputui.fleet.idle import threshold
from gputui.fleet.pacing import Pacer
from gputui.fleet.session import HostView
from gputui.kill.auditlog import unfinished_headline
from gputui.kill.operate import FRESH_TIMEOUT, AnyRequest, Operations, Request, status_of
from gputui.kill.plan import KillOptions, Plan
from gputui.model import Event, PlanVerdict
from gputui.text.words import count, toast_title, verdict_summary
from gputui.views.report import write_files

from . import acyclic, fmt
from . import spinner as actions
from ._textual import app_driver, set_return_code
from .commands import GpuTuiCommands
from .messages import PlanRequested, ResetRequested
from .screens.gpu_detail import GpuDetailScreen
from .screens.help import HelpScreen
from .screens.main import MainScreen
from .screens.plan import PlanScreen
from .screens.reset import ResetScreen
from .screens.too_small import TooSmallScreen
from .terminal import LOST_STATUS, Lifeline, TerminalDriver
from .themes import DEFAULT_THEME, PREFIX, bundled_themes_dir, fallback_variables, load_themes

REDRAW_GAP = 0.1  # seconds between two redraws, at least: at most 10 a second, however many hosts report
REDRAW_GAP_HOSTS = 256  # above this many hosts the gap grows with the fleet (redraw_gap)
REDRAW_GAP_MAX = 0.5


def redraw_gap(hosts: int) -> float:
    """The least time between two redraws for a fleet of `hosts`."""
    if hosts <= REDRAW_GAP_HOSTS:
        return REDRAW_GAP
    return max(REDRAW_GAP, min(REDRAW_GAP_MAX, REDRAW_GAP * hosts / (REDRAW_GAP_HOSTS * 0.8)))


AGES_INTERVAL = 1.0  # seconds: sample ages move even when nothing arrives
PACE_TICK = 1.0  # seconds between two looks at whether the app keeps up (gputui/fleet/pacing.py)
PROGRESS_INTERVAL = 0.1  # the log pane's status line while a plan runs
APP_HOST = "gputui"  # the host column of the app's own log lines
QUIT_AGAIN_WITHIN = 3.0  # seconds: quitting while a plan runs takes a second press
PENDING_MAX = 2000  # log lines kept for the next redraw (a dialog may be open); the rest are counted

MIN_SIZE = (60, 15)  # columns, rows: below this the dashboard gives way to one line (TooSmallScreen)


class GpuTuiApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "gputui"
    COMMANDS = App.COMMANDS | {GpuTuiCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
        # People stop terminal tools with Ctrl-C (nvitop, htop, watch nvidia-smi): let it quit here too.
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    def __init__(
        self,
        fleet: Fleet,
        *,
        read_only: bool = False,
        interval: float = 1.0,
        theme: str | None = None,
        clock: Callable[[], float] = time.time,
        themes_dir: Path | None = None,
        log_path: str | Path | None = None,
        operator: str | None = None,
        kill: KillOptions | None = None,
        hidden_columns: Mapping[str, frozenset[str]] | None = None,
        export_dir: Path | None = None,
        lifeline: Lifeline | None = None,
        idle_after: float | None = None,
        pace: bool = False,
    ) -> None:
        """The app for `fleet` (not started yet: the app starts it on mount and stops it on exit).

        `interval`: seconds between samples that the probes are asked for (checked by the config and the
        command line, gputui.probe.wire's limits). `theme`: a theme
        name ("gputui-light" or just "light"); unknown names fall back to the default with a notification.
        `clock`: wall clock for sample ages (freeze it for reproducible screens). `themes_dir`: a
        directory of extra theme files, loaded after the bundled ones. `log_path`: the audit log (None:
        the user state dir, `gputui.kill.auditlog.default_log_path()`). `operator`: the name plans and the
        audit log carry (None: the local user). `kill`: the signals and timeouts of every plan (the
        config's [kill] table; None: the defaults). `hidden_columns`: the config's [columns] table, table
        name ("processes", "gpus", "fleet") -> column keys never shown. `export_dir`: where "Export
        snapshot" writes (None: the working directory). `lifeline`: what ends the app on SIGHUP,
        SIGTERM or a lost terminal (gputui/ui/terminal.py; the CLI installs one before the app runs).
        `pace`: slow the probes' samples down while the app cannot keep up with them (gputui/fleet/pacing.py;
        `gputui` does, unless `--no-pace`)."""
        acyclic.install()  # what Textual would leave as cyclic garbage each frame is freed at once (acyclic.py)
        super().__init__()
        # Seconds at 0 % SM that make a process holding GPU memory an idle holder (gputui/fleet/idle.py).
        self.idle_after = threshold(None) if idle_after is None else idle_after
        # SIGHUP, SIGTERM and a lost terminal end the app within a second (terminal.py); the CLI
        # installs it before anything starts. None (Pilot, a bench): nothing handled here.
        self.lifeline = lifeline
        self._drawn = False  # the first frame is drawn (Textual's Ready)
        self._mounted = False  # on_mount has run: the screens are there to guard the size with
        self._end_code: int | None = None  # the lifeline asked the app to exit with this status
        self._run_loop: asyncio.AbstractEventLoop | None = None
        self.exact_memory = False
        self.hidden_columns: Mapping[str, frozenset[str]] = dict(hidden_columns or {})
        self.export_dir = export_dir
        self.fleet = fleet
        self.read_only = read_only
        self.interval = interval
        # Pacing (gputui/fleet/pacing.py): the interval the probes are asked for while the app cannot keep
        # up at `interval` (None: as asked), checked once a second through the app's message queue
        # and the next frame, which is where a key waits too.
        self.pacer = Pacer(interval, len(fleet.hosts)) if pace else None
        self.paced: float | None = None
        self._pace_asked: float | None = None  # when the look now on its way was asked for
        self._pace_cpu = (0.0, 0.0)  # (loop time, process time) at the last pacing tick
        self.clock = clock
        self.requested_theme = theme
        self.themes_dir = themes_dir
        self.received: dict[str, float] = {}  # host -> clock() when its last sample arrived
        self._changed: set[str] = set()
        self._restyle = False
        self._pending_log: list[tuple[str, str, Any]] = []
        self._pending_dropped = 0
        self._last_ages = 0.0
        self._last_redraw = 0.0  # time.monotonic() at the start of the last redraw
        self._redraw_due = False  # a redraw is scheduled (at once, or by a timer)
        self._main: MainScreen | None = None
        self._gputui_themes: list[str] = []
        # The kill flow. The audit log file is opened at the first write (a plan, or acknowledging).
        self.ops = Operations.open(fleet, log_path, kill=kill, operator=operator)
        self.audit = self.ops.audit
        self.operator = self.ops.operator
        self.fresh_timeout = FRESH_TIMEOUT  # 0: plan on the latest sample, ask for no scan
        self.running: dict[str, actions.Progress] = {}  # plan id -> what it is doing
        self._progress_timer: Timer | None = None
        self._show_log_later = False
        self._quit_armed = False
        self.last_export: tuple[Path, Path] | None = None

    # -- life cycle --------------------------------------------------------------------------

    def get_default_screen(self) -> MainScreen:
        self._main = MainScreen()
        return self._main

    def on_mount(self) -> None:
        self._load_themes()
        self.theme_changed_signal.subscribe(self, self._on_theme_changed)
        self.fleet.listen(self._on_fleet)
        self.fleet.start()
        if any(view.interval != self.interval for view in self.fleet.hosts):
            self.run_worker(self.fleet.configure(self.interval), exit_on_error=False, group="configure")
        self.set_interval(AGES_INTERVAL, self.want_redraw)
        if self.pacer is not None and self.pacer.active:
            loop = asyncio.get_running_loop()
            self._pace_cpu = (loop.time(), time.process_time())
            loop.call_later(PACE_TICK, self._pace_post)
        self._progress_timer = self.set_interval(PROGRESS_INTERVAL, self._show_progress, pause=True)
        self.run_worker(self._report_unfinished(), group="startup", exit_on_error=False)
        self._mounted = True
        self.guard_size()  # before the first frame: a 0x0 terminal never gets the dashboard drawn

    def get_driver_class(self) -> type[Driver]:
        """Textual's Linux driver, made safe for a terminal that goes away (terminal.py)."""
        return super().get_driver_class() if constants.DRIVER is not None else TerminalDriver

    async def run_async(
        self,
        *,
        headless: bool = False,
        inline: bool = False,
        inline_no_clear: bool = False,
        mouse: bool = True,
        size: tuple[int, int] | None = None,
        auto_pilot: AutopilotCallbackType | None = None,
    ) -> None:
        """Textual's run, with the lifeline (when there is one) told how to end this app: from the
        first moment of the run, before the terminal is set up or a probe starts."""
        lifeline = self.lifeline
        loop = self._run_loop = asyncio.get_running_loop()
        if lifeline is not None:
            if not lifeline.attach(lambda code: loop.call_soon_threadsafe(self._end, code)):
                set_return_code(self, lifeline.code)  # a signal came first: start nothing
                return None
            lifeline.at_hard_exit(self._last_words)
        try:
            return await super().run_async(
                headless=headless,
                inline=inline,
                inline_no_clear=inline_no_clear,
                mouse=mouse,
                size=size,
                auto_pilot=auto_pilot,
            )
        except OSError:
            if lifeline is None or lifeline.reason is None:
                raise
            return None  # Textual's last words (an error it kept) cannot reach a terminal that is gone
        finally:
            if lifeline is not None:
                if lifeline.reason is not None:
                    set_return_code(self, lifeline.code)
                lifeline.detach()

    def _end(self, code: int) -> None:
        """The lifeline's way out: like `q`, without the second press a running plan asks for. Not
        before the first frame: an exit while the screens mount takes their widgets away under
        their own on_mount (then the hard exit comes first, which is as good)."""
        self._end_code = code
        if self._drawn:
            self.exit(return_code=code)

    def on_ready(self) -> None:
        self._drawn = True
        if self._end_code is not None:
            self.exit(return_code=self._end_code)

    # -- the terminal's size ---------------------------------------------------------------------

    def terminal_size(self, laid_out: tuple[int, int] | None = None) -> tuple[int, int]:
        """The terminal's size as it reports it (0x0 for some); the layout's where it says nothing
        more (Pilot, a terminal that cannot be asked)."""
        driver = app_driver(self)
        reported = driver.reported if isinstance(driver, TerminalDriver) else None
        if reported is not None:
            return reported
        return laid_out if laid_out is not None else (self.size.width, self.size.height)

    def guard_size(self, laid_out: tuple[int, int] | None = None) -> None:
        """Below MIN_SIZE, one line that says so in place of everything (the screen on top), and
        nothing redrawn until the terminal grows; then the screens as they were."""
        width, height = self.terminal_size(laid_out)
        small = width < MIN_SIZE[0] or height < MIN_SIZE[1]
        stack = self.screen_stack
        guard = next((s for s in stack if isinstance(s, TooSmallScreen)), None)
        if small and guard is None:
            self.push_screen(TooSmallScreen(MIN_SIZE, (width, height)))
        elif small and guard is not None:
            guard.show_size((width, height))
        elif guard is not None and stack[-1] is guard:
            # (A dialog that opened over it, a plan planned before the terminal shrank, goes first;
            # the line then checks again as it comes back on top.)
            self.pop_screen()

    def on_resize(self, event: events.Resize) -> None:
        if self._mounted:
            self.guard_size((event.size.width, event.size.height))

    def terminal_lost(self, why: str) -> None:
        """The driver's threads: the terminal went away (EOF, EIO, a hang-up)."""
        if self.lifeline is not None:
            self.lifeline.lost(why)
        elif self._run_loop is not None:  # no lifeline (not the CLI): exit all the same
            with contextlib.suppress(RuntimeError):
                self._run_loop.call_soon_threadsafe(self._end, LOST_STATUS)

    def _last_words(self) -> None:
        """Before a hard exit (another thread; the loop may be stuck): each running plan's outcome
        in the audit log, then the terminal restored if it is still there."""
        for plan in list(self.ops.running.values()):
            self._abandon(plan)
        driver = app_driver(self)
        if isinstance(driver, TerminalDriver):
            driver.restore_now()

    def _abandon(self, plan: Plan) -> None:
        """The app ends before `plan`'s verdict: an outcome-unknown `done` line says so (whole and
        fsync'd, as every line is; the next start still reports the plan as unfinished). One writer
        for the dashboard and `gputui clean`: Operations.abandon (once per plan, any thread)."""
        lifeline = self.lifeline
        why = lifeline.reason if lifeline is not None and lifeline.reason else "the operator quit"
        self.ops.abandon(plan.host, plan.id, why)

    async def on_unmount(self) -> None:
        await self.fleet.stop()
        self.audit.close()

    # -- themes ------------------------------------------------------------------------------

    def _load_themes(self) -> None:
        found = load_themes(bundled_themes_dir(), self.themes_dir)
        for theme in found.themes.values():
            self.register_theme(theme)
        self._gputui_themes = sorted(found.themes)
        for error in found.errors:
            self.notify(error, title="Theme file skipped", severity="warning", markup=False, timeout=10)
        name = found.resolve(self.requested_theme) if self.requested_theme else None
        default = found.resolve(DEFAULT_THEME) or "textual-dark"
        if self.requested_theme and name is None:
            if self.requested_theme in self.available_themes:
                name = self.requested_theme  # one of Textual's own
            else:
                self.notify(
                    f"Theme {self.requested_theme!r} is not available; using {default}.",
                    title="Theme",
                    severity="warning",
                    markup=False,
                    timeout=10,
                )
        self.theme = name or default

    def get_css_variables(self) -> dict[str, str]:
        variables = super().get_css_variables()
        self.theme_variables = {**fallback_variables(variables), **variables}
        return self.theme_variables

    def _on_theme_changed(self, _: object) -> None:
        self._restyle = True  # drawn by the next redraw, when the main screen is on top again
        self.want_redraw()

    def action_next_theme(self) -> None:
        names = self._gputui_themes or [self.theme]
        index = names.index(self.theme) + 1 if self.theme in names else 0
        self.theme = names[index % len(names)]
        self.notify(f"Theme: {self.theme.removeprefix(PREFIX)}", timeout=2)

    async def action_quit(self) -> None:
        """Quitting while a plan runs loses its verdict (the probe still finishes it): ask twice."""
        if self.running and not self._quit_armed:
            self._quit_armed = True
            self.set_timer(QUIT_AGAIN_WITHIN, self._disarm_quit)
            hosts = ", ".join(sorted({fmt.safe(p.host, 40) for p in self.running.values()}))
            self.notify(
                f"A plan is running on {hosts}: quitting now loses its verdict (the probe still "
                f"finishes it; the next start reports it). Quit again within {QUIT_AGAIN_WITHIN:g} s "
                "to quit anyway.",
                title="Plan running",
                severity="warning",
                markup=False,
            )
            return
        await super().action_quit()

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every notification, the app's own and the screens', goes out as plain text made
        printable: a toast can carry a host's words (a verdict, an error), never its escapes."""
        super().notify(
            fmt.safe(message, 2000),
            title=fmt.safe(title, 200),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    def _disarm_quit(self) -> None:
        self._quit_armed = False

    # -- fleet -> screen ---------------------------------------------------------------------

    def _on_fleet(self, view: HostView, what: str, payload: Any) -> None:
        """Runs on the event loop after every fleet change: record it, draw nothing."""
        if what == "sample":
            self.received[view.name] = self.clock()
            main = self._main
            if not view.news and main is not None and not main.shows_in_full(view.name):
                return  # nothing the fleet's views draw has changed (gputui/fleet/news.py)
        elif what == "event" and isinstance(payload, Event) and payload.plan in self.running:
            self.running[payload.plan].heard = True  # its own worker renders it, as it comes
        elif what in ("event", "error"):
            self._queue_log((view.name, what, payload))
        self._changed.add(view.name)
        self.want_redraw()

    def _queue_log(self, item: tuple[str, str, Any]) -> None:
        """Keep a log line for the next redraw; past PENDING_MAX (a flood while a dialog is open),
        count it instead: the log says how many were dropped."""
        if len(self._pending_log) < PENDING_MAX:
            self._pending_log.append(item)
        else:
            self._pending_dropped += 1

    def age_of(self, host: str) -> float | None:
        received = self.received.get(host)
        return max(0.0, self.clock() - received) if received is not None else None

    def want_redraw(self) -> None:
        """Schedule a redraw: now if the last one is REDRAW_GAP old, else when it is (one pending)."""
        if self._redraw_due:
            return
        self._redraw_due = True
        wait = self._last_redraw + redraw_gap(len(self.fleet.hosts)) - time.monotonic()
        if wait > 0:
            # asyncio's timer, not Textual's: a one-shot Textual timer whose delay has passed by the
            # time its task starts is skipped, never fired (Timer's skip), and no redraw would come.
            asyncio.get_running_loop().call_later(wait, self.call_later, self._redraw)
        else:
            self.call_later(self._redraw)

    def _redraw(self) -> None:
        self._redraw_due = False
        self._last_redraw = time.monotonic()
        main = self._main
        if not self.is_running:
            return  # shutting down: the widgets are being taken down, with their styles
        if main is None or self.screen is not main or not main.is_mounted:
            return  # a modal is open: keep collecting, draw when it closes
        changed, self._changed = self._changed, set()
        restyle, self._restyle = self._restyle, False
        now = time.monotonic()
        ages = now - self._last_ages >= 0.9 * AGES_INTERVAL  # the tick may come a little early
        if ages:
            self._last_ages = now
        if restyle:
            main.restyle()
        elif changed or ages:
            main.refresh_data(changed, ages=ages)
        if self._show_log_later:
            self._show_log_later = False
            main.show_log()
        log, self._pending_log = self._pending_log, []
        if self._pending_dropped:
            dropped, self._pending_dropped = self._pending_dropped, 0
            main.action_log.note(
                APP_HOST, f"{count(dropped, 'log line')} dropped while the screen was busy", "warn"
            )
        for host, what, payload in log:
            if what == "event" and isinstance(payload, Event):
                main.action_log.add_event(host, payload)
            elif what == "note":
                text, level, tag = payload
                main.action_log.note(host, text, level, tag=tag)
            elif isinstance(payload, dict):
                text = f"probe error {payload.get('code')}: {payload.get('message')}"
                main.action_log.note(host, text, "error")

    # -- the kill flow: request -> plan -> confirmation -> staged kill ------------------------

    def on_plan_requested(self, message: PlanRequested) -> None:
        self.request_plans(message.requests)

    def request_plans(self, requests: Sequence[AnyRequest]) -> None:
        """Plan what the operator asked for (one plan per host) and open the confirmation dialog."""
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
            self._plan_and_confirm(usable)

    @work(exclusive=True, group="planning", exit_on_error=False)
    async def _plan_and_confirm(self, requests: list[AnyRequest]) -> None:
        try:
            await self._plan_and_confirm_now(requests)
        except Exception as exc:  # a bug must say so, not vanish with its worker
            self.notify(
                f"{type(exc).__name__}: {exc}", title="Planning failed", severity="error", markup=False
            )
            raise

    async def _plan_and_confirm_now(self, requests: list[AnyRequest]) -> None:
        planned = await self.ops.plan(requests, self.fresh_timeout)
        for problem in planned.problems:
            self.notify(problem, title="Cannot plan", severity="warning", markup=False)
        if not planned.plans:
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
                    self._main.selection.discard(request.host, (p.key for p in request.processes))
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
        self._ended(plan, verdict, verdict_summary(verdict))
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

    # -- the reset ladder: request -> dry run -> confirmation -> reset -------------------------

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

    # -- the log pane ------------------------------------------------------------------------

    def show_log(self) -> None:
        main = self._main
        if main is not None and main.is_mounted:
            main.show_log()
        else:
            self._show_log_later = True
            self.want_redraw()

    # -- pacing ----------------------------------------------------------------------------

    def _pace_post(self) -> None:
        """Once a second on the event loop's clock: a look at whether the app keeps up. The look
        runs once the messages before it are handled and the screen is drawn, as a key is seen
        (behind the message queue alone it ran on time while frames waited for seconds); one
        that has not run by the next second counts as behind by then, so a starved screen that
        never gets to it still paces."""
        if not self.is_running:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        loop.call_later(PACE_TICK, self._pace_post)
        if self._pace_asked is not None:
            self._pace_tick(now - self._pace_asked)  # the last look has not run yet
            return
        self._pace_asked = now
        self.call_after_refresh(self._pace_looked, now)

    def _pace_looked(self, asked: float) -> None:
        self._pace_asked = None
        if self.is_running:
            self._pace_tick(asyncio.get_running_loop().time() - asked)

    def _pace_tick(self, lateness: float) -> None:
        pacer = self.pacer
        if pacer is None:
            return
        now, cpu = asyncio.get_running_loop().time(), time.process_time()
        (then, cpu_then), self._pace_cpu = self._pace_cpu, (now, cpu)
        busy = (cpu - cpu_then) / max(now - then, 1e-3)
        change = pacer.tick(lateness, busy)
        if change is None:
            return
        self.paced = change.interval if pacer.paced else None
        self.run_worker(self.fleet.configure(change.interval), exit_on_error=False, group="configure")
        every = f"{change.interval:g} s"
        if pacer.paced:
            text = f"samples every {every}, not {pacer.asked:g} s: {change.why} (--no-pace: keep the rate)"
            self.log_note(APP_HOST, text, "warn", tag="pace")
        else:
            self.log_note(APP_HOST, f"samples every {every} again: {change.why}", "info", tag="pace")

    def log_note(self, host: str, text: str, level: str = "info", tag: str = "") -> None:
        main = self._main
        if main is not None and main.is_mounted:
            main.action_log.note(host, text, level, tag=tag)
        else:
            self._queue_log((host, "note", (text, level, tag)))
            self.want_redraw()

    def log_event(self, host: str, event: Event) -> None:
        main = self._main
        if main is not None and main.is_mounted:
            main.action_log.add_event(host, event)
        else:
            self._queue_log((host, "event", event))
            self.want_redraw()

    # -- memory units, export --------------------------------------------------------------

    def action_toggle_mib(self) -> None:
        """Memory in exact MiB, or GiB again: the main screen's tables and the GPU view."""
        self.exact_memory = not self.exact_memory
        if self._main is not None and self._main.is_mounted:
            self._main.memory_units_changed()
        if isinstance(self.screen, GpuDetailScreen):
            self.screen.redraw()

    def action_export(self) -> None:
        """The fleet as the main screen shows it (frozen while paused), as `gputui snapshot` writes
        it: JSON and text files in the export directory (the working directory by default)."""
        views = self._main.views() if self._main is not None else self.fleet.hosts
        directory = self.export_dir if self.export_dir is not None else Path.cwd()
        try:
            json_path, text_path = write_files(views, directory, self.clock(), self.idle_after)
        except OSError as exc:
            self.notify(
                f"Cannot write the snapshot in {directory}: {exc.strerror or exc}",
                title="Export",
                severity="error",
                markup=False,
            )
            return
        self.last_export = (json_path, text_path)
        self.log_note(APP_HOST, f"snapshot exported: {json_path} and {text_path}")
        # One line: notify makes the text printable, so a line break would show as `\n`.
        self.notify(f"{json_path} and {text_path}", title="Snapshot exported", timeout=8, markup=False)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(read_only=self.read_only))

    async def _report_unfinished(self) -> None:
        """Actions an earlier gputui started and never saw finish (it died mid-action, or ended before
        the verdict and recorded the outcome as unknown): said once, as the log says it."""
        report = await self.ops.report_unfinished(refuse_unsafe=False)
        if report.read_problem is not None:  # `cannot read the audit log PATH: ...` as a sentence
            problem = report.read_problem
            self.notify(problem[:1].upper() + problem[1:], severity="warning", markup=False)
        lost = report.actions
        if not lost:
            return
        for action in lost:
            self.log_note(action.host or "?", f"UNFINISHED {action.describe()}", "error", tag=action.action)
        self.log_note(APP_HOST, f"check those processes and GPUs; details in {self.audit.path}", "warn")
        self.show_log()
        self.notify(
            f"{unfinished_headline(lost)} Check those processes and GPUs: see the action log (l).",
            title="Unfinished actions",
            severity="error",
            timeout=30,
            markup=False,
        )
        if report.write_problem is not None:
            problem = report.write_problem
            self.notify(problem[:1].upper() + problem[1:], severity="error", markup=False)

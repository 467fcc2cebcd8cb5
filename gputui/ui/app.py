"""The gputui Textual app: renders a `Fleet`, never waits on a host.

The app's parts, each a class of its own module that GpuTuiApp builds on: the fleet's changes
recorded and redrawn (intake.py), the kill and reset flows (killflow.py), the pacing of the
probes' samples (pace.py); the themes (themes.py) and the terminal (terminal.py) beside them.

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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from textual import constants, events
from textual.app import App
from textual.binding import Binding, BindingType
from textual.driver import Driver
from textual.notifications import SeverityLevel

from gputui.config.file import default_export_dir
from gputui.config.file import idle_threshold as threshold
from gputui.fleet.fleet import Fleet
from gputui.kill.auditlog import unfinished_headline
from gputui.kill.plan import KillOptions
from gputui.views.report import write_files

from . import acyclic, fmt
from ._textual import app_driver, set_return_code
from .commands import GpuTuiCommands
from .intake import AGES_INTERVAL, APP_HOST, LogLine
from .killflow import KillFlow
from .pace import PACE_TICK, Pacing
from .screens.gpu_detail import GpuDetailScreen
from .screens.help import HelpScreen
from .screens.main import MainScreen
from .screens.too_small import TooSmallScreen
from .terminal import LOST_STATUS, Lifeline, TerminalDriver
from .themes import DEFAULT_THEME, PREFIX, bundled_themes_dir, fallback_variables, load_themes

PROGRESS_INTERVAL = 0.1  # the log pane's status line while a plan runs
QUIT_AGAIN_WITHIN = 3.0  # seconds: quitting while a plan runs takes a second press

MIN_SIZE = (60, 15)  # columns, rows: below this the dashboard gives way to one line (TooSmallScreen)


class GpuTuiApp(KillFlow, Pacing):
    CSS_PATH = "app.tcss"
    TITLE = "gputui"
    COMMANDS = App.COMMANDS | {GpuTuiCommands}
    # What a kill key says where the app is read-only (a replay says its own).
    read_only_why = "gputui runs read-only (--read-only, or read_only in the config): it signals nothing."
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
        start_filter: str = "",
        ascii_only: bool = False,
        over_ssh: Mapping[str, Callable[[], str]] | None = None,
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
        snapshot" writes (None: the user's state dir). `lifeline`: what ends the app on SIGHUP,
        SIGTERM or a lost terminal (gputui/ui/terminal.py; the CLI installs one before the app runs).
        `pace`: slow the probes' samples down while the app cannot keep up with them (gputui/fleet/pacing.py;
        `gputui` does, unless `--no-pace`). `start_filter`: the filter the fleet and process tables
        start with, in the filter language (`gputui --user alice`: "user:alice"), shown and cleared
        as one typed in the filter box. `ascii_only`: every glyph written as ASCII (`--ascii`;
        gputui/text/glyphs.py). `over_ssh`: a host read without a probe (from Prometheus) -> what
        opens the same host over SSH, for `enter` on it (gputui/ui/oversh.py)."""
        acyclic.install()  # what Textual would leave as cyclic garbage each frame is freed at once (acyclic.py)
        super().__init__()
        # Seconds at 0 % SM that make a process holding GPU memory an idle holder (gputui/fleet/idle.py).
        self.idle_after = threshold(None) if idle_after is None else idle_after
        self.start_filter = start_filter
        self.ascii_only = ascii_only  # read by the terminal driver (terminal.py)
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
        self.over_ssh: Mapping[str, Callable[[], str]] = dict(over_ssh or {})
        self.interval = interval
        self._init_pacing(interval, len(fleet.hosts), pace)
        self.clock = clock
        self.requested_theme = theme
        self.themes_dir = themes_dir
        self.received: dict[str, float] = {}  # host -> clock() when its last sample arrived
        self._changed: set[str] = set()
        self._restyle = False
        self._pending_log: list[LogLine] = []
        self._pending_dropped = 0
        self._last_ages = 0.0
        self._last_redraw = 0.0  # time.monotonic() at the start of the last redraw
        self._redraw_due = False  # a redraw is scheduled (at once, or by a timer)
        self._main: MainScreen | None = None
        self._gputui_themes: list[str] = []
        self._init_kill_flow(fleet, log_path, kill, operator)
        self._show_log_later = False
        self._quit_armed = False
        self.last_export: tuple[Path, Path] | None = None

    # -- life cycle --------------------------------------------------------------------------

    def get_default_screen(self) -> MainScreen:
        self._main = MainScreen(self.start_filter)
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

    async def run_async(self, **options: Any) -> None:
        """Textual's run (its options as they are), with the lifeline (when there is one) told how to
        end this app: from the first moment of the run, before the terminal is set up or a probe
        starts."""
        lifeline = self.lifeline
        loop = self._run_loop = asyncio.get_running_loop()
        if lifeline is not None:
            if not lifeline.attach(lambda code: loop.call_soon_threadsafe(self._end, code)):
                set_return_code(self, lifeline.code)  # a signal came first: start nothing
                return None
            lifeline.at_hard_exit(self._last_words)
        try:
            return await super().run_async(**options)
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
        it: JSON and text files in the export directory (the user's state dir by default), named by
        their full paths in the log and the notification."""
        views = self._main.views() if self._main is not None else self.fleet.hosts
        directory = (self.export_dir if self.export_dir is not None else default_export_dir()).absolute()
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

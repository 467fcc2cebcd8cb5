"""The gputui Textual app: renders a `Fleet`, never waits on a host.

How live data reaches the screen:
- The fleet's host sessions are asyncio tasks on the app's loop; they await their links (subprocess
  pipes, SSH channels), so no blocking call (NVML, /proc) ever runs on the UI loop: that happens in
  the probes.
- A fleet callback only records what changed (a set of host names) and, for a sample, when it
  arrived by the app's clock. A newer sample therefore simply replaces an older one that was not
  drawn yet: there is no queue to back up, whatever the number of hosts or their rate.
- A timer (`REDRAW_INTERVAL`) draws the changed hosts into the visible widgets, in place, inside one
  `batch_update`. While another screen (help, a dialog, the command palette) is on top, nothing is
  redrawn; the changes are drawn when it closes.

Sample ages come from the `clock` given to `make_app` (time.time by default): the app stamps each
sample with clock() when it arrives and shows clock() - stamp. The probe's own `time` field is not
used, so a remote host's clock skew does not matter, and a frozen clock makes every age 0.0 s
(what the snapshot tests and screenshots use).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from gputui.fleet import Fleet, HostView
from gputui.model import Event

from .intents import PlanRequest, PlanRequested
from .screens.main import MainScreen
from .themes import DEFAULT_THEME, PREFIX, bundled_themes_dir, fallback_variables, load_themes

REDRAW_INTERVAL = 0.2  # seconds: at most 5 redraws a second, however many hosts report
MIN_INTERVAL = 0.1  # the fastest sample interval the app asks for


class GpuTuiApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "gputui"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
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
    ) -> None:
        super().__init__()
        self.fleet = fleet
        self.read_only = read_only
        self.interval = interval
        self.clock = clock
        self.requested_theme = theme
        self.themes_dir = themes_dir
        self.received: dict[str, float] = {}  # host -> clock() when its last sample arrived
        self._changed: set[str] = set()
        self._restyle = False
        self._pending_log: list[tuple[str, str, Any]] = []
        self._last_ages = 0.0
        self._main: MainScreen | None = None
        self._gputui_themes: list[str] = []

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
        self.set_interval(REDRAW_INTERVAL, self._redraw)

    async def on_unmount(self) -> None:
        await self.fleet.stop()

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

    def action_next_theme(self) -> None:
        names = self._gputui_themes or [self.theme]
        index = names.index(self.theme) + 1 if self.theme in names else 0
        self.theme = names[index % len(names)]
        self.notify(f"Theme: {self.theme.removeprefix(PREFIX)}", timeout=2)

    # -- fleet -> screen ---------------------------------------------------------------------

    def _on_fleet(self, view: HostView, what: str, payload: Any) -> None:
        """Runs on the event loop after every fleet change: record it, draw nothing."""
        if what == "sample":
            self.received[view.name] = self.clock()
        elif what in ("event", "error"):
            self._pending_log.append((view.name, what, payload))
        self._changed.add(view.name)

    def age_of(self, host: str) -> float | None:
        received = self.received.get(host)
        return max(0.0, self.clock() - received) if received is not None else None

    def _redraw(self) -> None:
        main = self._main
        if main is None or self.screen is not main or not main.is_mounted:
            return  # a modal is open: keep collecting, draw when it closes
        changed, self._changed = self._changed, set()
        restyle, self._restyle = self._restyle, False
        now = time.monotonic()
        ages = now - self._last_ages >= 1.0
        if ages:
            self._last_ages = now
        if restyle:
            main.restyle()
        elif changed or ages:
            main.refresh_data(changed, ages=ages)
        log, self._pending_log = self._pending_log, []
        for host, what, payload in log:
            if what == "event" and isinstance(payload, Event):
                main.action_log.add_event(host, payload)
            elif isinstance(payload, dict):
                text = f"probe error {payload.get('code')}: {payload.get('message')}"
                main.action_log.note(host, text, "error")

    # -- hooks for the kill flow (issue 4) ---------------------------------------------------

    def on_plan_requested(self, message: PlanRequested) -> None:
        self.request_plan(message.request)

    def request_plan(self, request: PlanRequest) -> None:
        """Turn an operator's request into a plan, a confirmation and a staged kill (issue 4)."""
        self.notify("Freeing GPUs is not available in this build yet.", severity="warning")


def make_app(
    fleet: Fleet,
    *,
    read_only: bool = False,
    interval: float = 1.0,
    theme: str | None = None,
    clock: Callable[[], float] = time.time,
    themes_dir: Path | None = None,
) -> GpuTuiApp:
    """The app for `fleet` (not started yet: the app starts it on mount and stops it on exit).

    `interval`: seconds between samples that the probes are asked for (>= 0.1). `theme`: a theme
    name ("gputui-light" or just "light"); unknown names fall back to the default with a notification.
    `clock`: wall clock for sample ages (freeze it for reproducible screens). `themes_dir`: a
    directory of extra theme files, loaded after the bundled ones."""
    if interval < MIN_INTERVAL:
        raise ValueError(f"interval must be at least {MIN_INTERVAL} s, not {interval}")
    return GpuTuiApp(
        fleet, read_only=read_only, interval=interval, theme=theme, clock=clock, themes_dir=themes_dir
    )

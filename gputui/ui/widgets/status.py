"""One-line widgets: the status line (selected host or fleet), the kinds legend, the host notice."""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from gputui.fleet.history import HostReadings
from gputui.fleet.session import CONNECTING, DOWN, LIVE, REASONS, STALE, HostView
from gputui.text.words import count, host_metrics_parts

from .. import fmt, kinds
from .cells import Cell, fit_end
from .host_list import DOTS, busy_total, not_live, seen


class StyledStatic(Static):
    """A Static whose text is built in Python from component-class styles (so .tcss decides them),
    and that skips the redraw when a refresh produces the same text."""

    COMPONENT_CLASSES: ClassVar[set[str]] = set()
    # Whether new text may change the widget's size. A layout pass arranges and repaints the whole
    # screen; a one-line widget of a fixed size needs only its own line repainted.
    SIZED_BY_TEXT: ClassVar[bool] = True

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self._last: tuple[object, ...] | None = None
        self._text = Text()

    def style_of(self, name: str) -> Style:
        return self.get_component_rich_style(name, partial=True)

    def set_text(self, text: Text) -> None:
        signature = (text.plain, tuple(text.spans))
        if signature != self._last:
            self._last = signature
            self._text = text
            self.update(self._shown(text), layout=self.SIZED_BY_TEXT)

    def _shown(self, text: Text) -> Text:
        return text


class OneLine(StyledStatic):
    """A one-line StyledStatic cut at its end when the terminal is narrow, with an ellipsis, never
    inside a number (widgets.table.fit_end). As wide as its pane and one line high, whatever it says:
    updating it repaints that line only (the status line changes with every sample)."""

    DEFAULT_CSS = """
    OneLine {
        width: 1fr;
        height: 1;
    }
    """
    SIZED_BY_TEXT: ClassVar[bool] = False

    def _shown(self, text: Text) -> Text:
        return fit_end(Cell.numbers(text), self.size.width) if self.size.width > 0 else text

    def on_resize(self) -> None:
        if self._last is not None:
            self.update(self._shown(self._text), layout=False)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.1f}s" if seconds < 10 else fmt.age(seconds)


class StatusLine(OneLine):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "status--name",
        "status--muted",
        "status--badge",
        "status--warn",
        "status--metrics",
        "host--live",
        "host--stale",
        "host--down",
        "host--connecting",
    }

    def _paused(self, text: Text, paused: float | None) -> None:
        """The PAUSED badge and for how long (the view is frozen: `z` again resumes)."""
        if paused is not None:
            text.append(
                f" PAUSED {fmt.age(paused) if paused >= 1 else '0s'} ", self.style_of("status--badge")
            )

    def show_host(
        self,
        view: HostView,
        age: float | None,
        read_only: bool,
        *,
        paused: float | None = None,
        exact: bool = False,
        paced: float | None = None,
    ) -> None:
        """`paused`: seconds the view has been frozen (None: live); `exact`: memory in MiB;
        `paced`: the interval the app slowed the samples to (None: as asked)."""
        muted = self.style_of("status--muted")
        shown = view.shown_status  # a host that went down is down while it tries again
        status_style = self.style_of(f"host--{shown}")
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f" {DOTS.get(shown, '?')} ", status_style)
        text.append(fmt.safe(view.name, 60), self.style_of("status--name"))
        text.append("  ")
        facts = view.facts
        # First, so a narrow terminal never cuts it off.
        if read_only or view.read_only or (facts is not None and facts.read_only):
            text.append(" READ-ONLY ", self.style_of("status--badge"))
            text.append("  ")
        if paused is not None:
            self._paused(text, paused)
            text.append("  ")
        live = view.status == LIVE
        self._host_state(text, view, age, paced)
        self._host_facts(text, view, live)
        # The host's own load last: what is wrong (no driver), what its GPUs are and how many are
        # free come first, and a narrow terminal cuts the end of the line (the fleet table has CPU
        # and RAM columns too).
        metrics = view.sample.host if view.sample is not None else None
        parts = host_metrics_parts(metrics, exact) if metrics is not None else []
        if parts:
            text.append("  ·  ", muted)
            text.append(" · ".join(parts), self.style_of("status--metrics") if live else muted)
        self.set_text(text)

    def _host_state(self, text: Text, view: HostView, age: float | None, paced: float | None) -> None:
        """Live and how old its sample is; connecting, down or stale, and why."""
        muted = self.style_of("status--muted")
        shown = view.shown_status
        status_style = self.style_of(f"host--{shown}")
        # What is shown below is this old when the host is not live: dimmed there, said here, before
        # the details a narrow terminal cuts.
        old = f", {seen(age)}" if view.status != LIVE and view.sample is not None else ""
        if view.status == LIVE:
            text.append("live", status_style)
            text.append(f", sample {_age(age)} old", muted)
            if paced is not None:
                text.append(f", samples every {paced:g} s (paced)", self.style_of("status--warn"))
        elif view.status == CONNECTING:
            # Queued for a handshake slot, or backing off after the server dropped one (dial.py).
            if shown == DOWN:
                why = view.down_why
                text.append(f"down: {why}" if why else "down", status_style)
                text.append(f", trying again: {view.phase or 'connecting'}…", muted)
            else:
                text.append(f"{view.phase or 'connecting'}…", status_style)
            if view.phase_detail:
                text.append(f" ({fmt.safe(view.phase_detail, 120)})", muted)
            text.append(old, self.style_of("status--warn"))
        else:
            why = REASONS.get(view.reason or "", view.reason or "")
            text.append(f"{view.status}: {why}" if why else view.status, status_style)
            text.append(old, self.style_of("status--warn"))
            if view.detail:
                text.append(f" ({fmt.safe(view.detail, 120)})", muted)
            if view.status == DOWN:
                text.append(", retrying", muted)

    def _host_facts(self, text: Text, view: HostView, live: bool) -> None:
        """What is wrong with its driver, or the driver, CUDA, its GPUs and how many are free."""
        facts = view.facts
        if facts is not None and facts.error_code:
            text.append("  ")
            text.append(
                REASONS.get(facts.error_code, fmt.safe(facts.error_code)), self.style_of("status--warn")
            )
        elif facts is not None:
            parts = [f"driver {fmt.safe(facts.driver_version)}" if facts.driver_version else "driver ?"]
            if facts.cuda_driver_version:
                major, minor = divmod(facts.cuda_driver_version // 10, 100)
                parts.append(f"CUDA {major}.{minor}")
            sample = view.sample
            if sample is not None and sample.gpus:
                busy, total = busy_total(view)
                names = {g.name for g in sample.gpus if g.name}
                model = f" {fmt.safe(names.pop(), 40)}" if len(names) == 1 else ""
                # How many are free only while live: a down host's free GPUs may not be now.
                parts.append(f"{len(sample.gpus)}×{model}" + (f", {total - busy} free" if live else ""))
            if sample is not None and sample.scan_age is not None:
                parts.append(f"holders ≤{sample.scan_age:.0f}s old")
            if facts.reader == "sim":
                parts.append("simulated")
            text.append("  ·  " + "  ·  ".join(parts), self.style_of("status--muted"))

    def show_fleet(
        self,
        views: list[HostView],
        busy: dict[str, tuple[int, int]],
        read_only: bool,
        *,
        paused: float | None = None,
        paced: float | None = None,
    ) -> None:
        """`paced`: the interval the app slowed the samples to, as it could not keep up (None: as
        asked; gputui/fleet/pacing.py)."""
        muted = self.style_of("status--muted")
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" All hosts", self.style_of("status--name"))
        if read_only:
            text.append("  ")
            text.append(" READ-ONLY ", self.style_of("status--badge"))
        if paused is not None:
            text.append("  ")
            self._paused(text, paused)
        text.append(f"  {count(len(views), 'host')}: ", muted)
        shown = Counter(v.shown_status for v in views)  # one pass: thousands of hosts, once a second
        counts = {s: shown[s] for s in (LIVE, STALE, DOWN, CONNECTING)}
        first = True
        for status, n in counts.items():
            if n:
                text.append("" if first else ", ", muted)
                text.append(f"{DOTS[status]} {n} {status}", self.style_of(f"host--{status}"))
                first = False
        used = sum(busy.get(v.name, (0, 0))[0] for v in views)
        total = sum(busy.get(v.name, (0, 0))[1] for v in views)
        unknown = sum(not_live(v) for v in views)
        text.append(f"  ·  {count(total + unknown, 'GPU')}: {total - used} free, {used} busy", muted)
        if unknown:  # their hosts are not live: their last samples count for nothing now
            text.append(f", {unknown} not live", self.style_of("status--warn"))
        if paced is not None:
            text.append(f"  ·  samples every {paced:g} s (paced)", self.style_of("status--warn"))
        self.set_text(text)


LOAD_CELLS = 12  # samples of the host's CPU and RAM the legend line draws, one a cell


class Legend(OneLine):
    """The kinds' legend; with a host in view, its CPU and RAM over the last LOAD_CELLS samples
    first (`CPU ▂▃▅▇ 38%  RAM ▅▅▅▆ 61%`), so the main screen shows the host's load over time at
    80x24 (the legend gives way at the end of the line: `?` says what the kinds mean)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *kinds.STYLE.values(),
        "gpu--free",
        "status--muted",
        "meter--util",
        "meter--memory",
    }

    _load: HostReadings | None = None

    def on_mount(self) -> None:
        self.redraw()

    def show_load(self, load: HostReadings | None) -> None:
        """The host's CPU and RAM history (None: the fleet is in view, or nothing known)."""
        self._load = load
        self.redraw()

    def _load_parts(self, text: Text) -> None:
        load = self._load
        if load is None or not load.count:
            return
        muted = self.style_of("status--muted")
        for name, values, style in (("CPU", load.cpu, "meter--util"), ("RAM", load.memory, "meter--memory")):
            now = values[-1] if values else None
            if now is None:
                continue
            text.append(f"{name} ", muted)
            line = fmt.sparkline([v or 0.0 for v in values], LOAD_CELLS, LOAD_CELLS)
            text.append(line, self.style_of(style))
            text.append(f" {now:.0f}%  ", muted)
        text.append("  ")

    def redraw(self) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" ")
        self._load_parts(text)
        for kind, style in kinds.STYLE.items():
            text.append(kinds.label(kind), self.style_of(style))
            text.append("  ")
        text.append("✓ free GPU", self.style_of("gpu--free"))
        text.append("   ? keys and what the kinds mean", self.style_of("status--muted"))
        self.set_text(text)


class HostNotice(StyledStatic):
    """Why a host shows no GPUs: no driver (and how to see the demo), down, connecting."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"status--name", "status--muted", "status--warn"}

    def show_host(self, view: HostView) -> bool:
        """Fill in the notice for `view`; False when there is nothing to say (hide it)."""
        facts = view.facts
        text = Text()
        warn, muted = self.style_of("status--warn"), self.style_of("status--muted")
        if facts is not None and facts.error_code == "no-driver":
            text.append(f"{fmt.safe(view.name, 60)} has no NVIDIA driver", warn)
            if facts.error_message:
                text.append(f" ({fmt.safe(facts.error_message, 200)})", muted)
            text.append(".\nProcesses that hold /dev/nvidia* files are still listed below.\n")
            text.append("To see what gputui shows on a GPU cluster, run ")
            text.append("gputui --demo", self.style_of("status--name"))
            text.append(" (a simulated cluster).")
        elif facts is not None and facts.error_code:
            why = REASONS.get(facts.error_code, facts.error_code)
            text.append(f"{fmt.safe(view.name, 60)}: {why}", warn)
            if facts.error_message:
                text.append(f" ({fmt.safe(facts.error_message, 200)})", muted)
            text.append(".\nProcesses that hold /dev/nvidia* files are still listed below.")
        elif view.sample is None and view.shown_status == DOWN:
            text.append(f"{fmt.safe(view.name, 60)} is down: {view.down_why or 'down'}", warn)
            if view.shown_detail:
                text.append(f"\n{fmt.safe(view.shown_detail, 300)}", muted)
            # Between two attempts ("connecting"): say that this one is under way.
            now = f": trying again now ({view.phase or 'connecting'})" if view.status == CONNECTING else ""
            text.append(f"\ngputui keeps retrying in the background{now}.", muted)
        elif view.sample is None:
            text.append(f"Connecting to {fmt.safe(view.name, 60)}…", muted)
        else:
            return False
        self.set_text(text)
        return True

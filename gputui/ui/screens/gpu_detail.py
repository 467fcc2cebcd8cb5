"""The GPU view (`i` on a GPU): where its memory went, its state now, its settings and health, its
history in graphs as wide as the screen, and what runs on it.

Memory is one bar split the way the probe accounts for it (gputui/probe/accounting.py): idle
baseline, listed processes, then whatever is unaccounted for (a ghost's, a container's, hidden
holders', orphaned) and the free rest, with a legend and the same words `gputui wait` and a clean's
verdict use. The preflight reading (read every ~10 s) gives clocks, power limit, PCIe, ECC, MIG,
persistence and throttle reasons; a field where this GPU differs from most of its siblings is
flagged. A GPU in MIG mode lists its instances as the GPU table's rows under it say them, and its
processes their instance (`0:1.0`, the process table's GPU column); MPS parts read as in the process
table's Kind column. `[` and `]` step through the host's GPUs; `r` offers the reset ladder when memory is
orphaned (the app asks for a dry run, shows what blocks it, and confirms before anything).

The screen reads the fleet's state on a timer and never waits on a host. Everything from the host
is untrusted: made safe (fmt.safe) and built into `Text`, never parsed as markup.
"""

from __future__ import annotations

from typing import ClassVar, cast

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen

from gputui.fleet.session import GpuHistory, HostView
from gputui.model import IDLE_SLACK, Gpu, GpuShare, Preflight, Sample
from gputui.text.units import fmt_memory, fmt_memory_of, fmt_percent
from gputui.text.words import count, mig_profile, part_words
from gputui.views.readiness import preflight_flags

from .. import fmt, kinds
from ..context import Dashboard
from ..messages import ResetRequested
from ..panels.kill import not_relayed
from ..widgets.borders import set_title
from ..widgets.chart import Scale, chart, nice_top, time_lines
from ..widgets.footer import Footer
from ..widgets.gpu_table import instance_holders, memory_cell
from ..widgets.proc_table import gpus_cell
from ..widgets.status import StyledStatic

REFRESH_S = 0.25  # how often the screen looks for a new sample of its host
LABEL = 9  # cells of the graphs' labels
GUTTER = 4  # cells of the graphs' scale labels (`100%`, `700W`)
WIDE = 110  # columns: from this width "now" and "settings" sit side by side
PART_STYLE = {
    "baseline": "gpu-view--baseline",
    "processes": "kind--user",
    "ghost": "kind--ghost",
    "container": "gpu-view--container",
    "unreported": "gpu-view--container",
    "hidden": "kind--hidden",
    "orphaned": "gpu-view--orphaned",
    # Seen from inside a container: another guest's or the host's, as a PID namespace of its own is.
    "outside": "gpu-view--container",
    "unknown": "gpu--warn",
}
PART_LABEL = {
    "baseline": "idle baseline",
    "processes": "processes",
    "ghost": "dead PIDs' (ghost)",
    "container": "another PID namespace",
    "unreported": "unreported",
    "hidden": "hidden holders'",
    "orphaned": "orphaned",
    "outside": "outside this container",
    "unknown": "unattributed",
}


class GpuText(StyledStatic):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *kinds.STYLE.values(),
        *PART_STYLE.values(),
        "gpu-view--label",
        "gpu-view--muted",
        "gpu-view--free",
        "gpu-view--section",
        "meter--memory",
        "meter--util",
        "meter--empty",
        "gpu--warn",
        "gpu--error",
        "gpu--free",
        "proc--here",
        "proc--muted",
    }

    exact_memory = False  # memory in exact MiB (the `m` key): set by the screen before each draw

    def label(self, text: str) -> Text:
        return Text(text, self.style_of("gpu-view--label"))


class GpuDetailScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", key_display="esc"),
        Binding("q", "app.pop_screen", "Back", show=False),
        Binding("i", "app.pop_screen", "Back", show=False),
        Binding("left_square_bracket", "step(-1)", "Previous GPU", key_display="["),
        Binding("right_square_bracket", "step(1)", "Next GPU", key_display="]"),
        Binding(
            "r", "reset", "Reset GPU", tooltip="the reset ladder, for orphaned memory: dry run, then confirm"
        ),
        Binding("r", "refuse('reset')", show=False),  # read-only, or read through a hub: why not, at once
        Binding("m", "app.toggle_mib", "MiB", show=False, tooltip="memory in exact MiB (again: GiB)"),
        Binding("question_mark", "app.help", "Help", key_display="?"),
    ]

    def __init__(self, host: str, gpu: int) -> None:
        super().__init__()
        self.host = host
        self.gpu = gpu
        self._drawn: tuple[object, ...] | None = None
        self._can_reset: bool | None = None

    @property
    def dash(self) -> Dashboard:
        return cast(Dashboard, self.app)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="gpu-view"):
            yield GpuText(id="gpu-view-text")
        yield Footer()

    def on_mount(self) -> None:
        self.text = self.query_one(GpuText)
        self.box = self.query_one("#gpu-view", VerticalScroll)
        self.redraw()
        self.set_interval(REFRESH_S, self.redraw)

    def on_resize(self) -> None:
        self._drawn = None
        self.redraw()

    # -- keys ------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "reset":
            return self.can_reset()  # shown only where it can help
        if action == "refuse":
            return self.reset_refusal() is not None
        return True

    def _resettable(self, view: HostView) -> bool:
        """Orphaned memory on a host that takes plans: where the reset ladder could help."""
        gpu = self._gpu(view)
        orphaned = gpu is not None and gpu.accounting is not None and gpu.accounting.orphaned > IDLE_SLACK
        return orphaned and view.can_kill

    def can_reset(self) -> bool:
        return self.reset_refusal() is None and self._resettable(self.dash.fleet.view(self.host))

    def reset_refusal(self) -> str | None:
        """Why `r` is refused where it would help: read-only, or a host read through a hub."""
        view = self.dash.fleet.view(self.host)
        if not self._resettable(view):
            return None  # nothing to refuse: `r` is not offered, and says nothing
        return self.dash.read_only_why if self.dash.read_only else not_relayed(view, "GPU resets")

    def action_refuse(self, action: str) -> None:
        reason = self.reset_refusal()
        if reason is not None:
            self.notify(reason, title="Reset: not offered here", severity="warning", timeout=8, markup=False)

    def action_reset(self) -> None:
        if self.can_reset():
            self.post_message(ResetRequested(self.host, self.gpu))

    def action_step(self, step: int) -> None:
        sample = self.dash.fleet.view(self.host).sample
        indexes = [g.index for g in sample.gpus] if sample is not None else []
        if not indexes:
            return
        at = indexes.index(self.gpu) if self.gpu in indexes else 0
        self.gpu = indexes[(at + step) % len(indexes)]
        self._drawn = None
        self.redraw()
        self.box.scroll_home(animate=False)

    # -- drawing ---------------------------------------------------------------------------------

    def _gpu(self, view: HostView) -> Gpu | None:
        sample = view.sample
        return next((g for g in sample.gpus if g.index == self.gpu), None) if sample is not None else None

    def redraw(self) -> None:
        if not self.is_mounted:
            return
        view = self.dash.fleet.view(self.host)
        width = max(self.box.scrollable_content_region.width, 40)
        exact = self.dash.exact_memory
        key = (view.received, view.status, self.gpu, width, self.app.theme, exact)
        if key == self._drawn:
            return
        self._drawn = key
        gpu = self._gpu(view)
        name = gpu.name if gpu is not None else None
        title = f"GPU {self.gpu} · {self.host}" + (f" · {name}" if name else "")
        set_title(self.box, fmt.safe(title, 120))
        can_reset = self.can_reset()
        if can_reset != self._can_reset:  # the footer recomposes on each refresh: only on a change
            self._can_reset = can_reset
            self.refresh_bindings()
        sample = view.sample
        if gpu is None or sample is None:
            why = view.shown_detail or view.shown_status
            self.text.update(
                Text(f"No reading of GPU {self.gpu} on {self.host} ({fmt.safe(why, 200)}).", "italic")
            )
            return
        t = self.text
        t.exact_memory = exact  # the GPU table's cells (MIG instances) read it
        parts: list[RenderableType] = [self._memory(t, gpu, width), Text("")]
        if gpu.mig_instances is not None:  # in MIG mode (nothing at all outside it)
            parts += [self._mig(t, sample, gpu), Text("")]
        now, settings = self._now(t, gpu, view.history.get(gpu.index)), self._settings(t, gpu, view)
        if width >= WIDE:
            grid = Table.grid(padding=(0, 4), expand=False)
            grid.add_column(min_width=38)
            grid.add_column()
            grid.add_row(now, settings)
            parts.append(grid)
        else:
            parts += [now, Text(""), settings]
        parts += [
            Text(""),
            self._graphs(t, gpu, view, width),
            Text(""),
            self._processes(t, sample, gpu, width),
        ]
        t.update(Group(*parts))

    def _memory(self, t: GpuText, gpu: Gpu, width: int) -> RenderableType:
        account = gpu.accounting
        used, total = gpu.memory_used, gpu.memory_total
        head = Text.assemble(
            t.label("Memory  "), (fmt_memory_of(used, total, self.dash.exact_memory), "bold")
        )
        if used is None or not total:
            return Group(head, Text("no memory figure from the driver", t.style_of("gpu-view--muted")))
        pieces = account.parts() if account is not None else [("processes", used)]
        free = max(total - used, 0)
        bar, legend = Text(), Text()
        cells = width
        drawn = 0
        for i, (part, size) in enumerate([*pieces, ("free", free)]):
            style = t.style_of(PART_STYLE.get(part, "meter--empty"))
            # The last part takes what rounding left; any non-zero part shows at least one cell.
            n = cells - drawn if i == len(pieces) else max(1 if size else 0, round(size / total * cells))
            n = min(n, cells - drawn)
            bar.append(("·" if part == "free" else "█") * n, style)
            drawn += n
            if legend:
                legend.append("  ")
            legend.append("■ " if part != "free" else "· ", style)
            legend.append(f"{PART_LABEL.get(part, part)} {fmt_memory(size, self.dash.exact_memory)}")
        lines: list[RenderableType] = [head, bar, legend]
        if account is not None and account.unaccounted > IDLE_SLACK:
            for part, _ in account.parts():
                if part in account.UNACCOUNTED:
                    style = t.style_of(PART_STYLE.get(part, "gpu--warn"))
                    lines.append(Text("! " + part_words(account, part, self.dash.exact_memory), style))
            if account.orphaned > IDLE_SLACK:
                hint = self.reset_refusal() or "r: the reset ladder (a dry run first, then a confirmation)"
                lines.append(Text(hint, t.style_of("gpu-view--muted")))
        elif account is not None:
            lines.append(Text("every byte accounted for", t.style_of("gpu-view--free")))
        return Group(*lines)

    def _mig(self, t: GpuText, sample: Sample, gpu: Gpu) -> RenderableType:
        """A GPU in MIG mode: its instances (`1.0  3g.71gb  ██▌░ 46.0/71.0 GiB  2 user`), as the
        GPU table's rows under it say them. The memory bar above stays the whole GPU's."""
        instances = gpu.mig_instances or ()
        heading = Text(
            f"MIG instances: {len(instances)} (profile, memory, who runs in it)"
            if instances
            else "MIG instances: none (MIG mode is on; no instance is set up)",
            t.style_of("gpu-view--section"),
        )
        if not instances:
            return heading
        grid = Table.grid(padding=(0, 2))
        grid.add_column(justify="right", style=t.style_of("gpu-view--label"), no_wrap=True)
        grid.add_column(no_wrap=True, overflow="ellipsis", max_width=24)
        grid.add_column(no_wrap=True)
        grid.add_column(no_wrap=True, overflow="ellipsis")
        for instance in instances:
            add(
                grid,
                instance.label,
                mig_profile(instance) or "-",
                memory_cell(t, instance.memory_used, instance.memory_total),
                instance_holders(t, sample, gpu, instance),
            )
        return Group(heading, grid)

    def _now(self, t: GpuText, gpu: Gpu, history: GpuHistory | None) -> RenderableType:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style=t.style_of("gpu-view--label"))
        grid.add_column()
        grid.add_row(Text("Now", t.style_of("gpu-view--section")))
        add(grid, "Utilization", f"{fmt_percent(gpu.util_gpu)} SM, {fmt_percent(gpu.util_mem)} memory")
        temp = f"{gpu.temperature}°C" if gpu.temperature is not None else "-"
        slope = history.temperature_slope() if history is not None else None
        if slope is not None:
            temp += f" ({slope:+.1f} °C/min)" if abs(slope) >= 0.05 else " (steady)"
        add(grid, "Temperature", temp)
        power = "-"
        if gpu.power_draw is not None:
            power = f"{gpu.power_draw:.0f} W" + (f" of {gpu.power_limit:.0f} W" if gpu.power_limit else "")
        add(grid, "Power", power)
        add(grid, "UUID", fmt.safe(gpu.uuid, 60) or "-")
        if gpu.error:
            add(grid, "Error", Text(fmt.safe(gpu.error, 200), t.style_of("gpu--error")))
        return grid

    def _settings(self, t: GpuText, gpu: Gpu, view: HostView) -> RenderableType:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style=t.style_of("gpu-view--label"))
        grid.add_column()
        p = view.preflight.get(gpu.index)
        grid.add_row(Text("Settings and health", t.style_of("gpu-view--section")))
        if p is None:
            add(
                grid,
                "",
                Text("no preflight reading yet (one comes every ~10 s)", t.style_of("gpu-view--muted")),
            )
            return grid
        for label, value in preflight_rows(p):
            add(grid, label, value)
        flags = preflight_flags(view.preflight).get(gpu.index, ())
        for flag in flags:
            grid.add_row(Text("⚑", t.style_of("gpu--warn")), Text(flag, t.style_of("gpu--warn")))
        return grid

    def _graphs(self, t: GpuText, gpu: Gpu, view: HostView, width: int) -> RenderableType:
        """Utilization, memory, temperature and power over time: a chart each, two rows high, with
        its scale's ends at the left and one time axis under them all."""
        history = view.history.get(gpu.index)
        span = max(width - LABEL - 8 - GUTTER - 2, 10)  # a cell per sample, as many as fit
        grid = Table.grid(padding=(0, 1))
        grid.add_column(width=LABEL, style=t.style_of("gpu-view--label"))
        grid.add_column(width=span + GUTTER + 2, no_wrap=True)
        grid.add_column(width=6, justify="right")
        if history is None or not history.times:
            heading = Text("History", t.style_of("gpu-view--section"))
            return Group(heading, Text("no samples yet", t.style_of("gpu-view--muted")))
        times = history.times
        shown = min(span, len(times))
        heading = Text(
            f"History, the last {_covers(times[-1] - times[-shown])} ({count(shown, 'sample')}, one a cell)",
            t.style_of("gpu-view--section"),
        )
        power_top = gpu.power_limit or max((w for w in history.power if w is not None), default=0.0) or 1.0
        percent = Scale(100.0, lambda v: f"{v:.0f}%")
        rows: tuple[tuple[str, list[float | None], Scale, str, str], ...] = (
            ("Util", list(history.util), percent, "meter--util", fmt_percent(gpu.util_gpu)),
            ("Memory", list(history.memory), percent, "meter--memory", fmt_percent(_fraction(gpu))),
            (
                "Temp",
                list(history.temperature),
                Scale(nice_top(max((c or 0.0 for c in history.temperature), default=0.0), 100.0), _degrees),
                "gpu--warn",
                f"{_or_dash(gpu.temperature)}°C",
            ),
            (
                "Power",
                list(history.power),
                Scale(power_top, lambda w: f"{w:.0f}W"),
                "kind--user",
                f"{_or_dash(gpu.power_draw, '{:.0f}')} W",
            ),
        )
        axis = t.style_of("gpu-view--muted")
        for label, values, scale, style, now in rows:
            graph = chart(
                values,
                times,
                span,
                2,
                scale,
                style=t.style_of(style),
                axis=axis,
                gutter=GUTTER,
                time_axis=False,
            )
            add(grid, label, graph, now)
        add(grid, "", Text("\n".join(time_lines(times, shown, span, GUTTER)), axis, no_wrap=True), "")
        return Group(heading, grid)

    def _processes(self, t: GpuText, sample: Sample, gpu: Gpu, width: int) -> RenderableType:
        on = sample.on_gpu(gpu.index)
        # Where some run in MIG instances, the process table's GPU column (`0:1.0`) after the kind.
        places = [gpus_cell(t, p, gpu.index) for p in on] if any(p.mig_on(gpu.index) for p in on) else []
        place_width = max((c.cell_len for c in places), default=0)
        grid = Table.grid(padding=(0, 1))
        grid.add_column(justify="right", width=8)
        grid.add_column(width=9)
        if places:
            grid.add_column(width=place_width, no_wrap=True)
        grid.add_column(justify="right", width=11 if self.dash.exact_memory else 9)  # 143771 MiB
        grid.add_column(justify="right", width=13)
        grid.add_column(width=10, no_wrap=True, overflow="ellipsis")
        rest = width - (60 if self.dash.exact_memory else 58) - (place_width + 1 if places else 0)
        grid.add_column(no_wrap=True, overflow="ellipsis", max_width=max(rest, 10))
        what = "MIG instance, memory" if places else "memory"
        heading = Text(
            f"On GPU {gpu.index}: {count(len(on), 'process', 'processes')} ({what}, SM/memory utilization)",
            t.style_of("gpu-view--section"),
        )
        for i, p in enumerate(on):
            memory = p.gpu_memory.get(gpu.index)
            place = [places[i]] if places else []
            add(
                grid,
                str(p.pid),
                # The process table's Kind cell: the kind, or its MPS part (`○ mps-srv`).
                Text(kinds.proc_label(p), t.style_of(kinds.STYLE.get(p.kind, "kind--hidden"))),
                *place,
                fmt_memory(memory, self.dash.exact_memory) if memory else "-",
                share_words(p.gpu_util.get(gpu.index) if p.gpu_util is not None else None),
                fmt.safe(p.user, 32) or "-",
                fmt.safe(p.command_line, 300) or "-",
            )
        return Group(heading, grid) if on else heading


def add(grid: Table, *cells: str | Text) -> None:
    """A row of plain cells: a str cell in a rich Table would be parsed as markup (host text may hold
    brackets), so every one becomes Text."""
    grid.add_row(*(c if isinstance(c, Text) else Text(c) for c in cells))


def share_words(share: GpuShare | None) -> str:
    """`93% / 55%` SM and memory utilization, with the encoder and decoder where they work."""
    if share is None:
        return "-"
    words = f"{_or_dash(share.sm)}% / {_or_dash(share.mem)}%"
    if share.enc or share.dec:
        words += f" enc {_or_dash(share.enc)}% dec {_or_dash(share.dec)}%"
    return words


def preflight_rows(p: Preflight) -> list[tuple[str, str]]:
    """The preflight reading as (label, value) rows; `-` where the GPU or driver does not say."""

    def flag(value: bool | None, on: str = "on", off: str = "off") -> str:
        return "-" if value is None else on if value else off

    def pair(now: int | None, top: int | None, unit: str = " MHz") -> str:
        if now is None and top is None:
            return "-"
        return f"{_or_dash(now)}/{_or_dash(top)}{unit}"

    def app_clock(now: int | None, default: int | None) -> str:
        if now is None:
            return "-"
        return f"{now} MHz" + (" (default)" if now == default else f" (default {_or_dash(default)})")

    power = "-"
    if p.power_limit is not None:
        power = f"{p.power_limit:.0f} W" + (
            " (default)"
            if p.power_default in (None, p.power_limit)
            else f" (default {p.power_default:.0f} W)"
        )
    pcie = "-"
    if p.pcie_gen is not None or p.pcie_width is not None:
        pcie = f"gen {_or_dash(p.pcie_gen)} x{_or_dash(p.pcie_width)} (max gen {_or_dash(p.pcie_gen_max)} x{_or_dash(p.pcie_width_max)})"
    ecc = "-"
    if p.ecc_corrected is not None or p.ecc_uncorrected is not None:
        ecc = f"{_or_dash(p.ecc_corrected)} corrected, {_or_dash(p.ecc_uncorrected)} uncorrected (volatile)"
    pending = [
        words
        for value, words in (
            (p.remap_failed, "row remap failed"),
            (p.remap_pending, "row remap pending"),
            (p.retired_pending, "page retirement pending"),
        )
        if value
    ]
    known = [v for v in (p.remap_failed, p.remap_pending, p.retired_pending) if v is not None]
    throttle = "-" if p.throttle is None else (", ".join(p.throttle) or "none")
    mig = flag(p.mig)
    if p.mig_pending is not None and p.mig_pending != p.mig:
        mig += f" ({flag(p.mig_pending)} after a reset)"
    peers = "-" if p.nvlink_peers is None else (", ".join(p.nvlink_peers) or "none")
    return [
        ("Persistence", flag(p.persistence)),
        ("Compute mode", p.compute_mode or "-"),
        ("MIG", mig),
        ("SM clock", pair(p.sm_clock, p.sm_clock_max)),
        ("Mem clock", pair(p.mem_clock, p.mem_clock_max)),
        (
            "App clocks",
            f"SM {app_clock(p.sm_app_clock, p.sm_app_clock_default)}, memory {app_clock(p.mem_app_clock, p.mem_app_clock_default)}",
        ),
        ("Power limit", power),
        ("Throttle", throttle),
        ("Fan", fmt_percent(p.fan) if p.fan is not None else "-"),
        ("PCIe", pcie),
        ("ECC", ecc),
        ("Repairs", ", ".join(pending) if pending else ("none pending" if known else "-")),
        ("Display", flag(p.display_active, "active", "none")),
        ("NVLink peers", peers),
    ]


def _covers(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def _degrees(value: float) -> str:
    return f"{value:.0f}°"


def _or_dash(value: float | int | None, form: str = "{}") -> str:
    return "-" if value is None else form.format(value)


def _fraction(gpu: Gpu) -> float | None:
    fraction = gpu.memory_fraction
    return None if fraction is None else 100.0 * fraction

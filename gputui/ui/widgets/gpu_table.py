"""The GPU table of one host: a row per GPU, plus an "all" row that stands for the whole host."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import replace
from typing import ClassVar

from textual.binding import Binding, BindingType

from gputui.fleet.idle import span
from gputui.fleet.session import LIVE, GpuHistory, HostView
from gputui.model import IDLE_SLACK, Gpu, MigInstance, Sample
from gputui.text.units import fmt_memory, fmt_memory_of, fmt_percent
from gputui.text.words import count, mig_profile
from gputui.views.problems import gpu_free, severe_problems
from gputui.views.readiness import preflight_flags

from .. import fmt, kinds
from .cells import Cell, Row, Styled, dim
from .columns import Column
from .table import KeyedTable

ALL = "all"  # the row key of the whole-host row
HISTORY_WINDOW = 120  # samples a sparkline spans, whatever its width
SPARK_WIDTH = 12
BAR_WIDTH = 8  # in GiB and in exact MiB alike: the Memory column grows by the longer numbers
HOLDERS_ROOM = 30  # the Holders column grows to this (or what its cells need) before Temp comes
# Before a memory figure that adds GPUs up (the "all" row, a fleet group's line), so that it is not
# read as one GPU's beside theirs; a word in ASCII mode, where one character would not say it.
SUM = "Σ"
SUM_ASCII = "sum"


# The Holders column of the GPU and fleet tables: flexible, its numbers whole (glyphs for words when
# narrow), growing to HOLDERS_ROOM before the other columns of its priority come (holders_column).
HOLDERS = Column(
    "holders", "Holders", width=None, nominal=10, flex=True, cut=True, room=HOLDERS_ROOM, whole=True
)


def holders_column(priority: int) -> Column:
    """The Holders column, shown with the columns of `priority`."""
    return replace(HOLDERS, priority=priority, room_priority=priority)


def holders_cell(
    table: KeyedTable, sample: Sample, gpus: tuple[Gpu, ...], live: bool = True, unfit: Collection[int] = ()
) -> Cell:
    """ "free", or who holds these GPUs: "2 user  1 ghost" in the kinds' styles, "■2 ◇1" where the
    column is narrow (the cell's short form; the legend explains the glyphs). `live`: from a live
    sample; else a free GPU is only "was free": no one can say that it is free now. `unfit`: the
    indexes of GPUs with a severe problem (views/problems.py severe_problems): never free, so one
    that nothing holds is "no holder", in the warning style (its marks or State say why)."""
    indexes = {g.index for g in gpus}
    counts = Counter(
        p.kind for p in sample.processes if p.kind in kinds.HOLDING and indexes.intersection(p.gpus)
    )
    pods = sorted({g.pod for g in gpus if g.pod})
    if not counts and pods:
        # Read from series that map GPUs to pods (no process list): the pod it is given to holds it.
        style = table.style_of(kinds.STYLE["user"])
        text = fmt.safe("pod " + ", ".join(pods), 120)
        return Cell(text, style, sort_key=(2, len(pods)))
    if not counts:
        warn = table.style_of("gpu--warn")
        idle = all(sample.gpu_is_free(g) for g in gpus)
        if idle and not indexes.intersection(unfit):
            if not live:
                return Cell("was free", table.style_of("gpu--stale"), sort_key=(0, 1))
            return Cell("✓ free", table.style_of("gpu--free"), sort_key=(0, 0))
        if any(unaccounted(g) for g in gpus):
            return Cell(sort_key=(1, 0))  # the marks say whose it is: ghost, orphaned, ...
        if idle:
            return Cell("no holder", warn, sort_key=(1, 0))
        # Memory in use and nobody to blame: NVML lists nothing and no holder is attributed.
        return Cell("in use, no holder", warn, sort_key=(1, 0)).with_short(Cell("no holder", warn))
    held = [k for k in kinds.HOLDING if counts.get(k)]
    cell = Cell(sort_key=(2, sum(counts.values())))
    short = Cell(sort_key=cell.sort_key)
    for i, k in enumerate(held):
        style = table.style_of(kinds.STYLE[k])
        cell.add("  " if i else "").add(str(counts[k]), style, keep=True).add(f" {k}", style)
        short.add(" " if i else "").add(kinds.GLYPHS[k], style).add(str(counts[k]), style, keep=True)
    return cell.with_short(short)


def _also_short(cell: Cell) -> Cell:
    """`cell` with a short form to append to alongside it (the cell itself where it has none)."""
    if cell.short is None:
        cell.short = cell.clone()
    return cell


def unaccounted(gpu: Gpu) -> bool:
    """Memory nobody listed holds, beyond the driver's own bookkeeping."""
    return gpu.accounting is not None and gpu.accounting.unaccounted > IDLE_SLACK


def marks_cell(cell: Cell, table: KeyedTable, gpu: Gpu, flags: tuple[str, ...]) -> Cell:
    """After the holders: `◌ 2.1 GiB orphaned` when memory is unaccounted for (its largest part),
    `⚑ persistence off +1` when the preflight reading flags something (the GPU view, i, says all).
    In the short form too, one space apart. The size is in the unit `m` chose, as every figure."""
    style = table.style_of("gpu--warn")
    account = gpu.accounting
    marks: list[list[tuple[str, bool]]] = []
    if account is not None and unaccounted(gpu):
        part, size = max(((p, b) for p, b in account.parts() if p in account.UNACCOUNTED), key=lambda x: x[1])
        marks.append([("◌ ", False), (fmt_memory(size, table.exact_memory), True), (f" {part}", False)])
    if flags:
        more = f" +{len(flags) - 1}" if len(flags) > 1 else ""
        marks.append([(f"⚑ {flags[0]}{more}", False)])
    if not marks:
        return cell
    _also_short(cell)
    for form, gap in ((cell, "  "), (cell.short, " ")):
        assert form is not None
        for words in marks:
            form.add(gap if form.plain else "")
            for text, number in words:
                form.add(text, style, keep=number)
    return cell


def sum_mark(table: KeyedTable) -> str:
    """What marks a sum over GPUs in `table`'s app: SUM, or SUM_ASCII in ASCII mode."""
    return SUM_ASCII if getattr(table.app, "ascii_only", False) else SUM


def memory_cell(
    table: Styled, used: int | None, total: int | None, width: int | None = None, mark: str = ""
) -> Cell:
    """A bar and `59.7/140 GiB`, or the same bar and `61234/143771 MiB` in exact memory (the column
    is as wide as its widest: the numbers are never cut). `mark`: before the numbers (`sum_mark`)."""
    if width is None:
        width = BAR_WIDTH
    fraction = used / total if used is not None and total else None
    filled, empty = fmt.meter(fraction, width)
    return Cell.parts(
        (filled, table.style_of("meter--memory")),
        (empty, table.style_of("meter--empty")),
        (" " + (f"{mark} " if mark else "") + fmt_memory_of(used, total, table.exact_memory), ""),
        sort_key=fraction or 0.0,
    )


def gpu_cells(table: KeyedTable, gpu: Gpu, free: bool) -> Row:
    """What a GPU's row says of it in both the GPU and the fleet tables: its index (in the free
    style where `free`), name, memory, utilization and temperature."""
    return {
        "gpu": Cell(str(gpu.index), table.style_of("gpu--free") if free else "", sort_key=gpu.index),
        "name": Cell(fmt.safe(gpu.name, 40) or "-"),
        "memory": memory_cell(table, gpu.memory_used, gpu.memory_total),
        "util": util_cell(table, gpu.util_gpu),
        "temp": Cell(
            f"{gpu.temperature}°C" if gpu.temperature is not None else "-", sort_key=gpu.temperature or 0
        ),
    }


def util_cell(table: KeyedTable, util: float | None) -> Cell:
    return Cell(fmt_percent(util), sort_key=util or 0.0)


# How a GPU's row and meters are styled: the GPU table's, and the fleet table's (a row per GPU).
GPU_STYLES = {
    *kinds.STYLE.values(),
    "gpu--free",
    "gpu--warn",
    "gpu--error",
    "gpu--all",
    "gpu--stale",
    "meter--memory",
    "meter--util",
    "meter--empty",
}


class GpuTable(KeyedTable):
    COLUMNS = (
        Column("gpu", "GPU", width=3, justify="right"),
        Column("name", "Name", width=None, nominal=18, priority=6, cut=True),
        Column("memory", "Memory", width=BAR_WIDTH + 13),
        Column("util", "Util", width=4, justify="right", priority=1),
        Column("temp", "Temp", width=4, justify="right", priority=2),
        Column("power", "Power", width=8, justify="right", priority=4),
        Column("util_hist", "Util hist", width=SPARK_WIDTH, priority=3),
        Column("mem_hist", "Mem hist", width=SPARK_WIDTH, priority=5),
        # Who holds the GPU, with its numbers whole (glyphs for words when narrow), before the
        # temperature and the history come.
        holders_column(priority=1),
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "screen.show_procs", "Processes", show=False, tooltip="go to its processes"),
    ]
    DEFAULT_SORT = ("gpu", False)  # fixed: GPUs in index order, the "all" row on top
    SORTABLE = False
    COMPONENT_CLASSES: ClassVar[set[str]] = GPU_STYLES

    def show(self, view: HostView) -> None:
        """The GPUs of `view`'s sample; dimmed, and none marked free, when the host is not live (the
        title says how old they are)."""
        sample = view.sample
        if sample is None:
            self.sync({})
            return
        self.live = view.status == LIVE
        self.unfit = frozenset(g.index for g in sample.gpus if severe_problems(view, g))
        self.free = frozenset(g.index for g in sample.gpus if gpu_free(view, g))
        flags = preflight_flags(view.preflight)
        # An idle holder (gputui/fleet/idle.py) is the first thing said of its GPU: memory held for nothing.
        idle = view.idle.durations(self.idle_after)
        for g in sample.gpus:
            held = [
                s for p in sample.processes if g.index in p.gpu_memory and (s := idle.get(p.key)) is not None
            ]
            if held:
                flags[g.index] = (f"idle holder {span(max(held))}", *flags.get(g.index, ()))
        rows = {
            str(g.index): self.row(g, sample, view.history.get(g.index), flags.get(g.index, ()))
            for g in sample.gpus
        }
        for g in sample.gpus:
            rows.update(mig_rows(self, g, sample))
        if sample.gpus:
            rows[ALL] = self.all_row(sample)
        if not self.live:
            stale = self.style_of("gpu--stale")
            for row in rows.values():
                dim(row, stale)
        self.sync(rows)
        mig = any(g.mig_instances for g in sample.gpus)
        if mig != self.mig:
            self.mig = mig
            self.remeasure()

    live = True  # the sample shown is live
    unfit: frozenset[int] = frozenset()  # its GPUs with a severe problem: never free
    free: frozenset[int] = frozenset()  # its free GPUs (views/problems.py gpu_free)
    idle_after = 600.0  # seconds at 0 % SM that make an idle holder (the screen sets the app's)
    mig = False  # a GPU of the host is in MIG mode: the Name column names its instances' profiles

    def available_columns(self) -> tuple[Column, ...]:
        """The columns; with MIG instances the Name column (`└ MIG 3g.71gb`: which instance a row
        is) comes right after Util, before the temperature and the history."""
        if not self.mig:
            return self.COLUMNS
        return tuple(replace(c, priority=1) if c.key == "name" else c for c in self.COLUMNS)

    def row(self, gpu: Gpu, sample: Sample, history: GpuHistory | None, flags: tuple[str, ...] = ()) -> Row:
        util_hist = fmt.sparkline(history.util, SPARK_WIDTH, HISTORY_WINDOW) if history else ""
        mem_hist = fmt.sparkline(history.memory, SPARK_WIDTH, HISTORY_WINDOW) if history else ""
        power = "-"
        if gpu.power_draw is not None:
            limit = f"/{gpu.power_limit:.0f}" if gpu.power_limit else ""
            power = f"{gpu.power_draw:.0f}{limit}W"
        holders = holders_cell(self, sample, (gpu,), self.live, self.unfit)
        holders = marks_cell(holders, self, gpu, flags)
        if gpu.error:
            holders = Cell(f"error: {fmt.safe(gpu.error, 40)}", self.style_of("gpu--error"), sort_key=(3, 0))
        free = self.live and gpu.index in self.free
        return {
            **gpu_cells(self, gpu, free),
            "power": Cell(power, sort_key=gpu.power_draw or 0.0),
            "util_hist": Cell(util_hist, self.style_of("meter--util"), sort_key=0),
            "mem_hist": Cell(mem_hist, self.style_of("meter--memory"), sort_key=0),
            "holders": holders,
        }

    def all_row(self, sample: Sample) -> Row:
        """The host as one row: the cursor on it scopes the process table (and `F`) to the host."""
        gpus = sample.gpus
        used = sum(g.memory_used or 0 for g in gpus)
        total = sum(g.memory_total or 0 for g in gpus)
        utils = [g.util_gpu for g in gpus if g.util_gpu is not None]
        style = self.style_of("gpu--all")
        free = len(self.free)
        top = -1  # before GPU 0
        name = count(len(gpus), "GPU") + (f", {free} free" if self.live else "")
        return {
            "gpu": Cell("all", style, sort_key=top),
            "name": Cell(name, style, sort_key=top),
            "memory": memory_cell(self, used, total, mark=sum_mark(self)),
            "util": util_cell(self, sum(utils) / len(utils) if utils else None),
            "temp": Cell("", sort_key=top),
            "power": Cell(f"{sum(g.power_draw or 0 for g in gpus):.0f}W", sort_key=top),
            "util_hist": Cell("", sort_key=top),
            "mem_hist": Cell("", sort_key=top),
            "holders": self.host_marks(holders_cell(self, sample, gpus, self.live, self.unfit), gpus),
        }

    def host_marks(self, cell: Cell, gpus: tuple[Gpu, ...]) -> Cell:
        """The host row's mark: how much of its memory is unaccounted for (the GPU rows say what)."""
        total = sum(g.accounting.unaccounted for g in gpus if g.accounting is not None and unaccounted(g))
        if total:
            style = self.style_of("gpu--warn")
            _also_short(cell)
            for form, gap in ((cell, "  "), (cell.short, " ")):
                assert form is not None
                form.add(gap if form.plain else "").add("◌ ", style)
                form.add(fmt_memory(total, self.exact_memory), style, keep=True).add(" unaccounted", style)
        return cell

    @property
    def cursor_gpu(self) -> int | None:
        """The GPU under the cursor; None on the "all" row (the whole host)."""
        key = self.cursor_key
        # A MIG instance's row ("0/1.0") stands for its GPU.
        return int(key.partition("/")[0]) if key is not None and key != ALL else None


def mig_key(gpu: Gpu, instance: MigInstance) -> str:
    """The row key of a MIG instance: `0/1.0` (GPU 0, GPU instance 1, compute instance 0)."""
    return f"{gpu.index}/{instance.label}"


def mig_rows(table: KeyedTable, gpu: Gpu, sample: Sample) -> dict[str, Row]:
    """A GPU in MIG mode: one row per instance under it, indented (`  0/1.0  └ MIG 3g.71gb`), with
    its memory bar and who runs in it. The driver gives no utilization, temperature or power per
    instance: those cells are left empty."""
    rows: dict[str, Row] = {}
    for rank, instance in enumerate(gpu.mig_instances or ()):
        # Right under its GPU, in the driver's order (the table sorts on this column only).
        order = gpu.index + (rank + 1) / 1000
        rows[mig_key(gpu, instance)] = {
            "gpu": Cell(f"  {gpu.index}/{instance.label}", "dim", sort_key=order),
            "name": Cell(f"└ MIG {mig_profile(instance)}".rstrip(), "dim", sort_key=order),
            "memory": memory_cell(table, instance.memory_used, instance.memory_total),
            "util": Cell("", sort_key=order),
            "temp": Cell("", sort_key=order),
            "power": Cell("", sort_key=order),
            "util_hist": Cell("", sort_key=order),
            "mem_hist": Cell("", sort_key=order),
            "holders": instance_holders(table, sample, gpu, instance),
        }
    return rows


def instance_holders(styled: Styled, sample: Sample, gpu: Gpu, instance: MigInstance) -> Cell:
    """Who runs in a MIG instance, by kind (`2 user`), or `· idle`."""
    users = [
        p
        for p in sample.processes
        if any(m.gi == instance.gi and m.ci in (instance.ci, None) for m in p.mig_on(gpu.index))
    ]
    if not users:
        return Cell("· idle", "dim", sort_key=(0, 0))
    counts = Counter(p.kind for p in users if p.kind in kinds.HOLDING)
    holders = Cell(sort_key=(2, len(users)))
    for i, kind in enumerate(k for k in kinds.HOLDING if counts.get(k)):
        style = styled.style_of(kinds.STYLE[kind])
        holders.add("  " if i else "").add(str(counts[kind]), style, keep=True).add(f" {kind}", style)
    return holders

"""The fleet table: every GPU of every host in one table, sortable, filterable, "free only"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from textual.binding import Binding, BindingType

from gputui.fleet import CONNECTING, DOWN, LIVE, REASONS, STALE, HostView
from gputui.model import Gpu, HostMetrics, Sample
from gputui.units import fmt_memory_of, fmt_percent

from .. import fmt
from .cells import Cell, Row, dim
from .gpu_table import GPU_STYLES, holders_cell, holders_column, memory_cell, util_cell
from .host_list import seen
from .proc_table import matches
from .table import Column, KeyedTable


def fleet_row_key(host: str, gpu: int | None) -> str:
    # The GPU index goes first: it never contains "@", so the first "@" splits the key.
    return f"{'-' if gpu is None else gpu}@{host}"


def split_row_key(key: str) -> tuple[str, int | None]:
    index, _, host = key.partition("@")
    return host, None if index == "-" else int(index)


class FleetTable(KeyedTable):
    COLUMNS = (
        Column("host", "Host", width=None, nominal=14, cut=True),
        Column("gpu", "GPU", width=3, justify="right"),
        Column("name", "Name", width=None, nominal=18, priority=6, cut=True),
        Column("memory", "Memory", width=21, descending=True),
        Column("util", "Util", width=4, justify="right", descending=True, priority=1),
        Column("temp", "Temp", width=4, justify="right", descending=True, priority=5),
        Column("state", "State", width=5, priority=1),
        holders_column(priority=2),
        # The host's own load, on each of its GPUs' rows (sort by it to find the busy hosts); the
        # first to go when the table is narrow.
        Column("cpu", "CPU", width=4, justify="right", descending=True, priority=7),
        Column("ram", "RAM", width=None, nominal=12, justify="right", descending=True, priority=8),
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "screen.drill", "Open host", show=False, tooltip="open the GPU's host"),
    ]
    DEFAULT_SORT = ("host", False)
    # A row's host and GPU never change: sorted by either, rows out of view wait to be built.
    STEADY_SORTS = frozenset({"host", "gpu"})
    LAZY = True  # rows out of view are held thin, built again by key (build_later)
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *GPU_STYLES,
        "host--live",
        "host--stale",
        "host--down",
        "host--connecting",
    }

    HOST_COLUMNS = ("cpu", "ram")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._keys_of: dict[str, set[str]] = {}
        # What a row built later is built from: each host's view and place as last shown, its age.
        self._view_of: dict[str, HostView] = {}
        self._position_of: dict[str, int] = {}
        self._ages: dict[str, float | None] = {}
        self._gpus_keyed: dict[str, tuple[Gpu, ...] | None] = {}  # the GPUs each host's keys were made of
        self._keyed_for: tuple[str, bool] = ("", False)  # the filter and free-only they were made for
        self._metrics_seen = False  # no host's probe sends its load (an older one): no CPU, RAM columns

    def available_columns(self) -> tuple[Column, ...]:
        if self._metrics_seen:
            return self.COLUMNS
        return tuple(c for c in self.COLUMNS if c.key not in self.HOST_COLUMNS)

    def show_hosts(
        self,
        views: list[HostView],
        order: dict[str, int],
        filter_text: str = "",
        free_only: bool = False,
        ages: Mapping[str, float | None] | None = None,
    ) -> None:
        """Refresh the rows of `views` (only those hosts: the others keep their rows). `ages`: how old
        each host's sample is, said on the rows of a host that is not live. Only the rows in the
        window are built now; the others when they come into it (KeyedTable.sync's `later`). A
        host whose GPUs are the same objects as last time (a sample that did not change them, the
        app's intake reuses them) keeps its keys without making them again."""
        self._ages.update(ages or {})
        later: list[str] = []
        replace: set[str] = set()
        needle = filter_text.casefold()
        if (needle, free_only) != self._keyed_for:
            self._keyed_for = (needle, free_only)
            self._gpus_keyed.clear()  # which rows a host has depends on these: all made again
        if not self._metrics_seen and any(v.sample is not None and v.sample.host is not None for v in views):
            self._metrics_seen = True
            self.refit()
        plain = not needle and not free_only
        for view in views:
            name = view.name
            self._view_of[name] = view
            self._position_of[name] = order.get(name, 0)
            gpus = view.sample.gpus if view.sample is not None else None
            if plain and gpus and self._gpus_keyed.get(name) is gpus:
                later.extend(self._keys_of[name])
                continue
            old = self._keys_of.get(name)
            if old:
                replace |= old
            keys = self.host_keys(view, needle, free_only)
            self._keys_of[name] = set(keys)
            self._gpus_keyed[name] = gpus
            later.extend(keys)
        self.sync({}, replace=replace, later=later)

    def build_later(self, key: str) -> Row | None:
        host, index = split_row_key(key)
        view = self._view_of.get(host)
        return self.built_row(view, self._position_of.get(host, 0), index) if view is not None else None

    def host_keys(self, view: HostView, needle: str, free_only: bool) -> dict[str, int | None]:
        """The keys of `view`'s rows (and the GPU index of each; None: the host's placeholder row):
        what `host_rows` would build, without building it."""
        sample = view.sample
        keys: dict[str, int | None] = {}
        if sample is None or not sample.gpus:
            if not free_only and (not needle or needle in view.name.casefold()):
                keys[fleet_row_key(view.name, None)] = None
            return keys
        host_match = not needle or needle in view.name.casefold()
        live = view.status == LIVE
        for gpu in sample.gpus:
            if free_only and not (live and sample.gpu_is_free(gpu)):
                continue
            if not host_match and not _gpu_matches(sample, gpu, needle):
                continue
            keys[fleet_row_key(view.name, gpu.index)] = gpu.index
        return keys

    def built_row(self, view: HostView, position: int, index: int | None) -> Row | None:
        """One row of `view` as it is now: its GPU `index` (None: its placeholder); None when the
        GPU is gone since its key was made (the next refresh drops the key)."""
        sample = view.sample
        if index is None:
            return self.placeholder(view, position)
        gpu = next((g for g in sample.gpus if g.index == index), None) if sample is not None else None
        if sample is None or gpu is None:
            return None
        return self.row(view, position, sample, gpu, view.status == LIVE and sample.gpu_is_free(gpu))

    def host_rows(self, view: HostView, position: int, needle: str, free_only: bool) -> dict[str, Row]:
        """Every row of `view`, built."""
        rows: dict[str, Row] = {}
        for key, index in self.host_keys(view, needle, free_only).items():
            row = self.built_row(view, position, index)
            if row is not None:
                rows[key] = row
        return rows

    def row(self, view: HostView, position: int, sample: Sample, gpu: Gpu, free: bool) -> Row:
        live = view.status == LIVE
        if live:
            state = Cell("free", self.style_of("gpu--free"), sort_key=0) if free else Cell("busy", sort_key=1)
        else:
            state = Cell(view.status, self.style_of(f"host--{view.status}"), sort_key=2)
        holders = holders_cell(self, sample, (gpu,), live=live)
        if gpu.error:
            holders = Cell(f"error: {fmt.safe(gpu.error, 40)}", self.style_of("gpu--error"), sort_key=(3, 0))
        if not live:
            holders = self.aged(holders, self._ages.get(view.name))
        row: Row = {
            "host": Cell(fmt.safe(view.name, 40), sort_key=(position, gpu.index)),
            "gpu": Cell(str(gpu.index), self.style_of("gpu--free") if free else "", sort_key=gpu.index),
            "name": Cell(fmt.safe(gpu.name, 40) or "-"),
            "memory": memory_cell(self, gpu.memory_used, gpu.memory_total),
            "util": util_cell(self, gpu.util_gpu),
            "temp": Cell(
                f"{gpu.temperature}°C" if gpu.temperature is not None else "-", sort_key=gpu.temperature or 0
            ),
            "state": state,
            "holders": holders,
            **self.host_cells(sample.host),
        }
        if not live:  # its last sample: dimmed (the State column says why, in its colour)
            dim({k: c for k, c in row.items() if k != "state"}, self.style_of("gpu--stale"))
        return row

    def aged(self, holders: Cell, age: float | None) -> Cell:
        """`last seen 2m ago · 1 user`: the holders of a host that is not live, with their age."""
        words = seen(age)
        gap = " · " if holders.plain else ""
        cell = Cell(words + gap, sort_key=holders.sort_key).then(holders)
        short = Cell(words.removeprefix("last seen ") + gap, sort_key=holders.sort_key)
        return cell.with_short(short.then(holders.short or holders))

    def host_cells(self, metrics: HostMetrics | None) -> Row:
        """The host's CPU % and RAM used/total ("-" where its probe sent none or nonsense)."""
        m = metrics or HostMetrics()
        used, total = m.memory_used, m.memory_total
        return {
            "cpu": Cell(
                fmt_percent(m.cpu_percent), sort_key=m.cpu_percent if m.cpu_percent is not None else -1.0
            ),
            "ram": Cell(
                fmt_memory_of(used, total, self.exact_memory),
                sort_key=used / total if used is not None and total else -1.0,
            ),
        }

    def placeholder(self, view: HostView, position: int) -> Row:
        """A host with no GPU to list: say why (connecting, down and the reason, no driver)."""
        facts = view.facts
        if view.status in (DOWN, STALE):
            why = REASONS.get(view.reason or "", view.reason or view.status)
        elif facts is not None and facts.error_code:
            why = REASONS.get(facts.error_code, facts.error_code)
        elif view.status == CONNECTING:
            why = "connecting…"
        else:
            why = "no GPU"
        status_style = (
            self.style_of(f"host--{view.status}") if view.status in (LIVE, STALE, DOWN, CONNECTING) else ""
        )
        blank = Cell("", sort_key=-1)
        return {
            "host": Cell(fmt.safe(view.name, 40), sort_key=(position, -1)),
            "gpu": Cell("-", sort_key=-1),
            "name": blank,
            "memory": Cell("", sort_key=-1.0),
            "util": Cell("", sort_key=-1.0),
            "temp": blank,
            "state": Cell(view.status, status_style, sort_key=3),
            "holders": Cell(fmt.safe(why, 60), self.style_of("gpu--warn"), sort_key=(4, 0)),
            **self.host_cells(view.sample.host if view.sample is not None else None),
        }

    @property
    def cursor_gpu(self) -> tuple[str, int | None] | None:
        key = self.cursor_key
        return split_row_key(key) if key is not None else None


def _gpu_matches(sample: Sample, gpu: Gpu, needle: str) -> bool:
    if gpu.name and needle in gpu.name.casefold():
        return True
    return any(matches(p, needle) for p in sample.processes if gpu.index in p.gpus)

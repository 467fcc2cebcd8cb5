"""The fleet table: every GPU of every host in one table, problems first, healthy hosts folded.

Made for a thousand hosts (docs/FLEET_VIEW.md): the State column says each GPU's worst
problem (gputui/views/problems.py: a host down or stale, ghost or orphaned memory, an idle holder,
throttling, ECC trouble, a GPU that differs from its siblings) and the table sorts by it, so what is
wrong comes first, in rank order, then by host. The GPUs of a host with no problem are folded into
one line per group (`▸ gpu · 1000 hosts`: their memory, utilization, busy and free GPUs), as long
as the group has fleetview.FOLD_AT healthy hosts or more; enter or + unfolds a group, - folds it again. A
filter (the language of gputui/views/filter.py) or "free only" lists the GPUs it finds, unfolded.
Sorting by another column (1-9) sorts the group lines too.

Only the hosts that changed are worked out again (their problems, their rows); a group line is
summed from what each of its hosts gave it last.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from textual.binding import Binding, BindingType
from textual.message import Message

from gputui.fleet.session import CONNECTING, DOWN, LIVE, REASONS, STALE, HostView
from gputui.model import Gpu, HostMetrics, Sample
from gputui.text.units import fmt_memory_of, fmt_percent
from gputui.text.words import plural
from gputui.views.filter import EVERYTHING, Query
from gputui.views.problems import (
    HEALTHY,
    RANKS,
    FleetProblems,
    HostState,
    Problem,
    gpu_free,
    gpu_subject,
    host_subject,
    severe_problems,
)

from .. import fmt
from .cells import Cell, Row, dim
from .columns import SORT_KEYS, Column
from .fold_keys import fold_key, unfold_key
from .gpu_table import GPU_STYLES, gpu_cells, holders_cell, holders_column, memory_cell, sum_mark, util_cell
from .host_list import GROUP, HOST_STYLES, seen
from .table import KeyedTable, Refresh

SEVERE = RANKS["ecc"]  # problems up to this rank are drawn as errors, the rest as warnings
FOLDED_RANK = HEALTHY + 1  # group lines come after every GPU row
# The State column grows with its widest problem up to this; longer words give way (their short
# forms). Each time a column grows the table is fitted again and every row drawn again: at a
# thousand hosts that is seconds, so it must happen a few times, not with every new reason.
STATE_ROOM = 16


def _ranks(state: HostState) -> tuple[int, ...]:
    """The rank of the host's worst problem and of each GPU's (its host's included): what places
    its rows under the problems-first sort."""
    worst = (state.worst, *(state.gpu_worst(index) for index in sorted(state.gpus)))
    return tuple(p.rank if p is not None else HEALTHY for p in worst)


def fleet_row_key(host: str, gpu: int | None) -> str:
    # The GPU index goes first: it never contains "@", so the first "@" splits the key.
    return f"{'-' if gpu is None else gpu}@{host}"


def split_row_key(key: str) -> tuple[str, int | None]:
    index, _, host = key.partition("@")
    return host, None if index == "-" else int(index)


def group_row_key(group: str) -> str:
    return GROUP + group


@dataclass
class Share:
    """What one healthy, folded host adds to its group's line."""

    gpus: int = 0
    busy: int = 0
    used: int = 0
    total: int = 0
    util: float = 0.0  # the sum of its GPUs' utilization
    utils: int = 0  # how many gave one
    temp: int | None = None
    cpu: float | None = None
    ram_used: int = 0
    ram_total: int = 0
    models: tuple[str, ...] = ()


class FleetTable(KeyedTable):
    COLUMNS = (
        Column("host", "Host", width=None, nominal=14, cut=True),
        Column("gpu", "GPU", width=3, justify="right"),
        Column("name", "Name", width=None, nominal=18, priority=6, cut=True),
        Column("memory", "Memory", width=21, descending=True),
        Column("util", "Util", width=4, justify="right", descending=True, priority=1),
        Column("temp", "Temp", width=4, justify="right", descending=True, priority=5),
        # The GPU's worst problem (or free, busy); the table's default order: problems first.
        Column("state", "State", width=None, nominal=8, priority=1, cut=True),
        holders_column(priority=2),
        # The host's own load, on each of its GPUs' rows (sort by it to find the busy hosts); the
        # first to go when the table is narrow.
        Column("cpu", "CPU", width=4, justify="right", descending=True, priority=7),
        Column("ram", "RAM", width=None, nominal=12, justify="right", descending=True, priority=8),
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "enter",
            "screen.drill",
            "Open host",
            show=False,
            tooltip="open the GPU's host (a group's line: unfold it)",
        ),
        unfold_key("unfold the group under the cursor: its hosts' GPUs"),
        fold_key("fold the healthy hosts of the group under the cursor into one line"),
    ]
    DEFAULT_SORT = ("state", False)
    # Sorts under which rows out of view keep their place until they are built: by host or GPU (they
    # never change), and by state, whose sort key (the GPU's worst problem's rank, the host's place)
    # `show` builds a host's rows at once for when it changes.
    STEADY_SORTS = frozenset({"host", "gpu", "state"})
    LAZY = True  # rows out of view are held thin, built again by key (build_later)
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *GPU_STYLES,
        *HOST_STYLES,
    }

    HOST_COLUMNS = ("cpu", "ram")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._keys_of: dict[str, set[str]] = {}
        # What a row built later is built from: each host's view and place as last shown, its age.
        self._view_of: dict[str, HostView] = {}
        self._order: Mapping[str, int] = {}  # each host's place in the fleet, as the screen keeps it
        self._ages: dict[str, float | None] = {}
        self._gpus_keyed: dict[str, tuple[Gpu, ...] | None] = {}  # the GPUs each host's keys were made of
        self._keyed_for: tuple[str, bool] = ("", False)  # the filter and free-only they were made for
        # Each host's place and its GPUs' worst ranks as last shown: the state sort's keys.
        self._placed_as: dict[str, tuple[int, tuple[int, ...]]] = {}
        self._metrics_seen = False  # no host's probe sends its load (an older one): no CPU, RAM columns
        self.problems = FleetProblems()  # what is wrong where; the screen gives its own
        self._shares: dict[str, Share] = {}  # healthy folded hosts -> what they add to their group
        self.idle_after = 600.0  # seconds at 0 % SM that make an idle holder (the screen sets it)

    def _need(self, column: Column, cell: Cell) -> int:
        need = super()._need(column, cell)
        return min(need, STATE_ROOM) if column.key == "state" else need

    def available_columns(self) -> tuple[Column, ...]:
        if self._metrics_seen:
            return self.COLUMNS
        return tuple(c for c in self.COLUMNS if c.key not in self.HOST_COLUMNS)

    def show_hosts(
        self,
        views: list[HostView],
        order: dict[str, int],
        query: Query = EVERYTHING,
        free_only: bool = False,
        ages: Mapping[str, float | None] | None = None,
        fleet: Sequence[HostView] | None = None,
        problems: FleetProblems | None = None,
    ) -> None:
        """Refresh the rows of `views` (only those hosts: the others keep their rows), and the lines
        of their groups. `query`: the filter (gputui/views/filter.py); `free_only`: free GPUs only.
        `ages`: how old each host's sample is, said on the rows of a host that is not live.
        `fleet`: every host (default `views`); `problems`: what is wrong where, worked out by the
        caller for `views` (FleetProblems.update), else here.

        Only the rows in the window are built now; the others when they come into it
        (KeyedTable.sync's `later`), except a host whose GPUs' problems changed: its rows move under
        the problems-first sort, so they are built at once. A host whose GPUs are the same objects
        as last time (the app's intake reuses what a sample did not change) keeps its keys."""
        self._ages.update(ages or {})
        self._order = order
        everyone = fleet if fleet is not None else views
        if problems is None:
            problems = self.problems
            problems.update(views, everyone, self.idle_after)
        self.problems = problems
        if not self._metrics_seen and any(v.sample is not None and v.sample.host is not None for v in views):
            self._metrics_seen = True
            self.refit()
        folding = not query and not free_only
        if (query.text, free_only) != self._keyed_for:
            self._keyed_for = (query.text, free_only)
            self._gpus_keyed.clear()  # which rows a host has depends on these: all made again
        batch = Refresh()
        groups: set[str] = set()
        for view in views:
            name = view.name
            group = problems.group(name)
            groups.add(group)
            state = problems.states.get(name) or HostState(name, group)
            if folding and problems.folded(name):
                batch.replace |= self._keys_of.get(name, set())
                self._shares[name] = self._share(view)
                self._keys_of[name] = set()
                self._gpus_keyed.pop(name, None)
                continue
            self._shares.pop(name, None)
            position = order.get(name, 0)
            self._view_of[name] = view
            placed = (position, _ranks(state))
            moved = self._placed_as.get(name) != placed
            self._placed_as[name] = placed
            gpus = view.sample.gpus if view.sample is not None else None
            if folding and gpus and self._gpus_keyed.get(name) is gpus and not moved:
                batch.later.extend(self._keys_of[name])
                continue
            batch.replace |= self._keys_of.get(name, set())
            keys = self.host_keys(view, state, query, free_only)
            self._keys_of[name] = set(keys)
            self._gpus_keyed[name] = gpus
            if moved:
                for key, index in keys.items():
                    row = self.built_row(view, position, index, state)
                    if row is not None:
                        batch.rows[key] = row
            else:
                batch.later.extend(keys)
        for group in sorted(groups):
            key = group_row_key(group)
            batch.replace.add(key)
            if not folding or not problems.folds(group):
                continue
            folded = [h for h in problems.folded_members(group) if h in self._shares]
            if folded:
                batch.rows[key] = self.group_row(group, folded, len(everyone), problems.group_index(group))
        batch.sync(self)

    def rebuildable(self, key: str) -> bool:
        return not key.startswith(GROUP)  # a group's line is summed from its hosts' shares as they come

    def build_later(self, key: str) -> Row | None:
        host, index = split_row_key(key)
        view = self._view_of.get(host)
        if view is None:
            return None
        return self.built_row(view, self._order.get(host, 0), index, self.problems.states.get(host))

    @property
    def folded_hosts(self) -> int:
        """Healthy hosts folded into their groups' lines now."""
        return len(self._shares)

    def sorted_words(self) -> str:
        """The order the rows are in when it is not the default (problems first), for the title:
        `sorted by Memory ▼ (7: problems first)`; "" in the default order."""
        sort = self.sort_column
        if sort is None or sort == self.DEFAULT_SORT:
            return ""
        columns = self.sortable_columns()
        label = next((c.label for c in columns if c.key == sort[0]), sort[0])
        back = next((i for i, c in enumerate(columns, 1) if c.key == self.DEFAULT_SORT[0]), None)
        again = f" ({SORT_KEYS[back - 1]}: problems first)" if back is not None else ""
        return f"sorted by {label} {'▼' if sort[1] else '▲'}{again}"

    def keys_of(self, host: str) -> set[str]:
        """The row keys of `host`'s GPUs shown now."""
        return set(self._keys_of.get(host, ()))

    def _share(self, view: HostView) -> Share:
        sample = view.sample
        share = Share()
        if sample is None:
            return share
        share.gpus = len(sample.gpus)
        share.busy = sum(1 for g in sample.gpus if not gpu_free(view, g))
        share.used = sum(g.memory_used or 0 for g in sample.gpus)
        share.total = sum(g.memory_total or 0 for g in sample.gpus)
        utils = [g.util_gpu for g in sample.gpus if g.util_gpu is not None]
        share.util, share.utils = float(sum(utils)), len(utils)
        temps = [g.temperature for g in sample.gpus if g.temperature is not None]
        share.temp = max(temps) if temps else None
        metrics = sample.host
        if metrics is not None:
            share.cpu = metrics.cpu_percent
            share.ram_used, share.ram_total = metrics.memory_used or 0, metrics.memory_total or 0
        share.models = tuple(g.name for g in sample.gpus if g.name)
        return share

    def group_row(self, group: str, hosts: list[str], fleet_size: int, index: int) -> Row:
        """A group's healthy hosts as one line: how many, their GPUs' memory and utilization, the
        hottest GPU, how many GPUs are busy and free."""
        shares = [self._shares[h] for h in hosts]
        style = self.style_of("host--all")
        muted = self.style_of("gpu--all")
        gpus = sum(s.gpus for s in shares)
        busy = sum(s.busy for s in shares)
        used, total = sum(s.used for s in shares), sum(s.total for s in shares)
        n_utils = sum(s.utils for s in shares)
        util = sum(s.util for s in shares) / n_utils if n_utils else None
        temps = [s.temp for s in shares if s.temp is not None]
        models = Counter(m for s in shares for m in s.models)
        cpus = [s.cpu for s in shares if s.cpu is not None]
        ram_used, ram_total = sum(s.ram_used for s in shares), sum(s.ram_total for s in shares)
        name = Cell.parts(
            ("▸ ", style),
            (fmt.safe(group, 40), style),
            (" · ", muted),
            (str(len(hosts)), muted, True),
            (" " + plural(len(hosts), "host"), muted),
            sort_key=(fleet_size + index, -1),
        )
        model = models.most_common(1)[0][0] if models else "-"
        if len(models) > 1:
            model += f" +{len(models) - 1}"
        holders = Cell(sort_key=(0, -gpus)).add(str(gpus), muted, keep=True).add(" GPUs: ", muted)
        holders.add(str(busy), "", keep=True).add(" busy, ", "").add(
            str(gpus - busy), self.style_of("gpu--free"), keep=True
        ).add(" free", self.style_of("gpu--free"))
        short = (
            Cell(sort_key=holders.sort_key)
            .add(str(busy), "", keep=True)
            .add(" busy ", "")
            .add(str(gpus - busy), self.style_of("gpu--free"), keep=True)
            .add(" free", self.style_of("gpu--free"))
        )
        cpu = sum(cpus) / len(cpus) if cpus else None
        return {
            "host": name,
            "gpu": Cell("-", muted, sort_key=-1),
            "name": Cell(fmt.safe(model, 40), muted),
            "memory": memory_cell(self, used, total, mark=sum_mark(self)),
            "util": util_cell(self, util),
            "temp": Cell(f"{max(temps)}°C" if temps else "-", sort_key=max(temps) if temps else 0),
            "state": Cell("ok", self.style_of("gpu--free"), sort_key=(FOLDED_RANK, index, -1)).with_short(
                Cell("ok", self.style_of("gpu--free"))
            ),
            "holders": holders.with_short(short),
            "cpu": Cell(fmt_percent(cpu), sort_key=cpu if cpu is not None else -1.0),
            "ram": Cell(
                fmt_memory_of(ram_used, ram_total, self.exact_memory) if ram_total else "-",
                sort_key=ram_used / ram_total if ram_total else -1.0,
            ),
        }

    @property
    def cursor_group(self) -> str | None:
        """The group of the line under the cursor, a group's line or a GPU of one of its hosts."""
        key = self.cursor_key
        if key is None:
            return None
        if key.startswith(GROUP):
            return key.removeprefix(GROUP)
        host, _ = split_row_key(key)
        return self.problems.group(host)

    @property
    def on_group_row(self) -> bool:
        key = self.cursor_key
        return key is not None and key.startswith(GROUP)

    def action_unfold(self) -> None:
        group = self.cursor_group
        if group is not None and self.on_group_row:
            self.post_message(self.FoldChanged(group, folded=False))

    def action_fold(self) -> None:
        group = self.cursor_group
        if group is not None and not self.on_group_row and group in self.problems.unfolded:
            self.post_message(self.FoldChanged(group, folded=True))

    class FoldChanged(Message):
        """The operator folded or unfolded a group: the screen redraws the fleet."""

        def __init__(self, group: str, folded: bool) -> None:
            super().__init__()
            self.group = group
            self.folded = folded

    # -- rows ----------------------------------------------------------------------------------

    def host_keys(
        self, view: HostView, state: HostState, query: Query, free_only: bool
    ) -> dict[str, int | None]:
        """The keys of `view`'s rows (and the GPU index of each; None: the host's placeholder row):
        what `host_rows` would build, without building it."""
        sample = view.sample
        keys: dict[str, int | None] = {}
        if sample is None or not sample.gpus:
            if not free_only and (not query or query.matches(host_subject(view, state))):
                keys[fleet_row_key(view.name, None)] = None
            return keys
        live = view.status == LIVE
        for gpu in sample.gpus:
            if free_only and not (live and gpu_free(view, gpu)):
                continue
            if query and not query.matches(gpu_subject(view, state, gpu)):
                continue
            keys[fleet_row_key(view.name, gpu.index)] = gpu.index
        return keys

    def built_row(
        self, view: HostView, position: int, index: int | None, state: HostState | None
    ) -> Row | None:
        """One row of `view` as it is now: its GPU `index` (None: its placeholder); None when the
        GPU is gone since its key was made (the next refresh drops the key)."""
        sample = view.sample
        if index is None:
            return self.placeholder(view, position, state)
        gpu = next((g for g in sample.gpus if g.index == index), None) if sample is not None else None
        if sample is None or gpu is None:
            return None
        free = view.status == LIVE and gpu_free(view, gpu)
        return self.row(view, position, sample, gpu, free, state)

    def host_rows(
        self, view: HostView, position: int, state: HostState, query: Query, free_only: bool
    ) -> dict[str, Row]:
        """Every row of `view`, built."""
        rows: dict[str, Row] = {}
        for key, index in self.host_keys(view, state, query, free_only).items():
            row = self.built_row(view, position, index, state)
            if row is not None:
                rows[key] = row
        return rows

    def state_cell(
        self, view: HostView, position: int, gpu: int, free: bool, state: HostState | None
    ) -> Cell:
        """The GPU's worst problem (and how many more), or free, busy; sorted problems first."""
        worst = state.gpu_worst(gpu) if state is not None else None
        rank = worst.rank if worst is not None else HEALTHY
        sort_key = (rank, position, gpu)
        live = view.status == LIVE
        if worst is not None:
            style = self._problem_style(worst)
            more = state.gpu_count(gpu) - 1 if state is not None else 0
            tail = f" +{more}" if more else ""
            cell = Cell(fmt.safe(worst.text(self.exact_memory), 60) + tail, style, sort_key=sort_key)
            return cell.with_short(
                Cell(fmt.safe(worst.short or worst.words, 20) + tail, style, sort_key=sort_key)
            )
        if not live:
            status = view.shown_status
            return Cell(status, self.style_of(f"host--{status}"), sort_key=sort_key)
        if free:
            return Cell("free", self.style_of("gpu--free"), sort_key=sort_key)
        return Cell("busy", sort_key=sort_key)

    def _problem_style(self, problem: Problem) -> Style:
        if problem.state in ("down", "stale"):
            return self.style_of(f"host--{problem.state}")
        return self.style_of("gpu--error" if problem.rank <= SEVERE else "gpu--warn")

    def row(
        self,
        view: HostView,
        position: int,
        sample: Sample,
        gpu: Gpu,
        free: bool,
        state: HostState | None = None,
    ) -> Row:
        live = view.status == LIVE
        unfit = (gpu.index,) if severe_problems(view, gpu) else ()
        holders = holders_cell(self, sample, (gpu,), live=live, unfit=unfit)
        if gpu.error:
            holders = Cell(f"error: {fmt.safe(gpu.error, 40)}", self.style_of("gpu--error"), sort_key=(3, 0))
        if not live:
            holders = self.aged(holders, self._ages.get(view.name))
        row: Row = {
            "host": Cell(fmt.safe(view.name, 40), sort_key=(position, gpu.index)),
            **gpu_cells(self, gpu, free),
            "state": self.state_cell(view, position, gpu.index, free, state),
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

    def placeholder(self, view: HostView, position: int, state: HostState | None = None) -> Row:
        """A host with no GPU to list: say why (connecting, down and the reason, no driver)."""
        facts = view.facts
        status = view.shown_status
        if status in (DOWN, STALE):
            code = view.reason or view.last_down or status
            why = REASONS.get(code, code)
        elif facts is not None and facts.error_code:
            why = REASONS.get(facts.error_code, facts.error_code)
        elif status == CONNECTING:
            why = "connecting…"
        else:
            why = "no GPU"
        status_style = self.style_of(f"host--{status}") if status in (LIVE, STALE, DOWN, CONNECTING) else ""
        worst = state.worst if state is not None else None
        rank = worst.rank if worst is not None else HEALTHY
        blank = Cell("", sort_key=-1)
        return {
            "host": Cell(fmt.safe(view.name, 40), sort_key=(position, -1)),
            "gpu": Cell("-", sort_key=-1),
            "name": blank,
            "memory": Cell("", sort_key=-1.0),
            "util": Cell("", sort_key=-1.0),
            "temp": blank,
            "state": Cell(status, status_style, sort_key=(rank, position, -1)),
            "holders": Cell(fmt.safe(why, 60), self.style_of("gpu--warn"), sort_key=(4, 0)),
            **self.host_cells(view.sample.host if view.sample is not None else None),
        }

    @property
    def cursor_gpu(self) -> tuple[str, int | None] | None:
        """(host, GPU) under the cursor; None on a group's line (no one host)."""
        key = self.cursor_key
        if key is None or key.startswith(GROUP):
            return None
        return split_row_key(key)

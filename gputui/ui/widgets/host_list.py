"""The host list: "All hosts" (the fleet table) first, then each host with its status and busy GPUs.

At a thousand hosts: the hosts with a problem first, worst first (gputui/views/problems.py),
then each group's healthy hosts folded into the group's line (`▸ gpu · 1000`, their busy and total
GPUs) where the group has enough of them; enter or + unfolds a group, - folds it again (the fleet
table folds and unfolds with it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message

from gputui.fleet.session import CONNECTING, DOWN, LIVE, STALE, HostView
from gputui.views.problems import FleetProblems, gpu_free

from .. import fmt
from .cells import Cell, Row
from .columns import Column
from .fold_keys import fold_key, unfold_key
from .table import KeyedTable, Refresh

ALL_HOSTS = "\x00all"  # row key of the fleet entry; no host name holds a NUL
GROUP = (
    "\x00group:"  # row key prefix of a group's line (here and in the fleet table); no host name holds a NUL
)
DOTS = {LIVE: "●", STALE: "◐", DOWN: "✕", CONNECTING: "◌"}


def busy_total(view: HostView) -> tuple[int, int]:
    """(busy, total) GPUs of a host, as a live sample says; a host that is not live has none it can
    say anything about now: its GPUs are `not_live`, neither busy nor free."""
    sample = view.sample
    if sample is None or view.status != LIVE:
        return 0, 0
    total = len(sample.gpus)
    return total - sum(1 for g in sample.gpus if gpu_free(view, g)), total


def not_live(view: HostView) -> int:
    """The GPUs of a host that is not live, as its last sample had them (0 when live)."""
    return len(view.sample.gpus) if view.sample is not None and view.status != LIVE else 0


def seen(age: float | None) -> str:
    """How old what a host last said is: `last seen 2m ago`."""
    return f"last seen {fmt.age(age)} ago" if age is not None else "never seen"


def status_word(view: HostView, age: float | None) -> str:
    """Short: the sample age while live, else the state."""
    status = view.shown_status
    if status == LIVE:
        if view.facts is not None and view.facts.error_code:
            return "no GPU"
        return fmt.age(age)
    if status == CONNECTING:
        return "queued" if view.phase == "queued" else "conn…"  # waiting for a handshake slot
    return status


# How a host's row is styled, by its status: the host list's, and the fleet table's host lines.
HOST_STYLES = {"host--live", "host--stale", "host--down", "host--connecting", "host--all"}


class HostList(KeyedTable):
    COLUMNS = (
        Column("name", "Host", width=None, nominal=9, flex=True, cut=True),
        Column("gpus", "Busy", width=5, justify="right"),
        Column("age", "Age", width=5, justify="right", priority=1),
    )
    DEFAULT_SORT = ("name", False)
    STEADY_SORTS = frozenset({"name"})  # by the host's place in the fleet: rows out of view wait
    LAZY = True  # rows out of view are held thin, built again by key (build_later)
    SORTABLE = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *HOST_STYLES,
        "gpu--stale",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "enter",
            "screen.drill",
            "Open",
            show=False,
            tooltip="open the host (or the fleet table; a group: unfold it)",
        ),
        unfold_key("unfold the group under the cursor"),
        fold_key("fold the group of the host under the cursor"),
    ]

    class FoldChanged(Message):
        """The operator folded or unfolded a group: the screen redraws the list and the fleet."""

        def __init__(self, group: str, folded: bool) -> None:
            super().__init__()
            self.group = group
            self.folded = folded

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._position: dict[str, int] = {}
        self.problems: FleetProblems | None = None
        # What a row built later is built from (KeyedTable.build_later): as last shown.
        self._view_of: dict[str, HostView] = {}
        self._age_of: dict[str, float | None] = {}
        self._busy: Mapping[str, tuple[int, int]] = {}
        self._placed_as: dict[str, tuple[int, ...]] = {}  # each host's sort key as last shown

    def show(
        self,
        views: Iterable[HostView],
        ages: Mapping[str, float | None],
        busy: Mapping[str, tuple[int, int]],
        fleet: list[HostView] | None = None,
        problems: FleetProblems | None = None,
    ) -> None:
        """Refresh the rows of `views`; with `fleet` (every host), also the "All hosts" summary.

        `busy` holds (busy, total) GPUs per host, computed once per sample by the caller.
        `problems`: what is wrong where (problems first) and which groups fold (their lines).
        Only the rows in the window are built now (KeyedTable.sync's `later`), and those of hosts
        whose place changed (a problem came or went: they move)."""
        self.problems = problems
        self._busy = busy
        batch = Refresh()
        groups: set[str] = set()
        for view in views:
            name = view.name
            position = self._position.setdefault(name, len(self._position))
            if problems is not None:
                groups.add(problems.group(name))
                if problems.folded(name):
                    batch.replace.add(name)  # in its group's line
                    self._placed_as.pop(name, None)
                    continue
            self._view_of[name] = view
            self._age_of[name] = ages.get(name)
            place = self.place(name, position)
            if self._placed_as.get(name) != place:
                self._placed_as[name] = place
                built = self.build_later(name)
                if built is not None:
                    batch.rows[name] = built
            else:
                batch.later.append(name)
        if problems is not None:
            for group in groups:
                key = GROUP + group
                batch.replace.add(key)
                folded = problems.folded_members(group)
                if folded:
                    batch.rows[key] = self.group_row(group, folded, busy, problems.group_index(group))
        if fleet is not None:
            batch.rows[ALL_HOSTS] = self.all_row(fleet, busy)
        batch.sync(self)

    def rebuildable(self, key: str) -> bool:
        return key in self._view_of  # a host's row: not a group's line, nor "All hosts"

    def build_later(self, key: str) -> Row | None:
        view = self._view_of.get(key)
        if view is None:
            return None
        position = self._position[key]
        row = self.row(view, self._age_of.get(key), self._busy.get(key, (0, 0)), position)
        return self.placed(row, key, position)

    def place(self, host: str, position: int) -> tuple[int, ...]:
        """Where `host`'s row sorts: the hosts with a problem first, worst first; then by group."""
        problems = self.problems
        state = problems.states.get(host) if problems is not None else None
        worst = state.worst if state is not None else None
        if worst is not None:
            return (0, worst.rank, position)
        if problems is not None:
            return (1, problems.group_index(problems.group(host)), position)
        return (1, 0, position)

    def shown_order(self, hosts: Iterable[str]) -> list[str]:
        """`hosts` in the order this list shows them (`place`): a host folded into its group's line
        at that line's place. A host not yet listed comes after the others, as the fleet has them."""
        unlisted = len(self._position)
        order = {h: self._position.get(h, unlisted + i) for i, h in enumerate(hosts)}
        return sorted(order, key=lambda h: self.place(h, order[h]))

    def placed(self, row: Row, host: str, position: int) -> Row:
        """`row` sorted where it belongs (`place`)."""
        row["name"].sort_key = self.place(host, position)
        return row

    def group_row(self, group: str, hosts: list[str], busy: Mapping[str, tuple[int, int]], index: int) -> Row:
        """A group's healthy hosts as one line: how many, their busy and total GPUs."""
        style = self.style_of("host--all")
        used = sum(busy.get(h, (0, 0))[0] for h in hosts)
        total = sum(busy.get(h, (0, 0))[1] for h in hosts)
        name = Cell.parts(
            ("▸ ", style),
            (fmt.safe(group, 40), style),
            (" · ", ""),
            (str(len(hosts)), "", True),
            sort_key=(1, index, -1),
        )
        return {
            "name": name,
            "gpus": Cell(f"{used}/{total}", sort_key=(1, index, -1)),
            "age": Cell("", sort_key=(1, index, -1)),
        }

    @property
    def cursor_group(self) -> str | None:
        """The group whose line is under the cursor, or None."""
        key = self.cursor_key
        return key.removeprefix(GROUP) if key is not None and key.startswith(GROUP) else None

    def action_unfold(self) -> None:
        group = self.cursor_group
        if group is not None:
            self.post_message(self.FoldChanged(group, folded=False))

    def action_fold(self) -> None:
        host = self.cursor_host
        problems = self.problems
        if host is not None and problems is not None and problems.group(host) in problems.unfolded:
            self.post_message(self.FoldChanged(problems.group(host), folded=True))

    def row(self, view: HostView, age: float | None, busy_total: tuple[int, int], position: int) -> Row:
        status = view.shown_status
        style = self.style_of(f"host--{status}")
        if status == LIVE and view.facts is not None and view.facts.error_code:
            style = self.style_of("host--stale")
        busy, total = busy_total
        name = Cell.parts(
            (DOTS.get(status, "?") + " ", style), (fmt.safe(view.name, 40), ""), sort_key=position
        )
        gpus = Cell(f"{busy}/{total}" if total else "-", sort_key=position)
        if unknown := not_live(view):  # what its last sample had: busy or not, nobody knows now
            gpus = Cell(f"?/{unknown}", self.style_of("gpu--stale"), sort_key=position)
        return {
            "name": name,
            "gpus": gpus,
            "age": Cell(status_word(view, age), style if status != LIVE else "", sort_key=position),
        }

    def all_row(self, fleet: list[HostView], busy: Mapping[str, tuple[int, int]]) -> Row:
        used = sum(busy.get(v.name, (0, 0))[0] for v in fleet)
        total = sum(busy.get(v.name, (0, 0))[1] for v in fleet)
        style = self.style_of("host--all")
        return {
            "name": Cell("All hosts", style, sort_key=(-1,)),
            "gpus": Cell(f"{used}/{total}", style, sort_key=-1),
            "age": Cell("", sort_key=-1),
        }

    @property
    def cursor_host(self) -> str | None:
        """The host under the cursor; None on "All hosts" and on a group's line."""
        key = self.cursor_key
        return None if key is None or key == ALL_HOSTS or key.startswith(GROUP) else key

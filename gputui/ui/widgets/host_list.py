"""The host list: "All hosts" (the fleet table) first, then each host with its status and busy GPUs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar

from textual.binding import Binding, BindingType

from gputui.fleet import CONNECTING, DOWN, LIVE, STALE, HostView

from .. import fmt
from .cells import Cell, Row
from .table import Column, KeyedTable

ALL_HOSTS = "\x00all"  # row key of the fleet entry; no host name holds a NUL
DOTS = {LIVE: "●", STALE: "◐", DOWN: "✕", CONNECTING: "◌"}


def busy_total(view: HostView) -> tuple[int, int]:
    """(busy, total) GPUs of a host, as a live sample says; a host that is not live has none it can
    say anything about now: its GPUs are `not_live`, neither busy nor free (issue 19)."""
    sample = view.sample
    if sample is None or view.status != LIVE:
        return 0, 0
    total = len(sample.gpus)
    return total - sum(1 for g in sample.gpus if sample.gpu_is_free(g)), total


def not_live(view: HostView) -> int:
    """The GPUs of a host that is not live, as its last sample had them (0 when live)."""
    return len(view.sample.gpus) if view.sample is not None and view.status != LIVE else 0


def seen(age: float | None) -> str:
    """How old what a host last said is: `last seen 2m ago`."""
    return f"last seen {fmt.age(age)} ago" if age is not None else "never seen"


def status_word(view: HostView, age: float | None) -> str:
    """Short: the sample age while live, else the state."""
    if view.status == LIVE:
        if view.facts is not None and view.facts.error_code:
            return "no GPU"
        return fmt.age(age)
    if view.status == CONNECTING:
        return "conn…"
    return view.status


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
        "host--live",
        "host--stale",
        "host--down",
        "host--connecting",
        "host--all",
        "gpu--stale",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "screen.drill", "Open", show=False, tooltip="open the host (or the fleet table)"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._position: dict[str, int] = {}
        # What a row built later is built from (KeyedTable.build_later): as last shown.
        self._view_of: dict[str, HostView] = {}
        self._age_of: dict[str, float | None] = {}
        self._busy: Mapping[str, tuple[int, int]] = {}

    def show(
        self,
        views: Iterable[HostView],
        ages: Mapping[str, float | None],
        busy: Mapping[str, tuple[int, int]],
        fleet: list[HostView] | None = None,
    ) -> None:
        """Refresh the rows of `views`; with `fleet` (every host), also the "All hosts" summary.

        `busy` holds (busy, total) GPUs per host, computed once per sample by the caller. Only the
        rows in the window are built now (KeyedTable.sync's `later`)."""
        rows: dict[str, Row] = {}
        later: list[str] = []
        self._busy = busy
        for view in views:
            name = view.name
            self._position.setdefault(name, len(self._position))
            self._view_of[name] = view
            self._age_of[name] = ages.get(name)
            later.append(name)
        if fleet is not None:
            rows[ALL_HOSTS] = self.all_row(fleet, busy)
        self.sync(rows, replace=(), later=later)

    def build_later(self, key: str) -> Row | None:
        view = self._view_of.get(key)
        if view is None:
            return None
        return self.row(view, self._age_of.get(key), self._busy.get(key, (0, 0)), self._position[key])

    def row(self, view: HostView, age: float | None, busy_total: tuple[int, int], position: int) -> Row:
        status = view.status
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
            "name": Cell("All hosts", style, sort_key=-1),
            "gpus": Cell(f"{used}/{total}", style, sort_key=-1),
            "age": Cell("", sort_key=-1),
        }

    @property
    def cursor_host(self) -> str | None:
        """The host under the cursor; None on "All hosts"."""
        key = self.cursor_key
        return None if key == ALL_HOSTS else key

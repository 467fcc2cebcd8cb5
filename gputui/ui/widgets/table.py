"""`KeyedTable`: a DataTable that is updated in place, by row key, and fits its columns to its width.

Every refresh hands `sync()` the rows that should be shown, keyed. Rows whose key vanished are removed,
cells whose content changed are updated, new rows are added, and the rows are re-sorted only when
something that affects the order changed. The cursor follows its row's key; the scroll offset is
left alone. Nothing is cleared, so a refresh costs what changed, not what is shown
(the approach of Dolphie's process list).

A changed cell repaints only its row. DataTable's own `update_cell` bumps a table-wide counter that
is part of every render cache key and repaints the whole widget, so one changed cell re-renders every
visible cell at the next paint (at 128 hosts, 90 % of the app's paint time). `sync` stores the cell
itself, drops that row's cache entries before the next render and marks only the row's line dirty.
Adding, removing and sorting rows still go through DataTable (they change every row's place).

Columns have a priority: when the table is narrower than all of them need, the least important ones
are left out, and put back when there is room (the only time the table is rebuilt).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from rich.console import JustifyMethod
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowDoesNotExist, RowKey


class Cell(Text):
    """Text that knows how it sorts: `DataTable.sort` hands its key function cells, not rows."""

    __slots__ = ("sort_key",)

    def __init__(self, text: str = "", style: str | Style = "", sort_key: Any = None) -> None:
        super().__init__(text, style=style, no_wrap=True, overflow="ellipsis", end="")
        self.sort_key = text.casefold() if sort_key is None else sort_key

    @classmethod
    def parts(cls, *parts: tuple[str, str | Style], sort_key: Any = None) -> Cell:
        """A cell from (text, style) pieces, e.g. a meter's filled and empty parts."""
        cell = cls("", sort_key=sort_key if sort_key is not None else "")
        for text, style in parts:
            if text:
                cell.append(text, style or None)
        if sort_key is None:
            cell.sort_key = cell.plain.casefold()
        return cell

    def signature(self) -> Hashable:
        return (self.plain, self.style, tuple(self.spans))


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    label: str
    width: int | None = None  # None: as wide as the widest cell
    priority: int = 0  # 0: always shown; higher numbers are dropped first when space runs out
    nominal: int = 12  # the width to plan for when `width` is None
    descending: bool = False  # the first sort on this column puts the largest values on top
    justify: JustifyMethod = "left"
    flex: bool = False  # takes the width the other columns leave (at least `nominal`)
    sortable: bool = True  # counted by the 1-9 sort keys

    @property
    def planned(self) -> int:
        return self.width if self.width is not None else self.nominal


Row = dict[str, Cell]

SORT_KEYS = "123456789"


class KeyedTable(DataTable[Cell]):
    """Subclasses define COLUMNS and call `sync()`; digits 1-9 (or a header click) sort."""

    class Refitted(Message):
        """The columns changed with the width: cells that adapt to their width need a new sync."""

    COLUMNS: ClassVar[tuple[Column, ...]] = ()
    DEFAULT_SORT: ClassVar[tuple[str, bool] | None] = None  # (column key, reverse)
    SORTABLE: ClassVar[bool] = True  # False: always DEFAULT_SORT, no sort keys
    # Styles of the cells come from component classes, so the .tcss (and the theme) decide them.
    COMPONENT_CLASSES: ClassVar[set[str]] = set()

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "Top", show=False),
        Binding("G", "scroll_bottom", "Bottom", show=False),
        Binding("1", "sort_column(1)", "Sort", key_display="1-9", show=True),
        *[Binding(d, f"sort_column({d})", f"Sort by column {d}", show=False) for d in SORT_KEYS[1:]],
    ]

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        # "renderable": the cursor row keeps the cells' colours (kinds, free GPUs) and adds its background.
        super().__init__(
            id=id,
            classes=classes,
            cursor_type="row",
            zebra_stripes=False,
            cursor_foreground_priority="renderable",
        )
        self._rows: dict[str, Row] = {}
        self._sort: tuple[str, bool] | None = self.DEFAULT_SORT
        self._shown: tuple[Column, ...] = ()
        self._widths: dict[str, int] = {}
        self._palette: dict[str, Style] = {}
        self._palette_theme = ""
        self._stale_rows: set[RowKey] = set()  # updated in place: their cache entries go before a render
        self._cache_epoch = -1  # DataTable's _update_count when the render caches were last emptied
        self.changes = 0  # cells updated and rows added or removed since mounting (what a redraw did)

    # -- styles ------------------------------------------------------------------------------

    def style_of(self, name: str) -> Style:
        """The Rich style of component class `name`, cached until the theme changes.

        Cells keep the style they were made with: after a theme change the owner re-syncs the
        table, the new styles change the cells' signatures, and those cells are updated."""
        if self._palette_theme != self.app.theme:
            self._palette.clear()
            self._palette_theme = self.app.theme
        style = self._palette.get(name)
        if style is None:
            style = self._palette[name] = self.get_component_rich_style(name, partial=True)
        return style

    # -- columns -----------------------------------------------------------------------------

    def available_columns(self) -> tuple[Column, ...]:
        return self.COLUMNS

    def _fit(self, width: int) -> tuple[Column, ...]:
        """The columns that fit in `width` cells, most important first; a flex column gets the rest."""
        columns = self.available_columns()
        budget = width - 1  # the vertical scrollbar
        chosen: set[str] = set()
        if self.SORTABLE:  # room for the sort arrow next to the label
            columns = tuple(
                replace(c, width=len(c.label) + 1)
                if c.sortable and c.width is not None and c.width <= len(c.label)
                else c
                for c in columns
            )
        for column in sorted(columns, key=lambda c: c.priority):
            need = column.planned + 2 * self.cell_padding
            if column.priority > 0 and need > budget:
                continue
            chosen.add(column.key)
            budget -= need
        return tuple(
            replace(c, width=c.nominal + max(budget, 0)) if c.flex else c for c in columns if c.key in chosen
        )

    def _on_resize(self, event: events.Resize) -> None:
        super()._on_resize(event)
        self.refit()

    def width_of(self, column: str) -> int:
        """The width column `column` has now (0 when it is not shown)."""
        return self._widths.get(column, 0)

    def refit(self) -> None:
        """Choose the columns for the current width; rebuild only when the choice changed."""
        if self.size.width <= 0:
            return
        shown = self._fit(self.size.width)
        if shown != self._shown:
            self._rebuild(shown)

    def _rebuild(self, shown: tuple[Column, ...]) -> None:
        cursor = self.cursor_key
        self._shown = shown
        self._widths = {c.key: c.planned for c in shown}
        with self.app.batch_update():
            self.clear(columns=True)
            for column in shown:
                self.add_column(self._label(column), width=column.width, key=column.key)
            for key, row in self._rows.items():
                for column in shown:
                    row[column.key].justify = column.justify
                self.add_row(*(row[c.key] for c in shown), key=key)
            self._apply_sort()
            self.move_to(cursor)
        self.post_message(self.Refitted())

    def _label(self, column: Column) -> Text:
        if not (self.SORTABLE and column.sortable):
            return Text(column.label, justify=column.justify)
        arrow = " "  # kept when unsorted, so the width never changes
        if self._sort is not None and self._sort[0] == column.key:
            arrow = "▼" if self._sort[1] else "▲"
        label = arrow + column.label if column.justify == "right" else column.label + arrow
        return Text(label, justify=column.justify)

    # -- rows --------------------------------------------------------------------------------

    @property
    def cursor_key(self) -> str | None:
        """The key of the row under the cursor."""
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # the coordinate is out of range while rows are being replaced
            return None

    def move_to(self, key: str | None, scroll: bool = False) -> bool:
        """Put the cursor on row `key` (if it exists); the scroll offset moves only if it must."""
        if key is None:
            return False
        try:
            index = self.get_row_index(key)
        except RowDoesNotExist:
            return False
        if index != self.cursor_row:
            self.move_cursor(row=index, scroll=scroll)
        return True

    def sync(self, rows: Mapping[str, Row], replace: Collection[str] | None = None) -> bool:
        """Make the table show `rows`. Rows not in `rows` are removed if their key is in `replace`
        (default: every row), so a caller can refresh one part (one host) of a big table.

        Returns True when rows were added, removed or reordered."""
        if not self._shown:
            self.refit()
            if not self._shown:
                self._shown = self._fit(200)
                self._widths = {c.key: c.planned for c in self._shown}
                for column in self._shown:
                    self.add_column(self._label(column), width=column.width, key=column.key)
        cursor = self.cursor_key
        sort_key = self._sort[0] if self._sort else None
        reorder = False
        with self.app.batch_update():
            candidates = self._rows.keys() if replace is None else replace
            for key in [k for k in candidates if k in self._rows and k not in rows]:
                del self._rows[key]
                self.remove_row(key)
                self.changes += 1
                reorder = True
            for key, row in rows.items():
                for column in self._shown:
                    row[column.key].justify = column.justify
                old = self._rows.get(key)
                self._rows[key] = row
                if old is None:
                    self.add_row(*(row[c.key] for c in self._shown), key=key)
                    self.changes += 1
                    reorder = True
                    continue
                for column in self._shown:
                    new = row[column.key]
                    if new.signature() != old[column.key].signature():
                        self._put(key, column.key, new)
                        if column.key == sort_key and new.sort_key != old[column.key].sort_key:
                            reorder = True
            if reorder:
                self._apply_sort()
                self.move_to(cursor)
        return reorder

    # -- updating cells in place -------------------------------------------------------------

    def _put(self, key: str, column: str, cell: Cell) -> None:
        """`update_cell` for a cell that keeps its width, at the cost of one row, not of the table."""
        row_key = RowKey(key)
        self._data[row_key][ColumnKey(column)] = cell
        self.changes += 1
        if row_key not in self._stale_rows:
            self._stale_rows.add(row_key)
            index = self._row_locations.get(row_key)
            if index is not None:  # KeyedTable's rows are one line high: row i is line i below the header
                y = index + (self.header_height if self.show_header else 0)
                self._refresh_region(Region(0, y, max(self.size.width, self.virtual_size.width), 1))

    def _forget_stale_rows(self) -> None:
        """Drop the render cache entries of the rows updated in place since the last render.

        The caches are keyed by row key (cells, rows), row index (renderables) or line (lines); one
        pass over each, however many rows changed."""
        stale, self._stale_rows = self._stale_rows, set()
        indexes = {i for i in map(self._row_locations.get, stale) if i is not None}
        header = self.header_height if self.show_header else 0
        lines = {i + header for i in indexes}
        # The four caches differ in key type; only each key's `part` is looked at.
        passes: tuple[tuple[LRUCache[Any, Any], int, Collection[Hashable]], ...] = (
            (self._cell_render_cache, 0, stale),
            (self._row_render_cache, 0, stale),
            (self._row_renderable_cache, 1, indexes),
            (self._line_cache, 0, lines),
        )
        for cache, part, dropped in passes:
            for cache_key in [k for k in cache.keys() if k[part] in dropped]:  # noqa: SIM118 (not iterable)
                cache.discard(cache_key)

    def _empty_caches(self) -> None:
        """Every DataTable render cache key holds `_update_count`, which adding, removing and sorting
        rows bump: from then on no old entry can be hit again, but each LRU cache keeps up to 10,000
        of them until they are pushed out. Drop them at once, so the caches hold what is shown."""
        self._cache_epoch = self._update_count
        self._stale_rows.clear()
        for cache in (
            self._cell_render_cache,
            self._row_render_cache,
            self._row_renderable_cache,
            self._line_cache,
        ):
            cache.clear()

    def render_lines(self, crop: Region) -> list[Strip]:
        if self._update_count != self._cache_epoch:
            self._empty_caches()
        elif self._stale_rows:
            self._forget_stale_rows()
        return super().render_lines(crop)

    def forget(self) -> None:
        """Drop every row (a different host is shown now: this is a new table, not a refresh)."""
        self._rows.clear()
        with self.app.batch_update():
            self.clear()

    def rows_data(self) -> Mapping[str, Row]:
        return self._rows

    # -- sorting -----------------------------------------------------------------------------

    def _apply_sort(self) -> None:
        if self._sort is None or not self.row_count:
            return
        column, reverse = self._sort
        if ColumnKey(column) not in self.columns:
            return
        self.sort(column, key=_sort_key, reverse=reverse)

    def sort_by(self, column: str, reverse: bool | None = None) -> None:
        """Sort by `column`; `reverse=None` flips the order when it already sorts by it."""
        spec = next((c for c in self._shown if c.key == column), None)
        if spec is None or not spec.sortable:
            return
        if reverse is None:
            if self._sort is not None and self._sort[0] == column:
                reverse = not self._sort[1]
            else:
                reverse = spec.descending
        cursor = self.cursor_key
        self._sort = (column, reverse)
        for c in self._shown:
            self.columns[ColumnKey(c.key)].label = self._label(c)
        self._apply_sort()
        self.move_to(cursor, scroll=True)

    @property
    def sort_column(self) -> tuple[str, bool] | None:
        return self._sort

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "sort_column":
            return self.SORTABLE
        return True

    def sortable_columns(self) -> list[Column]:
        """The shown columns that the keys 1-9 sort by, in order."""
        return [c for c in self._shown if c.sortable] if self.SORTABLE else []

    def action_sort_column(self, number: int) -> None:
        columns = self.sortable_columns()
        if 1 <= number <= len(columns):
            self.sort_by(columns[number - 1].key)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        if self.SORTABLE and event.column_key.value is not None:
            self.sort_by(event.column_key.value)


def _sort_key(cell: Cell) -> Any:
    return cell.sort_key

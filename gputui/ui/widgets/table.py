"""`KeyedTable`: a DataTable that is updated in place, by row key, and fits its columns to its width.

Every refresh hands `sync()` the rows that should be shown, keyed. Rows whose key vanished are removed,
cells whose content changed are updated, new rows are added, and the rows are re-sorted only when
something that affects the order changed. The cursor follows its row's key; the scroll offset is
left alone (the columns laid out again keep it too: `keep_view`), and moves only where a row that
came pushed the cursor out of view. Nothing is cleared, so a refresh costs what changed, not what
is shown (the approach of Dolphie's process list).

A changed cell repaints only its row. DataTable's own `update_cell` bumps a table-wide counter that
is part of every render cache key and repaints the whole widget, so one changed cell re-renders every
visible cell at the next paint (at 128 hosts, 90 % of the app's paint time). `sync` stores the cell
itself, drops that row's cache entries before the next render and marks only the row's line dirty.
Adding, removing and sorting rows still go through DataTable (they change every row's place).

A table of thousands of rows builds only what can be seen. `sync` may be handed the
keys of rows that changed (`later`), which the subclass builds when asked (`build_later`): a row
whose key is new, or that is in the window (the rows in view and WINDOW_MARGIN rows about), is
built at once; the others keep their cells and are built when they come into the window (the table
scrolls to them, the cursor moves there, rows come or go above them). A waiting row costs its key
in a set: nothing is allocated for it on every sample. A `LAZY` table (one whose subclass builds
rows by key) also holds the rows out of the window thin: the cells that place them (those of
STEADY_SORTS) and, for the others, a shared blank as wide as the cell was (so the columns keep
their widths); they wait in the same set and are built again when they come into the window.
16,384 rows of rich cells were a quarter of the app's objects at 4,096 hosts. This holds while the
table is sorted by a column in `STEADY_SORTS` (one whose sort keys do not change with a row's data,
such as the host's place in the fleet, or change only where the subclass builds the row at once:
the fleet table's problems-first State); sorted by readings, every row is built, since its place
depends on them. A row the cursor is not on renders the same wherever the cursor is
(`_render_line_in_row`): a key held down re-renders two rows, not every row in view.

Columns have a priority: when the table is narrower than all of them need, the least important ones
are left out, and put back when there is room. The columns come in their priority order up to the
first one that does not fit (never a later, smaller one in its place: a wider pane never shows fewer
columns); the column the table is sorted by comes right after those that always show, so the sort
is always in view, arrow and all. The flexible column (a command, the holders) takes what the others
leave, and before the optional columns of its `room_priority` come it grows to `room`, or to what
its cells need if that is less.

What a cell shows is true or shows that it is cut: a table is never wider than its pane, so
its right edge cuts nothing. A column of numbers (`cut=False`: PIDs, memory, GPU indexes) is as wide
as its widest cell, and grows when a wider one comes; a column of words (`cut=True`) gives way with
an ellipsis, and inside such a cell the numbers marked `keep` stay whole: the words before them give
way first (`dead PID; memo… 4125299…`), and a number that cannot fit is left out whole, never cut.
The table is rebuilt only when the columns (or their widths) change. A cut cell fills its column:
a cell may carry a shorter form (`Cell.short`: glyphs for words) that a narrow column shows instead,
and a `whole` column is at least as wide as its cells need to keep their numbers, so no number
leaves blank space behind an ellipsis where the table had room for it.

The keys 1-9 (and 0 for the tenth) sort by a column's place among all the table's sortable columns,
shown or not, so a key means the same column at every width; the sort brings its column into view.
A sort on a column that is not shown all the same (the config's [columns] hides it, or even it does
not fit) is kept, and `hidden_sort` names it for the pane's title.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowDoesNotExist

from .._textual import InPlaceTable
from .cells import Cell, Row, fit, whole_width
from .columns import SORT_KEYS, Column, fit_columns

WINDOW_MARGIN = 4  # rows built beyond those in view, above and below


@dataclass(slots=True)
class Refresh:
    """One refresh of a part of a table (some hosts of it), gathered row by row, then handed to
    `KeyedTable.sync`: the rows built now, the keys of the rows built later, and the keys whose rows
    go unless they are among those."""

    rows: dict[str, Row] = field(default_factory=dict)
    later: list[str] = field(default_factory=list)
    replace: set[str] = field(default_factory=set)

    def sync(self, table: KeyedTable) -> bool:
        return table.sync(self.rows, replace=self.replace, later=self.later)


class KeyedTable(InPlaceTable[Cell]):
    """Subclasses define COLUMNS and call `sync()`; digits 1-9 (or a header click) sort."""

    class Refitted(Message):
        """The columns changed with the width: cells that adapt to their width need a new sync."""

        def __init__(self, table: KeyedTable) -> None:
            super().__init__()
            self.table = table  # which table: only its own rows need the new sync

    COLUMNS: ClassVar[tuple[Column, ...]] = ()
    # Sort columns under which a row's place never changes with its data: rows out of the window
    # can then wait to be built (`sync`'s `later`) without being out of order.
    STEADY_SORTS: ClassVar[frozenset[str]] = frozenset()
    # Rows out of the window are held thin and built again (build_later) when they come into it.
    LAZY: ClassVar[bool] = False
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
        *[
            Binding(d, f"sort_column({SORT_KEYS.index(d) + 1})", f"Sort by column {d}", show=False)
            for d in SORT_KEYS[1:]
        ],
    ]

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        # "css": the cursor row's text is the theme's foreground on the cursor's background, which reads
        # at 4.5:1 in every theme (the cells' own colours would not; tests/ui/test_themes.py).
        super().__init__(
            id=id,
            classes=classes,
            cursor_type="row",
            zebra_stripes=False,
            cursor_foreground_priority="css",
        )
        self._rows: dict[str, Row] = {}
        self._sort: tuple[str, bool] | None = self.DEFAULT_SORT
        self._shown: tuple[Column, ...] = ()
        self._widths: dict[str, int] = {}
        self._content: dict[str, int] = {}  # the widest cell of each measured column (grows)
        self._palette: dict[str, Style] = {}
        self._palette_theme = ""
        self.changes = 0  # cells updated and rows added or removed since mounting (what a redraw did)
        self._applied_order: list[str] | None = None  # the last order `row_order` gave, as applied
        # Rows whose data changed while they were out of the window: built when they come into it.
        self._later: set[str] = set()
        self._real: set[str] = set()  # (LAZY) rows that hold all their cells; the others are thin
        self.built = 0  # rows built by build_later (what the window cost; tests, the bench)
        # Columns the config's [columns] table hides (never shown, at any width; a sort on one is
        # kept, as for a column the width hides) and memory in exact MiB (the `m` key): both set by
        # the screen, which then re-syncs the rows.
        self.hidden_columns: frozenset[str] = frozenset()
        self.exact_memory = False

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

    def _measured(self, column: Column) -> bool:
        """Columns whose width follows their cells: numbers, words without a fixed width, and a flex
        column with room to grow to (as far as its cells need)."""
        if column.flex:
            return column.room is not None
        return not column.cut or column.width is None

    def _need(self, column: Column, cell: Cell) -> int:
        """What a measured column needs for `cell`: its length; for a flex column, up to its room
        (wider never changes the columns), and only what keeps its numbers whole if `whole`."""
        if not column.flex:
            return cell.cell_len
        room = column.room or 0
        if cell.cell_len <= room:
            return cell.cell_len
        return min(room, whole_width(cell)) if column.whole else room

    def _fit(self, width: int) -> tuple[Column, ...]:
        """The columns that fit in `width` cells, each with its width (columns.fit_columns)."""
        return fit_columns(
            tuple(c for c in self.available_columns() if c.key not in self.hidden_columns),
            width,
            pad=2 * self.cell_padding,
            content=self._content,
            sort=self._sort[0] if self.SORTABLE and self._sort is not None else None,
            sortable=self.SORTABLE,
        )

    def resized(self) -> None:
        self._measure()
        self.refit()
        self.build_window()

    def _measure(self) -> None:
        """The widest cell of each measured column, from every row (they only grow in between)."""
        self._content = {
            c.key: max((self._need(c, row[c.key]) for row in self._rows.values()), default=0)
            for c in self.available_columns()
            if self._measured(c)
        }

    def remeasure(self) -> None:
        """Widths from the rows as they are now (after the cells changed form, such as GiB to MiB:
        a measured column otherwise only grows), and the columns fitted again."""
        self._measure()
        self.refit()

    def hide_columns(self, keys: Collection[str]) -> None:
        self.hidden_columns = frozenset(keys)
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
        self.keep_view()  # DataTable's clear scrolls to the top: the rows stay where the reader left them
        self._shown = shown
        self._widths = {c.key: c.planned for c in shown}
        with self.app.batch_update():
            self.clear(columns=True)
            for column in shown:
                self.add_column(self._label(column), width=column.width, key=column.key)
            for key, row in self._rows.items():
                self.add_row(*self._cells(row), key=key)
            self._apply_sort()
            self.move_to(cursor)
        self.post_message(self.Refitted(self))

    def _cell(self, row: Row, column: Column) -> Cell:
        """What a row shows in `column`: its cell, fitted to the column (the one rule, `fit`)."""
        cell = row[column.key]
        cell.justify = column.justify
        return fit(cell, column.planned) if column.cut or column.flex else cell

    def _cells(self, row: Row) -> list[Cell]:
        return [self._cell(row, c) for c in self._shown]

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

    def sync(
        self,
        rows: Mapping[str, Row],
        replace: Collection[str] | None = None,
        *,
        later: Iterable[str] = (),
    ) -> bool:
        """Make the table show `rows`. Rows not in `rows` are removed if their key is in `replace`
        (default: every row), so a caller can refresh one part (one host) of a big table.

        `later`: the keys of more rows, built by `build_later` now if the row is new or in the window
        (or the sort is not steady), else when it comes into the window (a row it finds gone is
        removed); a key in both `rows` and `later` is taken from `rows`.

        Returns True when rows were added, removed or reordered."""
        waiting: Collection[str] = ()
        if later:
            rows, waiting = self._build_due(rows, later)
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
        wider = False
        measured = {c.key: c for c in self.available_columns() if self._measured(c)}
        with self.app.batch_update():
            candidates = self._rows.keys() if replace is None else replace
            for key in [k for k in candidates if k in self._rows and k not in rows]:
                if key in waiting:
                    continue  # still a row, built when it comes into the window
                del self._rows[key]
                self._later.discard(key)
                self._real.discard(key)
                self.remove_row(key)
                self.changes += 1
                reorder = True
            for key, row in rows.items():
                old = self._rows.get(key)
                self._rows[key] = row
                if self.LAZY and self.rebuildable(key):
                    self._real.add(key)
                if old is None:
                    wider = self._widen(row, measured) or wider
                    self.add_row(*self._cells(row), key=key)
                    self.changes += 1
                    reorder = True
                    continue
                changed = {k for k, cell in row.items() if cell.signature() != old[k].signature()}
                if changed:
                    wider = self._widen(row, {k: measured[k] for k in changed if k in measured}) or wider
                for column in self._shown:
                    if column.key in changed:
                        self._put(key, column.key, self._cell(row, column))
                if sort_key in changed and row[sort_key].sort_key != old[sort_key].sort_key:
                    reorder = True
            if not reorder and self.row_order() != self._applied_order:
                reorder = True  # an order of the subclass's own (a tree) changed with the rows
            if wider and self.size.width > 0:
                shown = self._fit(self.size.width)
                if shown != self._shown:
                    self._rebuild(shown)
                    return True
            if reorder:
                self._apply_sort()
                self.move_to(cursor)
                self.build_window()  # other rows may be in the window now
            self._thin_outside()
        return reorder

    # -- building only what can be seen -----------------------------------------------------

    def _steady(self) -> bool:
        return self._sort is None or self._sort[0] in self.STEADY_SORTS

    def window(self) -> range:
        """The indexes of the rows in view, and WINDOW_MARGIN rows above and below (the rows a key
        brings into view; a scroll builds the rest as it comes: build_window). A margin of a
        screen's height built three times the rows a sample touches, for rows no one sees."""
        height = max(self.size.height, 1)
        top = int(self.scroll_y) - WINDOW_MARGIN
        return range(max(0, top), min(self.row_count, top + height + 2 * WINDOW_MARGIN))

    def build_later(self, key: str) -> Row | None:
        """Row `key` as it is now, for a subclass that hands `sync` keys (`later`); None: it is gone."""
        return None

    def rebuildable(self, key: str) -> bool:
        """(LAZY) Whether `build_later` can build row `key` again: only those are held thin."""
        return True

    def _build_due(self, rows: Mapping[str, Row], later: Iterable[str]) -> tuple[dict[str, Row], set[str]]:
        """`rows` and the rows of `later` that must be built now; and the keys of those that wait
        (in `_later`) for the window."""
        out = dict(rows)
        waiting: set[str] = set()
        steady = self._steady()
        window = self.window()
        known = self._rows
        for key in later:
            if key in out:
                continue
            index = self.row_index(key) if steady and key in known else None
            if index is None or index in window:
                self._later.discard(key)
                self.built += 1
                row = self.build_later(key)
                if row is not None:
                    out[key] = row
            else:
                self._later.add(key)
                waiting.add(key)
        if not steady and self._later:
            out.update(self._take_later(list(self._later)))
            waiting.clear()
        return out, waiting

    def _take_later(self, keys: list[str]) -> dict[str, Row]:
        """Build the waiting rows `keys` (one found gone gives none)."""
        out: dict[str, Row] = {}
        for key in keys:
            if key not in self._later:
                continue
            self._later.discard(key)
            self.built += 1
            row = self.build_later(key)
            if row is not None:
                out[key] = row
        return out

    def build_window(self) -> None:
        """Build the waiting rows that are in the window now (after a scroll, a move, a resize)."""
        if not self._later or not self.is_mounted:
            return
        keys = [key for key in map(self.key_at, self.window()) if key is not None and key in self._later]
        if keys:
            self.sync(self._take_later(keys), replace=())

    def _thin_outside(self) -> None:
        """(LAZY, under a steady sort) Hold the rows out of the window thin: the cells that place
        them, and shared blanks as wide as the others were; they wait to be built again."""
        if not self.LAZY or not self._steady() or len(self._real) <= 2 * max(1, len(self.window())):
            return
        window, steady = self.window(), self.STEADY_SORTS
        for key in list(self._real):
            index = self.row_index(key)
            row = self._rows.get(key)
            if index is None or row is None:
                self._real.discard(key)
                continue
            if index in window:
                continue
            thin = {k: cell if k in steady else _blank(cell.cell_len) for k, cell in row.items()}
            self._rows[key] = thin
            self.swap_cells(key, {k: cell for k, cell in thin.items() if k not in steady})
            self._real.discard(key)
            self._later.add(key)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._later and round(old_value) != round(new_value):
            self.build_window()

    def _put(self, key: str, column: str, cell: Cell) -> None:
        self.put_cell(key, column, cell)
        self.changes += 1

    def _widen(self, row: Row, columns: Mapping[str, Column]) -> bool:
        """Note the cells of `row` in `columns` that are wider than their column's widest so far."""
        wider = False
        for key, column in columns.items():
            width = self._need(column, row[key])
            if width > self._content.get(key, 0):
                self._content[key] = width
                wider = True
        return wider

    def forget(self) -> None:
        """Drop every row (a different host is shown now: this is a new table, not a refresh)."""
        self._rows.clear()
        self._later.clear()
        self._real.clear()
        self._content.clear()
        with self.app.batch_update():
            self.clear()

    def rows_data(self) -> Mapping[str, Row]:
        return self._rows

    # -- sorting -----------------------------------------------------------------------------

    def row_order(self) -> list[str] | None:
        """The rows' keys in the order to show them, for a subclass with an order of its own (the
        process tree); None: sorted by the sort column."""
        return None

    def _apply_sort(self) -> None:
        order = self.row_order() if self.row_count else None
        self._applied_order = order
        if order is not None:
            self.place_rows(order)
            return
        if self._sort is None or not self.row_count:
            return
        column, reverse = self._sort
        if ColumnKey(column) in self.columns:
            self.sort(column, key=_sort_key, reverse=reverse)
            return
        # A column the width hides: its cells are in the rows kept here, not in DataTable's. Sorted as
        # DataTable.sort does it (tests/ui/test_sorting.py checks that these internals still hold).
        rows = self._rows
        self.place_rows(sorted(self.row_keys(), key=lambda k: rows[k][column].sort_key, reverse=reverse))

    def _column(self, key: str) -> Column | None:
        return next((c for c in self.available_columns() if c.key == key), None)

    def sort_by(self, column: str, reverse: bool | None = None) -> None:
        """Sort by `column` (shown or not); `reverse=None` flips the order when it already sorts by it."""
        spec = self._column(column)
        if spec is None or not spec.sortable:
            return
        if reverse is None:
            if self._sort is not None and self._sort[0] == column:
                reverse = not self._sort[1]
            else:
                reverse = spec.descending
        cursor = self.cursor_key
        self._sort = (column, reverse)
        if self._later and not self._steady():
            self.sync(self._take_later(list(self._later)), replace=())  # sorted by readings: all
        shown = self._fit(self.size.width) if self.size.width > 0 and self._shown else self._shown
        if shown != self._shown:
            self._rebuild(shown)  # the sort column comes into view (another may give way)
        else:
            for c in self._shown:
                self.columns[ColumnKey(c.key)].label = self._label(c)
            self._apply_sort()
        self.move_to(cursor, scroll=True)
        self.build_window()
        self.post_message(self.Sorted())

    class Sorted(Message):
        """The sort changed: the pane's title may say which hidden column it sorts by."""

    @property
    def sort_column(self) -> tuple[str, bool] | None:
        return self._sort

    def hidden_sort(self) -> str:
        """ "sorted by RSS ▼ (column hidden)" when the sort column is not shown (the config hides it,
        or the pane is too narrow even for it), else ""."""
        if self._sort is None or not self.SORTABLE or self._sort[0] in self._widths:
            return ""
        spec = self._column(self._sort[0])
        if spec is None:
            return ""
        return f"sorted by {spec.label} {'▼' if self._sort[1] else '▲'} (column hidden)"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "sort_column":
            return self.SORTABLE
        return True

    def sortable_columns(self) -> list[Column]:
        """The columns that the keys 1-9 and 0 sort by, in order: all of them, shown or not."""
        return [c for c in self.available_columns() if c.sortable][: len(SORT_KEYS)] if self.SORTABLE else []

    @classmethod
    def sort_keys_text(cls) -> str:
        """`1 PID · 2 User · …`: which key sorts by which column (the help lists it)."""
        columns = [c for c in cls.COLUMNS if c.sortable][: len(SORT_KEYS)] if cls.SORTABLE else []
        # A no-break space keeps each number with its column when the line wraps.
        return " · ".join(f"{SORT_KEYS[i]}\u00a0{c.label.strip()}" for i, c in enumerate(columns))

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


_BLANKS: dict[int, Cell] = {}


def _blank(width: int) -> Cell:
    """A blank cell `width` wide, shared by every thin row (it is never drawn: a thin row is built
    again before it comes into view)."""
    cell = _BLANKS.get(width)
    if cell is None:
        cell = _BLANKS[width] = Cell(" " * width, sort_key="")
    return cell

"""Every reach into Textual's private API (and one into Rich's), in one module: an upgrade of
Textual looks here first. Nothing else in gputui/ui imports a private module of Textual or Rich, or
reads, writes or overrides a `_name` of their classes (tests/ui/test_ui_house.py holds that).

Each reach says why it is made and which test holds it to Textual's own behaviour:
- `InPlaceTable`: DataTable updated a cell at a time and rendered by a shorter path
  (tests/ui/test_cell_render.py, test_table_repaint.py, test_sorting.py, test_table_size.py).
- `HookedDriver`: the Linux driver's terminal size, SIGCONT, output file and writer thread, for a
  terminal that goes away (tests/ui/test_lost_terminal.py, test_small_terminal.py).
- `app_driver`, `set_return_code`: the running app's driver and exit status (the same tests).
- `lru_links`: an LRU cache's ring, emptied as it is let go (tests/ui/test_acyclic.py).
- `FooterKey`: the footer's keys, fitted to its width (tests/ui/test_footer.py).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from typing import Any, cast

from rich._pick import pick_bool
from rich.console import Console, ConsoleOptions
from rich.segment import Segment
from rich.style import Style
from rich.text import DEFAULT_JUSTIFY, DEFAULT_OVERFLOW, Text
from textual import events
from textual._two_way_dict import TwoWayDict
from textual._xterm_parser import XTermParser
from textual.app import App
from textual.cache import LRUCache
from textual.coordinate import Coordinate
from textual.driver import Driver
from textual.drivers._writer_thread import WriterThread
from textual.drivers.linux_driver import LinuxDriver
from textual.geometry import Offset, Region, Size
from textual.reactive import Reactive
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets._footer import FooterKey
from textual.widgets.data_table import CellType, ColumnKey, RowKey

__all__ = ["FooterKey", "HookedDriver", "InPlaceTable", "app_driver", "lru_links", "set_return_code"]


# -- the app ---------------------------------------------------------------------------------------


def app_driver(app: App[Any]) -> Driver | None:
    """The driver `app` runs on (None before it runs, or after)."""
    return app._driver


def set_return_code(app: App[Any], code: int) -> None:
    """The exit status of an app that ends before its run starts (a signal came first)."""
    app._return_code = code


# -- the LRU cache ----------------------------------------------------------------------------------


def lru_links(cache: LRUCache[Any, Any]) -> dict[Any, list[Any]]:
    """The links of `cache`'s ring by key: `[prev, next, key, value]` lists."""
    links: dict[Any, list[Any]] = cache._cache
    return links


# -- the Linux driver ------------------------------------------------------------------------------


class HookedDriver(LinuxDriver):
    """Textual's Linux driver with what a driver for a terminal that goes away needs of its insides:
    the output file and the writer thread, and its terminal size and SIGCONT handling as methods
    with public names that a subclass overrides (calling `textual_size` and `textual_sigcont` for
    Textual's own)."""

    @property
    def output(self) -> Any:
        """The file Textual writes the screen to (None: no terminal)."""
        return self._file

    @output.setter
    def output(self, file: Any) -> None:
        self._file = file

    @property
    def owner(self) -> App[Any]:
        return self._app

    @property
    def writing(self) -> bool:
        """Whether the writer thread is there (Textual starts none for a terminal that refused its
        settings)."""
        return self._writer_thread is not None

    def start_writer(self) -> None:
        """A writer thread on the output file, started (for a terminal Textual gave up on)."""
        self._writer_thread = WriterThread(cast(Any, self._file))
        self._writer_thread.start()

    def input_parser(self) -> XTermParser:
        """The parser of the terminal's input, as Textual's input loop makes it."""
        return XTermParser(self._debug)

    def _get_terminal_size(self) -> tuple[int, int]:
        return self.layout_size()

    def layout_size(self) -> tuple[int, int]:
        """The size to lay the screen out in (Textual's: `textual_size`)."""
        return self.textual_size()

    def textual_size(self) -> tuple[int, int]:
        return super()._get_terminal_size()

    def _sigcont_application(self, *args: Any) -> None:
        self.continued(*args)

    def continued(self, *args: Any) -> None:
        """The process was continued: Textual sets the terminal up again (`textual_sigcont`)."""
        self.textual_sigcont(*args)

    def textual_sigcont(self, *args: Any) -> None:
        super()._sigcont_application(*args)


# -- the data table --------------------------------------------------------------------------------


class InPlaceTable(DataTable[CellType]):
    """A DataTable whose rows are one line high (a subclass adds no other), updated a cell at a time
    (`put_cell`) and rendered by a shorter path; the rows' order set whole (`place_rows`), and the cells
    of a row out of view swapped without a repaint (`swap_cells`)."""

    def __init__(self, **options: Any) -> None:
        # Set before DataTable's __init__, which moves the cursor (`_scroll_cursor_into_view` reads it).
        self._kept_view: Offset | None = None  # the offset to put back after a clear (keep_view)
        super().__init__(**options)
        self._stale_rows: set[RowKey] = set()  # updated in place: their cache entries go before a render
        self._cache_epoch = -1  # DataTable's _update_count when the render caches were last emptied

    def _on_resize(self, event: events.Resize) -> None:
        super()._on_resize(event)
        self.resized()

    def resized(self) -> None:
        """The table's size changed (after DataTable has seen it)."""

    def scroll_cursor_into_view(self) -> None:
        self._scroll_cursor_into_view()

    # -- the view through a clear ------------------------------------------------------------------

    def keep_view(self) -> None:
        """Keep the scroll offset through what comes next (a clear and the rows added again): it is
        put back once the table has its size again, and moves from there only as far as brings the
        cursor into view. DataTable's `clear` scrolls to the top, and the cursor's move after it
        scrolls from the top, so the view used to move under a cursor that was in it."""
        if self._kept_view is None:
            self._kept_view = self.scroll_offset
            self.call_after_refresh(self._restore_view)

    def _restore_view(self) -> None:
        # After the refresh, the rows' size is measured (DataTable's on_idle), as Textual's own
        # move_cursor counts on: the offset is not cut to the size of a table still empty.
        kept, self._kept_view = self._kept_view, None
        if kept is None:
            return
        self.scroll_to(kept.x, kept.y, animate=False, immediate=True)
        if self.show_cursor and self.row_count:
            self._scroll_cursor_into_view()

    def _scroll_cursor_into_view(self, animate: bool = False) -> None:
        if self._kept_view is not None:
            return  # the kept view is put back first (`_restore_view`), the cursor brought into it then
        super()._scroll_cursor_into_view(animate)

    # -- where the rows are --------------------------------------------------------------------

    def row_index(self, key: str) -> int | None:
        """The place of row `key` (None: no such row)."""
        return self._row_locations.get(key)  # type: ignore[arg-type]  # (a row key is found by its string)

    def key_at(self, index: int) -> str | None:
        """The key of the row at `index` (None: no row there)."""
        key = self._row_locations.get_key(index)
        return key.value if key is not None else None

    def row_keys(self) -> list[str]:
        """The rows' keys in the order they were added."""
        return [key.value for key in self._data if key.value is not None]

    def place_rows(self, order: Sequence[str]) -> None:
        """Put the rows in `order` (rows it does not name keep their order, after it), as DataTable.sort
        does (tests/ui/test_sorting.py checks that these internals still hold)."""
        by_value = {key.value: key for key in self._data}
        ordered = [by_value[k] for k in order if k in by_value]
        named = set(order)
        ordered += [key for key in self._data if key.value not in named]
        self._row_locations = TwoWayDict({key: index for index, key in enumerate(ordered)})
        self._update_count += 1
        self.refresh()

    def swap_cells(self, key: str, cells: Mapping[str, CellType]) -> None:
        """Row `key`'s stored cells of the columns in `cells` replaced, with nothing repainted (the row
        is out of view, and built again before it comes back)."""
        stored = self._data.get(RowKey(key))
        if stored is None:
            return
        for column_key in stored:
            name = column_key.value
            if name is not None and name in cells:
                stored[column_key] = cells[name]

    # -- the table's size ----------------------------------------------------------------------

    # Textual's `virtual_size` (the scrollable size: every row and column) lays the whole screen out
    # again when it changes. A table whose box does not follow its rows (the process pane, `1fr`;
    # the fleet table past its max-height) only needs its scrollbar told: at 1,024 hosts the
    # process pane's rows changed with each move of the fleet's cursor to another host, and the
    # layouts that followed were a tenth of the app's work (docs/BENCHMARKS.md).
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)

    def watch_virtual_size(self, old: Size, new: Size) -> None:
        if self._box_follows(old, new):
            self.refresh(layout=True)
            return
        self._scroll_update(new)

    def _box_follows(self, old: Size, new: Size) -> bool:
        """Whether a change of the virtual size from `old` to `new` changes the table's box (a size
        set by its content, `auto`, or the vertical scrollbar coming or going): then a layout."""
        styles = self.styles
        if not self.is_mounted or not self.container_size or styles.height is None or styles.width is None:
            return True
        if styles.height.is_auto or styles.width.is_auto:
            return True
        height = self.container_size.height
        return (old.height > height) != (new.height > height)

    # -- updating cells in place -------------------------------------------------------------

    def put_cell(self, key: str, column: str, cell: CellType) -> None:
        """`update_cell` for a cell that keeps its width, at the cost of one row, not of the table."""
        row_key = RowKey(key)
        self._data[row_key][ColumnKey(column)] = cell
        if row_key not in self._stale_rows:
            self._stale_rows.add(row_key)
            index = self._row_locations.get(row_key)
            if index is not None:  # rows are one line high: row i is line i below the header
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

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> list[list[Segment]]:
        # DataTable renders a cell through Rich's whole pipeline: Styled(Padding(cell)), each layer
        # a generator, then cropped and split into lines twice. A table's cells are one-line Text
        # (rows one line high), so this does the same steps on the cell directly: Text.wrap, its
        # segments, the padding, the styles; the same segments at a quarter of the cost (a thousand
        # hosts: the cells of the rows a key brings into view; tests/ui/test_cell_render.py holds
        # it to DataTable's own, segment for segment). Anything else goes DataTable's way.
        pad = self.cell_padding
        header = row_index == -1  # (the header too: a table's rows changing renders it again)
        row_key: RowKey | None
        if header:
            row_key = self._header_row_key if self.header_height == 1 else None
        elif row_index < self.fixed_rows:
            row_key = None
        else:
            row_key = self._row_locations.get_key(row_index)
            row = self.rows.get(row_key) if row_key is not None else None
            if row is None or row.height != 1:
                row_key = None
        if row_key is None or column_index < self.fixed_columns or width - 2 * pad < 1:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        column_key = self._column_locations.get_key(column_index)
        if column_key is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        cache_key = (
            row_key,
            column_key,
            base_style,
            cursor,
            hover,
            self._show_hover_cursor,
            self._update_count,
            self._pseudo_class_state,
        )
        cached = self._cell_render_cache.get(cache_key)
        if cached is not None:
            return cached
        cell = self._get_row_renderables(row_index)[1][column_index]
        if not isinstance(cell, Text):
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        component_style, post_style = self._get_styles_to_render_cell(
            header,
            False,
            False,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )
        pre_style = base_style + Style.from_meta({"row": row_index, "column": column_index}) + component_style
        lines = [
            _cell_line(self.app.console, self.app.console_options, cell, width, pad, pre_style, post_style)
        ]
        self._cell_render_cache[cache_key] = lines
        return lines

    def _render_line_in_row(
        self,
        row_key: RowKey,
        line_no: int,
        base_style: Style,
        cursor_location: Coordinate,
        hover_location: Coordinate,
    ) -> tuple[list[list[Segment]], list[list[Segment]]]:
        # DataTable keys each row's rendered line by the cursor's and the mouse's coordinates: every
        # move of the cursor made every row in view render again (a key held down at a thousand
        # hosts: a fifth of the app's work). With a row cursor, a row the cursor (or the mouse) is
        # not on is drawn the same wherever it is: one key for all of those places.
        if self.cursor_type == "row":
            index = self._row_locations.get(row_key)
            if cursor_location.row != index:
                cursor_location = _ELSEWHERE
            if hover_location.row != index:
                hover_location = _ELSEWHERE
        return super()._render_line_in_row(row_key, line_no, base_style, cursor_location, hover_location)

    # The rows are one line high (a subclass adds no other): line y below the header is row y.
    # DataTable finds a line's row in a list of every line's (row, line) pair, made again after each
    # sort: at a thousand hosts 4,096 pairs, young for every collection of the garbage collector.

    @property
    def _total_row_height(self) -> int:
        return self.row_count

    def _get_offsets(self, y: int) -> tuple[RowKey, int]:
        if self.show_header:
            if y < self.header_height:
                return self._header_row_key, y
            y -= self.header_height
        row_key = self._row_locations.get_key(y) if y >= 0 else None
        if row_key is None:
            raise LookupError(f"Y coord {y!r} is greater than total height")
        return row_key, 0

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        # Its cache of whole lines is keyed by the cursor's and the mouse's coordinates as well: a
        # key that scrolls the table made every line in view again from its row. Keyed here as the
        # rows are: a line the cursor (or the mouse) is not on, as elsewhere.
        if self.cursor_type != "row":
            return super()._render_line(y, x1, x2, base_style)
        try:
            row_key, _ = self._get_offsets(y)
        except LookupError:
            return super()._render_line(y, x1, x2, base_style)
        index = -1 if row_key == self._header_row_key else self._row_locations.get(row_key)
        cursor, hover = self.cursor_coordinate, self.hover_coordinate
        cache_key = (
            y,
            x1,
            x2,
            self.size.width,
            cursor if cursor.row == index else _ELSEWHERE,
            hover if hover.row == index else _ELSEWHERE,
            base_style,
            self.cursor_type,
            self._show_hover_cursor,
            self._update_count,
            self._pseudo_class_state,
        )
        strip = self._line_cache.get(cache_key)
        if strip is None:
            strip = super()._render_line(y, x1, x2, base_style)
            self._line_cache[cache_key] = strip
        return strip

    def render_lines(self, crop: Region) -> list[Strip]:
        if self._update_count != self._cache_epoch:
            self._empty_caches()
        elif self._stale_rows:
            self._forget_stale_rows()
        return super().render_lines(crop)


# A cursor on no row (not even the header's, -1): where a row's cursor is when it is elsewhere.
_ELSEWHERE = Coordinate(-2, -2)

_NO_STYLE = Style.parse("none")  # what Padding pads with (its default style)


def _cell_line(
    console: Console,
    options: ConsoleOptions,
    cell: Text,
    width: int,
    pad: int,
    pre: Style,
    post: Style | None,
) -> list[Segment]:
    """The one line DataTable makes of `cell` in a row one line high, `width` cells wide with `pad`
    cells of padding either side: what console.render_lines(Styled(Padding(cell, (0, pad)),
    pre_style=pre, post_style=post), options at `width` x 1, no_wrap) gives, step by step."""
    inner = width - 2 * pad
    text_options = options.update(width=inner, height=1, no_wrap=True)
    # Text.__rich_console__ at the padding's inner width:
    tab_size = console.tab_size if cell.tab_size is None else cell.tab_size
    wrapped = cell.wrap(
        console,
        inner,
        justify=cell.justify or text_options.justify or DEFAULT_JUSTIFY,
        overflow=cell.overflow or text_options.overflow or DEFAULT_OVERFLOW,
        tab_size=tab_size or 8,
        no_wrap=pick_bool(cell.no_wrap, text_options.no_wrap, False),
    )
    segments = Text("\n").join(wrapped).render(console, end=cell.end)
    # console.render_lines at that width and a height of 1 (padded with the padding's style):
    lines = iter(
        Segment.split_and_crop_lines(segments, inner, include_new_lines=False, pad=True, style=_NO_STYLE)
    )
    first: list[Segment] | None = next(lines, None)
    line = first if first is not None else [Segment(" " * inner, _NO_STYLE)]
    # Padding either side, then Styled's styles before and after each segment's own:
    if pad:
        side = Segment(" " * pad, _NO_STYLE)
        line = [side, *line, side]
    styled = line
    if pre:
        add = pre.__add__
        styled = [Segment(text, None if control else add(style), control) for text, style, control in styled]
    if post:
        styled = [
            Segment(text, None if control else (style + post if style else post), control)
            for text, style, control in styled
        ]
    # and console.render_lines at the cell's width, as DataTable calls it:
    styled.append(Segment.line())
    cropped: list[Segment] = next(
        iter(Segment.split_and_crop_lines(styled, width, include_new_lines=False, pad=True))
    )
    return cropped

"""Textual's Footer, without the widgets it keeps after each recompose, and with whole keys only.

Footer data-binds every FooterKey it composes to its own `compact` reactive, and drops such a
binding only when `compact` changes (Textual prunes the watchers of closed nodes then). Footer
recomposes at each change of the bindings (every focus change, every view switch), and `compact`
never changes here, so each recompose kept the ~15 old FooterKeys, their styles and caches alive
for good: the memory soak (bench/memory_soak.py) grew by about 1 MiB per 10,000 samples from this
alone. Re-setting `compact` after a recompose prunes the bindings of the keys just removed.

The keys that do not fit before the command palette's key (docked right) are left out, from the
end, whole: Textual drew them on under it, so `i GPU view` read `i GPU` and the keys after it were
hidden beneath without a sign. The help (?) lists every key.

The keys are ranked per focused pane (`ranks`: the pane's id to its actions, most useful first;
the main screen's are gputui/ui/keys.py's FOOTER_RANKS), so the ones that matter there come first
and fit at 80 columns; a wider terminal shows more of the rest, in their own order.

Keys are written as the help and the README write them: `ctrl+p`, not `^p`; the palette's key in
the same style as the others (its space after the key, not before the word).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Footer as TextualFooter

from .._textual import FooterKey
from ..fmt import key_name


class Footer(TextualFooter):
    def __init__(self, ranks: Mapping[str, Sequence[str]] | None = None) -> None:
        super().__init__()
        self.ranks = dict(ranks or {})

    def compose(self) -> ComposeResult:
        widgets = list(super().compose())
        for widget in widgets:
            if isinstance(widget, FooterKey):
                widget.key_display = key_name(widget.key_display)
                if widget.has_class("-command-palette"):
                    widget.set_reactive(FooterKey.compact, False)
        yield from self.ranked(widgets)

    def ranked(self, widgets: list[Widget]) -> list[Widget]:
        """The keys in the focused pane's order (the actions it ranks first, then the rest as bound);
        the palette's key stays last."""
        focused = self.screen.focused
        rank = self.ranks.get(focused.id or "", ()) if focused is not None else ()
        if not rank:
            return widgets
        place: dict[str, int] = {}
        for action in rank:
            place.setdefault(action, len(place))  # an action named twice keeps its first place
        last = len(place)

        def order(widget: Widget) -> int:
            if widget.has_class("-command-palette"):
                return last + 1
            return place.get(widget.action, last) if isinstance(widget, FooterKey) else last

        return sorted(widgets, key=order)

    async def recompose(self) -> None:
        await super().recompose()
        self.mutate_reactive(TextualFooter.compact)
        self.fit_keys()

    def on_resize(self) -> None:
        self.fit_keys()

    def fit_keys(self) -> None:
        """Show the keys, in order, while each fits whole before the palette's key; not the rest."""
        width = self.size.width
        if width <= 0:
            return
        keys = [c for c in self.children if not c.has_class("-command-palette")]
        room = width - sum(_width(c) for c in self.children if c.has_class("-command-palette"))
        used = 0
        fits = True
        for child in keys:
            needed = _width(child)
            fits = fits and used + needed <= room
            if fits:
                used += needed
            if child.display != fits:
                child.display = fits


def _width(widget: Widget) -> int:
    """The cells `widget` takes in the footer's row: its text, padding, border and margins."""
    styles = widget.styles
    if isinstance(widget, FooterKey):
        text = widget.render()
        content = cell_len(text.plain) if hasattr(text, "plain") else widget.outer_size.width
        return content + styles.gutter.width + styles.margin.width
    return widget.outer_size.width + styles.margin.width

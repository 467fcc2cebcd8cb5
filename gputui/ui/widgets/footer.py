"""Textual's Footer, without the widgets it keeps after each recompose.

Footer data-binds every FooterKey it composes to its own `compact` reactive, and drops such a
binding only when `compact` changes (Textual prunes the watchers of closed nodes then). Footer
recomposes at each change of the bindings (every focus change, every view switch), and `compact`
never changes here, so each recompose kept the ~15 old FooterKeys, their styles and caches alive
for good: the memory soak (bench/memory_soak.py) grew by about 1 MiB per 10,000 samples from this
alone. Re-setting `compact` after a recompose prunes the bindings of the keys just removed.

Keys are written as the help and the README write them: `ctrl+p`, not `^p`.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer as TextualFooter
from textual.widgets._footer import FooterKey

from ..fmt import key_name


class Footer(TextualFooter):
    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                widget.key_display = key_name(widget.key_display)
            yield widget

    async def recompose(self) -> None:
        await super().recompose()
        self.mutate_reactive(TextualFooter.compact)

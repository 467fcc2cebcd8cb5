"""Textual's Footer, without the widgets it keeps after each recompose.

Footer data-binds every FooterKey it composes to its own `compact` reactive, and drops such a
binding only when `compact` changes (Textual prunes the watchers of closed nodes then). Footer
recomposes at each change of the bindings (every focus change, every view switch), and `compact`
never changes here, so each recompose kept the ~15 old FooterKeys, their styles and caches alive
for good: the memory soak (bench/memory_soak.py) grew by about 1 MiB per 10,000 samples from this
alone. Re-setting `compact` after a recompose prunes the bindings of the keys just removed.
"""

from __future__ import annotations

from textual.widgets import Footer as TextualFooter


class Footer(TextualFooter):
    async def recompose(self) -> None:
        await super().recompose()
        self.mutate_reactive(TextualFooter.compact)

"""The dialogs: the screens over the main one (help, a plan, a process in full, its environment, a
signal, a confirmation), and the one kind of them that asks yes or no of something that cannot be
undone (a protected monitor included in a plan, a GPU reset).

Apart from the screens because each of them is one: what they share is here once, and their look
is app.tcss's (`.dialog`, `.dialog.-danger`, and each box's own size under its id).
"""

from __future__ import annotations

from typing import ClassVar, cast

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, ScreenResultType
from textual.widgets import Button, Static

from ..context import Dashboard

DIALOG = "dialog"  # the class of a dialog's box (app.tcss)
DANGER = "dialog -danger"  # ... of a confirmation of what cannot be undone: a heavy red frame


# A dialog taller than the screen: these keys scroll its text (its SCROLLS) wherever the focus is.
SCROLL_BINDINGS: list[Binding] = [
    Binding("up", "scroll(-1)", "Scroll up", show=False),
    Binding("down", "scroll(1)", "Scroll down", show=False),
    Binding("pageup", "scroll(-10)", "Page up", show=False),
    Binding("pagedown", "scroll(10)", "Page down", show=False),
]


class Dialog(ModalScreen[ScreenResultType]):
    """A screen over the main one."""

    SCROLLS: ClassVar[str] = ""  # the selector of what SCROLL_BINDINGS scroll, where it has them

    @property
    def dash(self) -> Dashboard:
        """The app, as the screens know it (they never import it)."""
        return cast(Dashboard, self.app)

    def action_scroll(self, lines: int) -> None:
        self.query_one(self.SCROLLS, VerticalScroll).scroll_relative(y=lines, animate=False)


def answer_bindings(yes: str) -> list[BindingType]:
    """A confirmation's keys: esc cancels, ctrl+k says yes (`yes`: what it does)."""
    return [
        Binding("escape", "answer(False)", "Cancel", key_display="esc"),
        Binding("ctrl+k", "answer(True)", yes, priority=True),
    ]


class Confirm(Dialog[bool]):
    """Yes or no to something that cannot be undone: a text in a red box, Cancel (focused first:
    the subclass's AUTO_FOCUS) and a red button for yes, or Close alone where it is refused.

    The widgets' ids are NAME's (`#reset-box`, `-text`, `-buttons`, `-cancel`, `-yes`, `-keys`): the
    subclass fills `#NAME-text` on mount."""

    NAME: ClassVar[str]  # the ids' prefix
    YES: ClassVar[str]  # the red button's label

    @property
    def refused(self) -> bool:
        """Nothing to say yes to: Close alone, and every answer is no."""
        return False

    def compose(self) -> ComposeResult:
        refused = self.refused
        with Vertical(id=f"{self.NAME}-box", classes=DANGER):
            yield Static("", id=f"{self.NAME}-text", markup=False)
            with Horizontal(id=f"{self.NAME}-buttons"):
                yield Button("Close" if refused else "Cancel", id=f"{self.NAME}-cancel", variant="primary")
                if not refused:
                    yield Button(self.YES, id=f"{self.NAME}-yes", variant="error")
                keys = "esc close" if refused else f"ctrl+k {self.YES.lower()} · esc cancel"
                yield Static(keys, id=f"{self.NAME}-keys", markup=False)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes and not self.refused)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == f"{self.NAME}-yes" and not self.refused)

"""What a terminal below the smallest useful size shows: one line that says so, nothing else.

Some `script` sessions, `docker exec -t` and serial consoles report 0x0; a window can also be
dragged very small. The dashboard cannot be read there, and laying it out in no room at all cost
100 % CPU. The app puts this screen on top while the terminal is too small and takes it
away when the terminal grows (gputui/ui/app.py, `GpuTuiApp.guard_size`). Samples still arrive;
nothing is drawn from them until the dashboard shows again. `q` (and ctrl+c) quit.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Static


def too_small_words(least: tuple[int, int], size: tuple[int, int]) -> str:
    return f"gputui needs at least {least[0]}x{least[1]}; this terminal is {size[0]}x{size[1]}"


class TooSmallScreen(Screen[None]):
    DEFAULT_CSS = """
    TooSmallScreen {
        background: $background;
        overflow: hidden;  /* a few cells: as much of the line as fits, no scrollbar */
    }
    TooSmallScreen > Static {
        width: 100%;
        height: auto;
        color: $foreground;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "app.quit", "Quit", show=False)]

    def __init__(self, least: tuple[int, int], size: tuple[int, int]) -> None:
        super().__init__()
        self.least = least
        self.reported = size

    def compose(self) -> ComposeResult:
        yield Static(too_small_words(self.least, self.reported), markup=False)

    def on_screen_resume(self) -> None:
        # On top again (a dialog over it closed): the terminal may have grown meanwhile.
        guard = getattr(self.app, "guard_size", None)
        if callable(guard):
            self.call_after_refresh(guard)

    def show_size(self, size: tuple[int, int]) -> None:
        if size != self.reported:
            self.reported = size
            self.query_one(Static).update(too_small_words(self.least, size))

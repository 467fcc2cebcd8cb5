"""A short menu over the main screen: htop's F6 (sort by) and F9 (which signal), as a list to pick
one from with the arrows and enter, or esc for none. It returns the id of the line chosen; the main
screen acts on it (sorts the table; plans the kill with that ladder in the plan dialog, which still
opens on Cancel). Nothing is done from here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from gputui.kill.plan import SIGNAL_WORDS

from .. import fmt
from ..widgets.borders import set_title
from ..widgets.columns import SORT_KEYS
from ..widgets.table import KeyedTable
from .dialog import DIALOG, Dialog

LADDER_KEYS = {"term": "T", "int": "I", "kill": "K"}  # the keys that plan a ladder at once (nvitop's)


def ladder_choices() -> list[tuple[str, str]]:
    """F9's lines: each ladder of signals in words, with its own key where it has one."""
    return [
        (name, f"{words}  ({LADDER_KEYS[name]})" if name in LADDER_KEYS else words)
        for name, words in SIGNAL_WORDS.items()
    ]


def sort_choices(table: KeyedTable) -> list[tuple[str, str]]:
    """F6's lines: the table's columns with the number that sorts by each, the sort's own marked."""
    sort = table.sort_column
    lines = []
    for number, column in zip(SORT_KEYS, table.sortable_columns(), strict=False):
        mark = f" {'▼' if sort[1] else '▲'} (again: reverse)" if sort and sort[0] == column.key else ""
        lines.append((column.key, f"{number} {column.label.strip()}{mark}"))
    return lines


class ChooseScreen(Dialog[str | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "cancel", "Cancel", key_display="esc", tooltip="choose nothing"),
    ]
    AUTO_FOCUS = "#choose-list"

    def __init__(self, title: str, choices: Sequence[tuple[str, str]], current: str | None = None) -> None:
        """`choices`: (id, words) per line; the cursor starts on `current`'s line."""
        super().__init__()
        self.title_words = title
        self.choices = list(choices)
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="choose-box", classes=DIALOG) as box:
            set_title(box, fmt.safe(self.title_words, 60))
            box.border_subtitle = "enter choose · esc cancel"
            yield OptionList(
                *(
                    Option(Text(words, no_wrap=True, overflow="ellipsis"), id=key)
                    for key, words in self.choices
                ),
                id="choose-list",
            )

    def on_mount(self) -> None:
        keys = [key for key, _ in self.choices]
        if self.current in keys:
            self.query_one(OptionList).highlighted = keys.index(self.current)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(OptionList.OptionSelected, "#choose-list")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

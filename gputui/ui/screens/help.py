"""The help screen: every key binding, read from the classes that define them, and the kinds' meanings.

Built from the BINDINGS lists themselves so it cannot drift from what the keys do. A read-only app
lists no kill keys, as it offers none.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable

from .. import kinds
from ..widgets.filter_bar import FilterBar
from ..widgets.fleet_table import FleetTable
from ..widgets.gpu_table import GpuTable
from ..widgets.host_list import HostList
from ..widgets.proc_table import ProcTable
from ..widgets.status import StyledStatic
from ..widgets.table import KeyedTable
from .main import KILL_ACTIONS, MainScreen
from .plan import PlanScreen

SECTIONS: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("Everywhere", (MainScreen, Screen, App)),
    ("In every table", (KeyedTable, DataTable)),
    ("Host list", (HostList,)),
    ("GPU table", (GpuTable,)),
    ("Fleet table (All hosts)", (FleetTable,)),
    ("Process table", (ProcTable,)),
    ("Filter box", (FilterBar,)),
    ("Confirmation dialog (f, F, x)", (PlanScreen,)),
)
KILL_SECTIONS = {"Confirmation dialog (f, F, x)"}  # not shown read-only: there is no dialog
EXTRA: dict[str, list[tuple[str, str]]] = {
    "Everywhere": [("ctrl+p", "command palette (type “theme” to switch themes)")],
    "In every table": [
        ("mouse", "click a row to move there, a column header to sort by it, wheel to scroll")
    ],
    "Confirmation dialog (f, F, x)": [
        ("tab, enter", "on the Kill button: kill (focus starts on Cancel: enter alone cancels)"),
        ("↑↓ pgup pgdn", "scroll the lists"),
    ],
}
# DataTable's enter is each table's own (see its section); copying is for text areas.
HIDDEN_ACTIONS = {"screen.copy_text", "help_quit", "select_cursor", "refuse"}  # refuse: says why a
# kill key does nothing where it is not offered
HIDDEN_ACTIONS |= {"scroll(-1)", "scroll(1)", "scroll(-10)", "scroll(10)"}  # the dialog's: one line
DESCRIPTIONS = {
    "app.focus_next": "next pane",
    "app.focus_previous": "previous pane",
    "quit": "quit",
    "cursor_right": "scroll right (long command lines)",
    "cursor_left": "scroll left",
    "scroll_home": "scroll to the left edge",
    "scroll_end": "scroll to the right edge",
}


def _sentence(text: str) -> str:
    """Descriptions in one voice: "Previous host" -> "previous host" (acronyms stay)."""
    if len(text) > 1 and text[0].isupper() and not text[1].isupper():
        return text[0].lower() + text[1:]
    return text


def _own_bindings(cls: type) -> list[Binding]:
    found: list[Binding] = []
    for item in cls.__dict__.get("BINDINGS", []):
        if isinstance(item, Binding):
            found.append(item)
        elif isinstance(item, tuple):
            found.append(Binding(*item))
    return found


def binding_rows(app: App[Any], classes: tuple[type, ...], read_only: bool) -> list[tuple[str, str]]:
    """(keys, what they do) per action, in the order the classes define them."""
    by_action: dict[str, tuple[list[str], str]] = {}
    for cls in classes:
        for binding in _own_bindings(cls):
            action = binding.action
            name = action.split(".")[-1].split("(")[0]
            if action in HIDDEN_ACTIONS or name in HIDDEN_ACTIONS or (read_only and name in KILL_ACTIONS):
                continue
            base = action.split("(")[0]
            if base == "sort_column":  # nine bindings, one line
                action = base
            keys, description = by_action.get(action, ([], ""))
            for key in binding.key.split(","):
                shown = binding.key_display if binding.key_display and base != "sort_column" else None
                display = shown or app.get_key_display(Binding(key.strip(), action))
                if display not in keys:
                    keys.append(display)
            if base == "sort_column":
                keys[:] = ["1-9"]
                description = "sort by column 1 to 9; again: reverse"
            described = DESCRIPTIONS.get(action) or binding.tooltip or binding.description or action
            by_action[action] = (keys, description or described)
    return [(", ".join(keys), _sentence(description)) for keys, description in by_action.values()]


class HelpBody(StyledStatic):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *kinds.STYLE.values(),
        "help--section",
        "help--key",
        "status--muted",
    }

    def __init__(self, read_only: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.read_only = read_only

    def on_mount(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        app = self.app
        read_only = self.read_only
        text = Text()
        section = self.style_of("help--section")
        key_style = self.style_of("help--key")
        for title, classes in SECTIONS:
            if read_only and title in KILL_SECTIONS:
                continue
            rows = binding_rows(app, classes, read_only) + EXTRA.get(title, [])
            text.append(f"{title}\n", section)
            for keys, description in rows:
                text.append(f"  {keys:<13}", key_style)
                text.append(f"{description}\n")
            text.append("\n")
        text.append("Kinds of processes\n", section)
        for kind, meaning in kinds.MEANINGS.items():
            text.append(f"  {kinds.label(kind):<13}", self.style_of(kinds.STYLE[kind]))
            text.append(f"{meaning}\n")
        text.append("\n")
        if read_only:
            text.append(
                "Read-only: gputui offers no way to signal a process.\n", self.style_of("status--muted")
            )
        text.append("escape, q or ? closes this screen", self.style_of("status--muted"))
        self.set_text(text)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "Close", key_display="esc"),
    ]

    def __init__(self, read_only: bool = False) -> None:
        super().__init__()
        self.read_only = read_only  # a read-only app lists no kill keys: it offers none

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box") as box:
            box.border_title = "gputui · keys"
            yield HelpBody(self.read_only, id="help-body")

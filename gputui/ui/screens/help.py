"""The help screen: every key binding, read from the classes that define them, and the kinds' meanings.

Built from the BINDINGS lists themselves so it cannot drift from what the keys do. A read-only app
lists no kill keys, as it offers none. Keys are written one way (`ctrl+p`, `enter`: fmt.key_name), and
a description that wraps stays in its column.
"""

from __future__ import annotations

import io
from typing import Any, ClassVar

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable

from gputui.views.filter import help_lines

from .. import kinds
from ..fmt import key_name
from ..panels.kill import KILL_ACTIONS
from ..widgets.filter_bar import FilterBar
from ..widgets.fleet_table import FleetTable
from ..widgets.gpu_table import GpuTable
from ..widgets.host_list import HostList
from ..widgets.proc_table import ProcTable
from ..widgets.status import StyledStatic
from ..widgets.table import KeyedTable
from ..widgets.user_table import UserTable
from .dialog import DIALOG, SCROLL_BINDINGS, Dialog
from .gpu_detail import GpuDetailScreen
from .main import MainScreen
from .plan import PlanScreen
from .proc_detail import ProcDetailScreen
from .users import UsersScreen

SECTIONS: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("Everywhere", (MainScreen, Screen, App)),
    ("In every table", (KeyedTable, DataTable)),
    ("Host list", (HostList,)),
    ("GPU table", (GpuTable,)),
    ("Fleet table (All hosts)", (FleetTable,)),
    ("Process table", (ProcTable,)),
    ("Filter box", (FilterBar,)),
    ("Users view (U)", (UsersScreen, UserTable)),
    ("Confirmation dialog (f, F, x, X, T, K, I, F9)", (PlanScreen,)),
    ("GPU view (i)", (GpuDetailScreen,)),
    ("Process detail (d)", (ProcDetailScreen,)),
)
KILL_SECTIONS = {"Confirmation dialog (f, F, x, X, T, K, I, F9)"}  # not shown read-only: there is no dialog
EXTRA: dict[str, list[tuple[str, str]]] = {
    "Everywhere": [("ctrl+p", "command palette: gputui's commands (export, sweep…) and themes")],
    "In every table": [
        ("mouse", "click a row to move there, a column header to sort by it, wheel to scroll")
    ],
    "Fleet table (All hosts)": [
        ("1-9, 0", FleetTable.sort_keys_text()),
        (
            "order",
            "problems first, worst first: down, stale, no GPU, error, ECC, ghost, orphaned, outside, "
            "idle holders, throttling, GPUs that differ; then healthy hosts folded, a line per group",
        ),
    ],
    "Filter box": [(f"  {how}", words) for how, words in help_lines()],
    "Users view (U)": [("1-9, 0", UserTable.sort_keys_text())],
    "Process table": [("1-9, 0", ProcTable.sort_keys_text())],
    "Confirmation dialog (f, F, x, X, T, K, I, F9)": [
        ("tab, enter", "on the Kill button: kill (focus starts on Cancel: enter alone cancels)"),
        ("↑↓ pgup pgdn", "scroll the lists"),
    ],
}
# DataTable's enter is each table's own (see its section); copying is for text areas.
HIDDEN_ACTIONS = {"screen.copy_text", "help_quit", "select_cursor", "refuse"}  # refuse: says why a
# kill key does nothing where it is not offered
HIDDEN_ACTIONS |= {b.action for b in SCROLL_BINDINGS}  # the dialogs': one line
# A table is never wider than its pane: nothing to scroll sideways (the process table's → and ←
# move along the command lines, listed there).
HIDDEN_ACTIONS |= {"cursor_right", "cursor_left", "scroll_home", "scroll_end"}
DESCRIPTIONS = {
    "app.focus_next": "next pane",
    "app.focus_previous": "previous pane",
    "quit": "quit",
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
            if (
                action in HIDDEN_ACTIONS
                or name in HIDDEN_ACTIONS
                or (read_only and name in (*KILL_ACTIONS, "reset"))
            ):
                continue
            base = action.split("(")[0]
            if base == "sort_column":  # nine bindings, one line
                action = base
            keys, description = by_action.get(action, ([], ""))
            for key in binding.key.split(","):
                shown = binding.key_display if binding.key_display and base != "sort_column" else None
                display = key_name(shown or app.get_key_display(Binding(key.strip(), action)))
                if display not in keys:
                    keys.append(display)
            if base == "sort_column":
                keys[:] = ["1-9, 0"]
                description = "sort by a column (each table lists its numbers); again: reverse"
            described = DESCRIPTIONS.get(action) or binding.tooltip or binding.description or action
            by_action[action] = (keys, description or described)
    return [(", ".join(keys), _sentence(description)) for keys, description in by_action.values()]


class HelpBody(StyledStatic):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *kinds.STYLE.values(),
        "help--section",
        "help--key",
        "status--muted",
        "proc--job",
    }

    def __init__(self, read_only: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.read_only = read_only
        self._group = Group()

    def on_mount(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        app = self.app
        read_only = self.read_only
        section = self.style_of("help--section")
        key_style = self.style_of("help--key")
        muted = self.style_of("status--muted")
        parts: list[RenderableType] = []
        for title, classes in SECTIONS:
            if read_only and title in KILL_SECTIONS:
                continue
            if title == "Everywhere":  # the app's own keys (ctrl+q, ctrl+c), whatever app this is
                classes = (*classes[:-1], type(app), *classes[-1:])
            rows = binding_rows(app, classes, read_only) + EXTRA.get(title, [])
            parts.append(Text(title, section))
            parts.append(_grid([(Text(keys, key_style), Text(words)) for keys, words in rows]))
            parts.append(Text())
        parts.append(Text("Kinds of processes", section))
        kind_rows = [
            (Text(kinds.label(kind), self.style_of(kinds.STYLE[kind])), Text(meaning))
            for kind, meaning in kinds.MEANINGS.items()
        ]
        parts.append(_grid(kind_rows))
        parts.append(Text())
        parts.append(Text("MIG and MPS", section))
        marks = [(Text(mark, key_style), Text(meaning)) for mark, meaning in kinds.MIG_MEANINGS]
        marks += [
            (Text(f"{kinds.GLYPHS['monitor' if role != 'client' else 'user']} {word}", key_style),
             Text(kinds.MPS_MEANINGS[role]))
            for role, word in kinds.MPS_WORDS.items()
        ]  # fmt: skip
        parts.append(_grid(marks))
        parts.append(Text())
        parts.append(Text("Jobs", section))
        job_style = self.style_of("proc--job")
        parts.append(_grid([(Text(mark, job_style), Text(meaning)) for mark, meaning in kinds.JOB_MEANINGS]))
        parts.append(Text())
        if read_only:
            parts.append(Text("Read-only: gputui offers no way to signal a process.", muted))
        parts.append(Text("esc, q or ? closes this screen", muted))
        signature = tuple(str(p) for p in parts)
        if signature != self._last:
            self._last = signature
            self._group = Group(*parts)
            self.update(self._group)

    def plain(self, width: int | None = None) -> str:
        """What the help says, as plain text laid out at `width` (default: its own)."""
        console = Console(width=width or self.size.width or 96, file=io.StringIO(), color_system=None)
        with console.capture() as capture:
            console.print(self._group)
        return capture.get()


KEY_COLUMN = 14  # wide enough for every key list; a longer one wraps in its column


def _grid(rows: list[tuple[Text, Text]]) -> Table:
    """Keys and what they do in two columns: a description that wraps stays in its column."""
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(width=2)  # the indent under the section title
    grid.add_column(width=KEY_COLUMN)
    grid.add_column(ratio=1)
    for keys, words in rows:
        grid.add_row("", keys, words)
    return grid


class HelpScreen(Dialog[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "Close", key_display="esc"),
    ]

    def __init__(self, read_only: bool = False) -> None:
        super().__init__()
        self.read_only = read_only  # a read-only app lists no kill keys: it offers none

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box", classes=DIALOG) as box:
            box.border_title = "gputui · keys"
            yield HelpBody(self.read_only, id="help-body")

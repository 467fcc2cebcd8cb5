"""The users view (`U`): GPUs and memory per user across the fleet, with their idle holders.

Who holds the fleet is the question at a thousand hosts ("who has 40 GPUs?", "whose memory sits
idle?"). One row per user over the live hosts (gputui.views.problems.user_usage), redrawn every second;
enter on a user goes back to the fleet table filtered to that user's GPUs (`user:NAME`), escape
goes back as it was."""

from __future__ import annotations

from typing import ClassVar, cast

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen

from gputui.text.units import fmt_memory
from gputui.text.words import count
from gputui.views.problems import user_usage

from ..context import Dashboard
from ..widgets.borders import set_title
from ..widgets.footer import Footer
from ..widgets.user_table import UserTable

REFRESH_S = 1.0


class UsersScreen(Screen[str | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", key_display="esc"),
        Binding("q", "back", "Back", show=False),
        Binding("U", "back", "Back", show=False),
        Binding("question_mark", "app.help", "Help", key_display="?"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._drawn: tuple[object, ...] | None = None

    @property
    def dash(self) -> Dashboard:
        return cast(Dashboard, self.app)

    def compose(self) -> ComposeResult:
        yield UserTable(id="users")
        yield Footer()

    def on_mount(self) -> None:
        self.table = self.query_one(UserTable)
        self.table.exact_memory = self.dash.exact_memory
        self.call_after_refresh(self.redraw)  # once mounted: the first figures at once, not in a second
        self.table.focus()
        self.set_interval(REFRESH_S, self.redraw)

    def redraw(self) -> None:
        if not self.is_mounted:
            return
        hosts = self.dash.fleet.hosts
        key = (tuple(v.received for v in hosts), tuple(v.status for v in hosts), self.app.theme)
        if key == self._drawn:
            return
        self._drawn = key
        users, left_out = user_usage(hosts, self.dash.idle_after)
        self.table.show_users(users)
        live = len(hosts) - left_out
        memory = sum(u.memory for u in users)
        gpus = sum(len(u.gpus) for u in users)
        title = (
            f"Users · {count(len(users), 'user')} on {count(live, 'live host')} · "
            f"{gpus} GPUs, {fmt_memory(memory, self.dash.exact_memory)} held"
        )
        if left_out:
            title += f" · {count(left_out, 'host')} not live left out"
        idle = sum(u.idle_holders for u in users)
        if idle:
            title += f" · {count(idle, 'idle holder')} (I on the main screen selects them)"
        set_title(self.table, title)

    def action_back(self) -> None:
        self.dismiss(None)

    def action_choose(self) -> None:
        self.dismiss(self.table.cursor_user)

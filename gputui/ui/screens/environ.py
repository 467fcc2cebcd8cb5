"""A process's environment (`e` on the process detail, as nvitop's `e`).

The host's probe reads /proc/PID/environ when asked (the `detail` request with `environ`), for
(pid, start time): a process that has exited or whose PID names another one is said to be gone. It
reads it only where /proc would let its user (the process's own user, or root), and keeps back the
values of secret-looking names (`TOKEN`, `SECRET`, `KEY`, `PASSWORD`, ... : gputui/probe/detail.py)
until the operator asks: `s` reads it again with them, and hides them again. A hidden value shows
as `••••`. Every name and value is shown literally (made printable at the edge, never markup).
"""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll

from gputui.model import ProcDetail
from gputui.text.words import count

from .. import fmt
from ..widgets.borders import set_title
from ..widgets.detail_body import DetailBody, no_answer_words, unread_words
from .dialog import DIALOG, SCROLL_BINDINGS, Dialog

HIDDEN = "••••"  # a secret-looking value the probe kept back
NAME_WIDTH = 28  # columns for the names; a longer one wraps


class EnvironScreen(Dialog[None]):
    """A process's environment, read from its host's /proc each time it is asked for."""

    SCROLLS = "#env-box"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,e", "dismiss", "Close", key_display="esc"),
        Binding(
            "s", "toggle_secrets", "Secrets", tooltip="show the values of secret-looking names (again: hide)"
        ),
        Binding("r", "reread", "Read again", tooltip="read the environment from /proc again"),
        *SCROLL_BINDINGS,
    ]

    def __init__(self, host: str, pid: int, start_time: int) -> None:
        super().__init__()
        self.host = host
        self.pid = pid
        self.start_time = start_time
        self.secrets = False  # whether the values of secret-looking names are asked for
        self.detail: ProcDetail | None = None
        self.status = "reading"  # reading, read, no-answer, gone

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="env-box", classes=DIALOG) as box:
            set_title(box, f"Environment of {self.pid} · {fmt.safe(self.host, 40)}")
            box.border_subtitle = "s show or hide secrets · r read again · esc close"
            yield DetailBody(id="env-body")

    def on_mount(self) -> None:
        self.body = self.query_one(DetailBody)
        self.action_reread()

    def action_reread(self) -> None:
        self.status = "reading"
        self.redraw()
        self.run_worker(self._read(self.secrets), exclusive=True, group="environ")

    def action_toggle_secrets(self) -> None:
        self.secrets = not self.secrets
        if self.secrets:
            self.action_reread()  # asked for now: the probe sends them only when asked
        else:
            self.redraw()  # hidden again at once, without a round trip

    async def _read(self, secrets: bool) -> None:
        detail = await self.dash.fleet.request_detail(
            self.host, self.pid, self.start_time, environ=True, secrets=secrets
        )
        if not self.is_attached:
            return
        self.detail = detail
        self.status = "no-answer" if detail is None else "read" if detail.ok else "gone"
        self.redraw()

    # -- drawing -----------------------------------------------------------------------------

    def redraw(self) -> None:
        body = self.body
        parts: list[Text | Table] = [self._status(), Text()]
        detail = self.detail
        if self.status == "read" and detail is not None and detail.environ:
            parts.append(self._grid(detail))
        body.show(parts)  # type: ignore[arg-type]

    def _grid(self, detail: ProcDetail) -> Table:
        label = self.body.style_of("pdetail--label")
        muted = self.body.style_of("pdetail--muted")
        warn = self.body.style_of("pdetail--warn")
        grid = Table.grid(padding=(0, 1, 0, 0))
        grid.add_column(width=NAME_WIDTH, overflow="fold")
        grid.add_column(ratio=1, overflow="fold")
        for var in detail.environ or ():
            if var.secret and (var.value is None or not self.secrets):
                value = Text(HIDDEN, muted)
            else:
                value = Text(var.value or "", warn if var.secret else "", overflow="fold")
            grid.add_row(Text(var.name, label, overflow="fold"), value)
        return grid

    def _status(self) -> Text:
        body = self.body
        status, warn = body.style_of("pdetail--status"), body.style_of("pdetail--warn")
        host = fmt.safe(self.host, 40)
        detail = self.detail
        if self.status == "reading":
            return Text(f"Reading /proc/{self.pid}/environ on {host}…", status)
        if self.status == "no-answer" or detail is None:
            return Text(f"{no_answer_words(host)}. r: read again.", warn)
        if self.status == "gone":
            return Text(f"PID {self.pid} {unread_words(detail)}.", warn)
        refused = detail.unreadable.get("environ")
        if refused:
            return Text(f"Not read: {refused}.", warn)
        if detail.environ is None:
            return Text(
                f"The probe on {host} did not send the environment (an older probe, or a recording).", warn
            )
        shown = detail.environ
        words = f"{count(len(shown), 'variable')} read from /proc on {host} just now"
        if detail.environ_more:
            words += f"; {detail.environ_more} more left out"
        if detail.environ_cut:
            words += "; only the first 64 KiB read"
        hidden = sum(1 for v in shown if v.secret)
        them = "it" if hidden == 1 else "them"
        if hidden and not self.secrets:
            words += f"; {count(hidden, 'secret-looking value')} hidden (s shows {them})"
        elif hidden:
            words += f"; {count(hidden, 'secret-looking value')} shown (s hides {them})"
        return Text(words + ".", status)

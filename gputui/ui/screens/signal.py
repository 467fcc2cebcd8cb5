"""The signal chooser (`k` on the process detail): any signal by name, as htop's `k`.

It lists the signals a `signal` plan may send (gputui.probe.common.SIGNAL_CHOICES: SIGTERM, SIGINT,
SIGHUP, SIGUSR1, SIGUSR2, SIGQUIT, SIGSTOP, SIGCONT, SIGKILL) with what each does, and returns the
one chosen, or None. Nothing is sent from here: the detail screen asks the app for a plan
(gputui.kill.plan.plan_for_signal), which the plan dialog confirms, naming the process and the signal;
the host's probe checks the process again and sends the signal once (docs/PROTOCOL.md "Signal").
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from gputui.kill.plan.signal import SIGNAL_MEANINGS

from .. import fmt
from ..widgets.borders import set_title
from .dialog import DIALOG, Dialog


class SignalScreen(Dialog[str | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "cancel", "Cancel", key_display="esc", tooltip="send nothing"),
    ]
    AUTO_FOCUS = "#signal-list"

    def __init__(self, host: str, pid: int, command: str) -> None:
        super().__init__()
        self.host = host
        self.pid = pid
        self.command = command

    def compose(self) -> ComposeResult:
        with Vertical(id="signal-box", classes=DIALOG) as box:
            set_title(box, f"Send a signal to {self.pid} · {fmt.safe(self.host, 40)}")
            box.border_subtitle = "enter choose (a confirmation follows) · esc cancel"
            yield Static(
                Text(f"{self.pid} {fmt.safe(self.command, 200)}", overflow="ellipsis", no_wrap=True),
                id="signal-who",
            )
            yield OptionList(
                *(
                    Option(Text(f"{name:<8} {meaning}", no_wrap=True, overflow="ellipsis"), id=name)
                    for name, meaning in SIGNAL_MEANINGS.items()
                ),
                id="signal-list",
            )

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(OptionList.OptionSelected, "#signal-list")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

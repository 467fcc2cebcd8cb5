"""The reset confirmation: a GPU reset is a plan of its own, never automatic.

The app first asks the probe for a dry run (gputui/probe/run/reset.py): what blocks a reset of this GPU
(every process holding its device file or nvidiactl, monitors included; MIG; a display; NVLink peers;
root) and the steps it would take. While anything blocks it, the dialog lists the blockers and
offers only Close. Otherwise it names the GPU, the memory a reset would free, what a reset affects,
and the steps; focus starts on Cancel and resetting takes ctrl+k (or the Reset button).
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import BindingType
from textual.widgets import Static

from gputui.model import MemoryAccount, PlanVerdict
from gputui.text.words import part_words

from .. import fmt
from ..widgets.borders import set_title
from .dialog import Confirm, answer_bindings


class ResetScreen(Confirm):
    BINDINGS: ClassVar[list[BindingType]] = answer_bindings("Reset")
    AUTO_FOCUS = "#reset-cancel"
    NAME = "reset"
    YES = "Reset"

    def __init__(self, host: str, gpu: int, dry_run: PlanVerdict, account: MemoryAccount | None) -> None:
        super().__init__()
        self.host = host
        self.gpu = gpu
        self.dry_run = dry_run
        self.account = account

    @property
    def blocked(self) -> bool:
        return bool(self.dry_run.blockers) or self.dry_run.result != "dry-run"

    @property
    def refused(self) -> bool:
        return self.blocked

    def on_mount(self) -> None:
        host = fmt.safe(self.host, 60)
        title = (
            f"Reset GPU {self.gpu} on {host}?" if not self.blocked else f"GPU {self.gpu} on {host}: no reset"
        )
        set_title(self.query_one("#reset-box"), title)
        text = Text()
        if self.account is not None and self.account.orphaned:
            text.append(part_words(self.account, "orphaned") + "\n\n")
        if self.blocked:
            if self.dry_run.blockers:
                text.append("A reset is refused while any of these remains:\n", "bold")
                for blocker in self.dry_run.blockers:
                    text.append(f"  • {fmt.safe(blocker, 200)}\n")
                text.append("\nStop them (or wait for them to end), then press r again.")
            else:
                text.append(fmt.safe(self.dry_run.message, 300) or "The probe did not answer the dry run.")
        else:
            text.append("The steps:\n", "bold")
            for i, step in enumerate(self.dry_run.ladder, 1):
                text.append(f"  {i}. {fmt.safe(step, 200)}\n")
            text.append(
                "\nA reset clears everything on this GPU for every user of the host: its memory, its "
                "volatile ECC counts, its clocks and application settings. Nothing holds it now (the "
                "probe checked); the probe checks again right before the reset."
            )
        self.query_one("#reset-text", Static).update(text)

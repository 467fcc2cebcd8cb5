"""What every record of one process says of it (docs/PROTOCOL.md): its name and command line, its
owner, its state and its parent. A sample's processes and their parents, a job's root and a process
in full (gputui.model.samples, .jobs, .detail) carry these fields under the same wire names, read
the same way (by their declared types, gputui.model.decode.BY_TYPE); each adds its own identity and
the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..probe.common import brief_command


# Keyword-only: a record that adds its own fields keeps its positional ones first, and a caller names
# these (a positional call past a record's identity is a TypeError, never a field set wrong).
@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessFacts:
    """A process's name (comm), command line, owner, state (R, S, D, Z...) and parent's PID."""

    name: str | None = None
    command: tuple[str, ...] = ()
    user: str | None = None
    uid: int | None = None
    state: str | None = None
    ppid: int | None = None

    @property
    def command_line(self) -> str:
        """The command as people say it: `python train.py`, long paths cut to `.../name`; `[name]`
        for a process without a command line (a kernel thread), `-` for one without either."""
        return brief_command(list(self.command)) if self.command else (f"[{self.name}]" if self.name else "-")

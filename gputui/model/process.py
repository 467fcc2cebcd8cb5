"""What every record of one process says of it (docs/PROTOCOL.md): its name and command line, its
owner, its state and its parent. A sample's processes and their parents, a job's root and a process
in full (gputui.model.samples, .jobs, .detail) carry these fields under the same wire names, read
the same way (by their declared types, gputui.model.decode.BY_TYPE); each adds its own identity and
the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..probe.common import brief_command


def brief_process(command: Sequence[str], name: str | None, unnamed: str = "?") -> str:
    """A process as people say it: its command line cut short (`python .../train.py`), else its name
    in brackets (a kernel thread has no command line: `[kworker/0:1]`), else `unnamed`."""
    return brief_command(command) or (f"[{name}]" if name else unnamed)


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
        """The command as people say it (brief_process), `-` for a process without a command line
        or a name."""
        return brief_process(self.command, self.name, "-")

"""The process table: processes that use or hold the selected GPU (or any GPU of the host)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message

from gputui.model import Proc, Sample
from gputui.units import fmt_duration, fmt_memory, fmt_percent, index_runs

from .. import fmt, kinds
from .table import ELLIPSIS, Cell, Column, KeyedTable, Row, Styled

ProcKey = tuple[int, int | None]


def proc_row_key(proc: Proc) -> str:
    return f"{proc.pid}:{proc.start_time if proc.start_time is not None else '-'}"


@dataclass(frozen=True, slots=True)
class ProcScope:
    """What the table shows: the processes of `host` on GPU `gpu` (None: all of the host's)."""

    host: str
    gpu: int | None = None


class ProcTable(KeyedTable):
    COLUMNS = (
        Column("sel", " ", width=1, priority=0, sortable=False),
        Column("pid", "PID", width=7, justify="right", descending=False),
        Column("user", "User", width=9, priority=2, cut=True),
        Column("kind", "Kind", width=9, priority=0),
        Column("gpu", "GPU", width=3, priority=1),
        Column("mem", "GPU mem", width=8, justify="right", descending=True, priority=1),
        Column("sm", "SM%", width=4, justify="right", descending=True, priority=4),
        Column("cpu", "CPU%", width=5, justify="right", descending=True, priority=5),
        Column("rss", "RSS", width=8, justify="right", descending=True, priority=6),
        # Not sortable: D and Z are coloured, and the ten sort keys go to the columns people sort by.
        Column("state", "St", width=2, priority=3, sortable=False),
        Column("elapsed", "Elapsed", width=7, justify="right", descending=True, priority=4),
        Column("command", "Command", nominal=24, priority=0, flex=True, cut=True),
    )
    DEFAULT_SORT = ("mem", True)
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *kinds.STYLE.values(),
        "proc--note",
        "proc--muted",
        "proc--warn",
        "proc--selected",
        "proc--here",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "space",
            "screen.toggle_select",
            "Select",
            key_display="space",
            tooltip="select or unselect the process",
        ),
        Binding("enter", "screen.plan", "Plan", show=False, tooltip="kill the selected processes (x)"),
        # Where kill keys are not offered, pressing them says why (MainScreen.kill_refusal).
        Binding("space", "screen.refuse('toggle_select')", show=False),
        Binding("enter", "screen.refuse('plan')", show=False),
        Binding(
            "right", "scroll_command(1)", "Command →", show=False, tooltip="show more of the command lines"
        ),
        Binding("left", "scroll_command(-1)", "Command ←", show=False, tooltip="back towards their start"),
        Binding("home", "scroll_command(0)", "Command start", show=False, tooltip="their start again"),
    ]
    COMMAND_STEP = 16  # characters per press of → or ←

    class CommandScrolled(Message):
        """The command column shows another part of the command lines: the rows need a new sync."""

    def __init__(self, *, id: str | None = None, selectable: bool = True) -> None:
        super().__init__(id=id)
        self.selectable = selectable
        # Where the command column starts in each command line: → and ← move it, as in nvitop (the
        # other columns stay in place, so the PID and the memory stay in view).
        self.command_offset = 0
        self._longest_command = 0

    def action_scroll_command(self, direction: int) -> None:
        if direction == 0:
            offset = 0
        else:
            offset = self.command_offset + direction * self.COMMAND_STEP
            # No further than the end of the longest line at the right edge of the column.
            offset = max(0, min(offset, self._longest_command + 1 - self.width_of("command")))
        if offset != self.command_offset:
            self.command_offset = offset
            self.post_message(self.CommandScrolled())

    def available_columns(self) -> tuple[Column, ...]:
        if self.selectable:
            return self.COLUMNS
        return tuple(c for c in self.COLUMNS if c.key != "sel")

    def show(
        self,
        sample: Sample | None,
        scope: ProcScope,
        filter_text: str = "",
        selected: Collection[ProcKey] = (),
    ) -> None:
        procs = sample.processes if sample is not None else ()
        if scope.gpu is not None:
            procs = tuple(p for p in procs if scope.gpu in p.gpus)
        needle = filter_text.casefold()
        self._longest_command = max((len(kinds.command(p)) for p in procs), default=0)
        rows: dict[str, Row] = {}
        for proc in procs:
            if needle and not matches(proc, needle):
                continue
            rows[proc_row_key(proc)] = self.row(proc, sample, scope.gpu, proc.key in selected)
        self.sync(rows)

    def row(self, proc: Proc, sample: Sample | None, gpu: int | None, selected: bool) -> Row:
        muted = self.style_of("proc--muted")
        kind_style = self.style_of(kinds.STYLE.get(proc.kind, "kind--hidden"))
        if gpu is not None:
            mem: int | None = proc.gpu_memory.get(gpu) if gpu in proc.gpu_memory else None
        else:
            mem = proc.gpu_bytes if proc.gpu_memory else None
        command = kinds.command(proc)
        note_style = self.style_of("proc--note")
        # The note first: for a ghost, hidden holder or zombie it matters more than the command. Its
        # PIDs are kept whole when the column is narrow; the words give way (table.fit).
        cmd = Cell(sort_key=command.casefold())
        if self.command_offset:  # scrolled: the rest of the command line, the start cut off
            cmd.add(ELLIPSIS + command[self.command_offset :] if command else "", "")
        else:
            note = kinds.note_parts(proc, sample)
            for text, number in note:
                cmd.add(text, note_style, keep=number)
            if command:
                cmd.add((" · " if note else "") + command)
        state = proc.state or "-"
        return {
            "sel": Cell("●" if selected else " ", self.style_of("proc--selected"), sort_key=not selected),
            "pid": Cell(str(proc.pid), sort_key=proc.pid),
            "user": Cell(fmt.safe(proc.user, 32) or "-", "" if proc.user else muted),
            "kind": Cell(kinds.proc_label(proc), kind_style, sort_key=kinds.ORDER.get(proc.kind, 9)),
            "gpu": gpus_cell(self, proc, gpu),
            "mem": Cell(fmt_memory(mem, self.exact_memory), kind_style, sort_key=mem or 0),
            "sm": self.sm_cell(proc, gpu),
            "cpu": Cell(fmt_percent(proc.cpu_percent), sort_key=proc.cpu_percent or 0.0),
            "rss": Cell(fmt_memory(proc.rss, self.exact_memory), sort_key=proc.rss or 0),
            "state": Cell(state, self.style_of("proc--warn") if state in ("D", "Z") else "", sort_key=state),
            "elapsed": Cell(fmt_duration(proc.elapsed), sort_key=proc.elapsed or 0.0),
            "command": cmd,
        }

    def sm_cell(self, proc: Proc, gpu: int | None) -> Cell:
        """SM utilization on the GPU in view, or the highest over its GPUs on the host's view."""
        sm = proc.sm_util(gpu)
        if sm is None:
            return Cell("-", self.style_of("proc--muted"), sort_key=-1)
        return Cell(f"{sm}%", sort_key=sm)

    @property
    def cursor_proc_key(self) -> ProcKey | None:
        key = self.cursor_key
        if key is None:
            return None
        pid, _, start = key.partition(":")
        return (int(pid), None if start == "-" else int(start))


def gpus_cell(styled: Styled, proc: Proc, gpu: int | None) -> Cell:
    """The GPUs a process uses or holds (`0,1`, `0-3`); in a GPU's view, that GPU stands out. The
    process table's GPU column, and the GPU view's where it shows MIG instances."""
    if not proc.gpus:
        return Cell("-", styled.style_of("proc--muted"), sort_key=(1, ()))
    if proc.mig:
        return mig_cell(styled, proc, gpu)
    cell = Cell(sort_key=(0, tuple(sorted(proc.gpus))))
    for i, (text, indexes) in enumerate(index_runs(proc.gpus)):
        if i:
            cell.add(",")
        here = gpu is not None and gpu in indexes
        cell.add(text, styled.style_of("proc--here") if here else "", keep=True)
    return cell


def mig_cell(styled: Styled, proc: Proc, gpu: int | None) -> Cell:
    """A process in MIG instances: each GPU with its instance (`0:1.0`: GPU 0, GPU instance 1,
    compute instance 0), the others by index."""
    cell = Cell(sort_key=(0, tuple(sorted(proc.gpus))))
    for i, index in enumerate(sorted(proc.gpus)):
        if i:
            cell.add(",")
        text = ",".join(p.label for p in proc.mig_on(index)) or str(index)
        cell.add(text, styled.style_of("proc--here") if index == gpu else "", keep=True)
    return cell


def matches(proc: Proc, needle: str) -> bool:
    """The filter: a case-insensitive piece of the command line, name, user or PID."""
    hay = (" ".join(proc.command), proc.name or "", proc.user or "", str(proc.pid))
    return any(needle in h.casefold() for h in hay)

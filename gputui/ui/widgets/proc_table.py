"""The process table: processes that use or hold the selected GPU (or any GPU of the host).

Three views of the same processes: a list, the tree of families (`t`, gputui.ui.tree) and the jobs
(`J`, gputui.ui.jobs: each job a row above its members). The Container column shows only when a
process of the host has a container (seen from the host: `lxc/129`, `docker/<id>`, `pod/<uid>`)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message

from gputui.fleet.idle import span
from gputui.model import Job, Parent, Proc, Sample, brief_command
from gputui.model.textsafe import ELLIPSIS
from gputui.text.units import elapsed_shown, fmt_memory, fmt_percent, index_runs
from gputui.text.words import gpu_place

from .. import fmt, jobs, kinds, tree
from .cells import Cell, Row, Styled, dim
from .columns import Column
from .fold_keys import fold_key, unfold_key
from .table import KeyedTable

ProcKey = tuple[int, int | None]
CONTEXT = "~"  # the row key prefix of a tree's context rows (not in the list; see gputui.ui.tree)
JOB = "@"  # the row key prefix of a job's row in the jobs view (gputui.ui.jobs)
COMMAND_ROOM = 40  # characters of a command line shown before CPU%, RSS, St and Elapsed come


def proc_row_key(proc: Proc | Parent) -> str:
    return f"{proc.pid}:{proc.start_time if proc.start_time is not None else '-'}"


def context_row_key(record: Proc | Parent) -> str:
    return CONTEXT + proc_row_key(record)


def job_row_key(job: Job) -> str:
    return JOB + job.id


def key_of(row_key: str) -> ProcKey:
    """(pid, start time) of a row key, a context row's too."""
    pid, _, start = row_key.removeprefix(CONTEXT).partition(":")
    return (int(pid), None if start == "-" else int(start))


@dataclass(frozen=True, slots=True)
class ProcScope:
    """What the table shows: the processes of `host` on GPU `gpu` (None: all of the host's)."""

    host: str
    gpu: int | None = None


class ProcTable(KeyedTable):
    COLUMNS = (
        Column("sel", " ", width=1, priority=0, sortable=False),
        # As wide as the widest PID (4 digits in a container, 7 where pid_max is 4194304).
        Column("pid", "PID", justify="right", descending=False),
        # As wide as the longest user name, up to 9 (then cut): `root` takes 5.
        Column("user", "User", nominal=9, priority=2, cut=True),
        # Only while a process of the host has one (available_columns). Not sortable: the ten sort
        # keys keep their columns; the filter (/) finds a container's processes.
        Column("container", "Container", nominal=10, priority=5, cut=True, sortable=False),
        Column("kind", "Kind", width=9, priority=0),
        Column("gpu", "GPU", width=3, priority=1),
        Column("mem", "GPU mem", width=8, justify="right", descending=True, priority=1),
        Column("sm", "SM%", width=4, justify="right", descending=True, priority=3),
        Column("cpu", "CPU%", width=5, justify="right", descending=True, priority=7),
        Column("rss", "RSS", width=8, justify="right", descending=True, priority=8),
        # Not sortable: D and Z are coloured, and the ten sort keys go to the columns people sort by.
        Column("state", "St", width=2, priority=5, sortable=False),
        Column("elapsed", "Elapsed", width=7, justify="right", descending=True, priority=6),
        # What people read to know a process: COMMAND_ROOM of it before the optional numbers
        # (after SM%, which says whether it works) come.
        Column(
            "command",
            "Command",
            nominal=24,
            priority=0,
            flex=True,
            cut=True,
            room=COMMAND_ROOM,
            room_priority=4,
        ),
    )
    DEFAULT_SORT = ("mem", True)
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *kinds.STYLE.values(),
        "proc--note",
        "proc--muted",
        "proc--warn",
        "proc--selected",
        "proc--here",
        "proc--context",
        "proc--tree",
        "proc--job",
        "proc--stale",
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
        # Where kill keys are not offered, pressing them says why (gputui/ui/panels/kill.py).
        Binding("space", "screen.refuse('toggle_select')", show=False),
        Binding("enter", "screen.refuse('plan')", show=False),
        Binding(
            "right", "scroll_command(1)", "Command →", show=False, tooltip="show more of the command lines"
        ),
        Binding("left", "scroll_command(-1)", "Command ←", show=False, tooltip="back towards their start"),
        Binding("home", "scroll_command(0)", "Command start", show=False, tooltip="their start again"),
        Binding("d", "screen.proc_detail", "Detail", tooltip="everything about the process under the cursor"),
        Binding(
            "u",
            "screen.tag_user",
            "Tag user",
            show=False,
            tooltip="select every process of its user here (again: unselect)",
        ),
        Binding(
            "full_stop",
            "screen.follow",
            "Follow",
            key_display=".",
            show=False,
            tooltip="keep the cursor on this process as rows move (again: stop)",
        ),
        Binding("u", "screen.refuse('tag_user')", show=False),
        fold_key("tree and jobs: fold the family (or job) under the cursor"),
        unfold_key("tree and jobs: unfold it again"),
    ]
    COMMAND_STEP = 16  # characters per press of → or ←

    class CommandScrolled(Message):
        """The command column shows another part of the command lines: the rows need a new sync."""

    class TreeChanged(Message):
        """A family was folded or unfolded: the rows need a new sync."""

    def __init__(self, *, id: str | None = None, selectable: bool = True) -> None:
        super().__init__(id=id)
        self.selectable = selectable
        # Where the command column starts in each command line: → and ← move it, as in nvitop (the
        # other columns stay in place, so the PID and the memory stay in view).
        self.command_offset = 0
        self._longest_command = 0
        # The tree view (t): families drawn with box characters; folded nodes by row key.
        self.tree_mode = False
        # The jobs view (J): each job a row above its members; the job rows by row key.
        self.jobs_mode = False
        self.job_rows: dict[str, Job] = {}
        self.folded: set[str] = set()
        self._tree: dict[str, tree.Node] = {}
        self._tree_version = 0  # one more for each tree built: what the order kept was made from
        self._order: tuple[tuple[Any, ...], list[tree.Line]] | None = None
        # The processes the list holds now (scope and filter; a folded family's included).
        self.in_view: tuple[Proc, ...] = ()
        self.containers = False  # a process of the host has a container: the column is offered
        # The idle holders of the host in view (gputui/fleet/idle.py): their seconds at 0 % SM.
        self.idle: Mapping[ProcKey, float] = {}

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
        left_out = set() if self.selectable else {"sel"}
        if not self.containers:
            left_out.add("container")
        return tuple(c for c in self.COLUMNS if c.key not in left_out) if left_out else self.COLUMNS

    def show(
        self,
        sample: Sample | None,
        scope: ProcScope,
        filter_text: str = "",
        selected: Collection[ProcKey] = (),
        live: bool = True,
        keep: Callable[[Proc], bool] | None = None,
        idle: Mapping[ProcKey, float] | None = None,
    ) -> None:
        """The processes of `scope` in `sample`; dimmed when it is not live (its host is down, stale or
        reconnecting: the title says how old they are). `keep`: the filter (the language's query,
        gputui/views/filter.py), in place of the plain search of `filter_text`; `idle`: the idle
        holders, flagged `idle 12m`."""
        self.idle = idle or {}
        procs = sample.processes if sample is not None else ()
        containers = any(p.container for p in procs)
        if scope.gpu is not None:
            procs = tuple(p for p in procs if scope.gpu in p.gpus)
        needle = filter_text.casefold()
        self._longest_command = max((len(kinds.command(p)) for p in procs), default=0)
        # In the jobs view, a filter that names a job (its root's command, user, Slurm job,
        # container or unit) lists all its members here.
        named = jobs.matching(sample, needle) if self.jobs_mode else set()
        if keep is not None:
            listed = tuple(p for p in procs if keep(p) or p.job in named)
        else:
            listed = tuple(p for p in procs if not needle or matches(p, needle) or p.job in named)
        self.in_view = listed
        rows: dict[str, Row] = {}
        for proc in listed:
            rows[proc_row_key(proc)] = self.row(proc, sample, scope.gpu, proc.key in selected)
        if self.tree_mode:
            rows = self._tree_rows(rows, listed, sample, scope.gpu)
        elif self.jobs_mode:
            rows = self._jobs_rows(rows, listed, sample, scope.gpu)
        else:
            self._tree, self._order = {}, None
        if not self.jobs_mode:
            self.job_rows = {}
        if not live:
            stale = self.style_of("proc--stale")
            for row in rows.values():
                dim(row, stale)
        self.sync(rows)
        if containers != self.containers:
            # The column comes (or goes) with the first (or last) process in a container: measured
            # from the rows now in the table, fitted by the width rules of every column.
            self.containers = containers
            self.remeasure()

    def _tree_rows(
        self, rows: dict[str, Row], listed: tuple[Proc, ...], sample: Sample | None, gpu: int | None
    ) -> dict[str, Row]:
        """The rows of the tree: the listed ones and the context that joins them, in tree order, each
        command prefixed with its branch of the tree."""
        self._tree = tree.build(((proc_row_key(p), p) for p in listed), sample, context_row_key)
        self._tree_version += 1
        for node in self._tree.values():
            if node.context:
                rows[node.key] = self.context_row(node.record, sample, gpu)
        return self._branches(rows)

    def _jobs_rows(
        self, rows: dict[str, Row], listed: tuple[Proc, ...], sample: Sample | None, gpu: int | None
    ) -> dict[str, Row]:
        """The rows of the jobs view: a row per job with a listed member, its members under it."""
        grouped = jobs.group(((proc_row_key(p), p) for p in listed), sample, job_row_key)
        self._tree = grouped.nodes
        self._tree_version += 1
        self.job_rows = grouped.jobs
        for key, job in grouped.jobs.items():
            rows[key] = self.job_row(job, sample, gpu)
        for key, job in grouped.alone.items():
            if where_parts(job, self._container_note) and not self.command_offset:
                rows[key] = dict(rows[key], command=self._where_first(job, rows[key]["command"]))
        return self._branches(rows)

    def _where_first(self, job: Job, command: Cell) -> Cell:
        """A one-process job's command cell with where it runs first (`slurm 4711 · `)."""
        note = self.style_of("proc--note")
        cell = Cell(sort_key=command.sort_key)
        for words in where_parts(job, self._container_note):
            for text, number in words:
                cell.add(text, note, keep=number)
            cell.add(" · ", note)
        start = len(cell.plain)
        cell.append_text(command)
        cell.keep = (*cell.keep, *((a + start, b + start) for a, b in command.keep))
        return cell

    def _branches(self, rows: dict[str, Row]) -> dict[str, Row]:
        """`rows` in the order of `self._tree`, each command prefixed with its branch."""
        self.folded &= set(self._tree)
        branch = self.style_of("proc--tree")
        muted = self.style_of("proc--muted")
        drawn: dict[str, Row] = {}
        for line in self._lines(rows):
            row = dict(rows[line.key])
            cell = Cell(sort_key=row["command"].sort_key)
            cell.add(line.prefix, branch)
            if line.folded:  # before the command: a cut command never hides how many are folded
                cell.add(tree.fold_words(line.folded), muted, keep=True)
                cell.add(" · ", muted)
            start = len(cell.plain)
            cell.append_text(row["command"])
            cell.keep = (*cell.keep, *((a + start, b + start) for a, b in row["command"].keep))
            row["command"] = cell
            drawn[line.key] = row
        return drawn

    def _lines(self, rows: dict[str, Row]) -> list[tree.Line]:
        """The tree's rows in order (kept for the same tree, sort and folds: the table asks for the
        order again as it syncs the rows this order was made from; 25 ms at 1,000 processes)."""
        column, reverse = self.sort_column or ("pid", False)
        signature = (self._tree_version, column, reverse, frozenset(self.folded))
        if self._order is not None and self._order[0] == signature:
            return self._order[1]

        def sort_key(key: str) -> Any:
            row = rows.get(key)
            return row[column].sort_key if row is not None and column in row else 0

        lines = tree.lines(self._tree, sort_key, reverse, self.folded)
        self._order = (signature, lines)
        return lines

    def row_order(self) -> list[str] | None:
        if not (self.tree_mode or self.jobs_mode):
            return None
        return [line.key for line in self._lines(dict(self.rows_data()))]

    def context_row(self, record: Proc | Parent, sample: Sample | None, gpu: int | None) -> Row:
        """A process the tree shows only to join a family (not in the list): dimmed, never selected."""
        muted = self.style_of("proc--context")
        if isinstance(record, Proc):
            row = self.row(record, sample, gpu, False)
            for cell in row.values():
                cell.stylize(muted)
            return row
        command = safe_command(record)
        state = record.state or "-"
        return {
            "sel": Cell(" ", sort_key=True),
            "pid": Cell(str(record.pid), muted, sort_key=record.pid),
            "user": Cell(fmt.safe(record.user, 32) or "-", muted),
            "container": Cell("-", muted),
            "kind": Cell("-", muted, sort_key=len(kinds.ORDER)),
            "gpu": Cell("-", muted, sort_key=(1, ())),
            "mem": Cell("-", muted, sort_key=0),
            "sm": Cell("-", muted, sort_key=-1),
            "cpu": Cell("-", muted, sort_key=0.0),
            "rss": Cell("-", muted, sort_key=0),
            "state": Cell(state, muted, sort_key=state),
            "elapsed": Cell("-", muted, sort_key=(-1.0, 0)),
            "command": Cell(command, muted, sort_key=command.casefold()),
        }

    def reveal_cursor(self) -> None:
        """Scroll so the cursor's row is in view (a followed process that moved)."""
        self.scroll_cursor_into_view()

    def action_fold(self) -> None:
        """Fold the family under the cursor (on a row without one: its parent's, the cursor going there)."""
        key = self.cursor_key
        if key is None or key not in self._tree:
            return
        if not any(node.parent == key for node in self._tree.values()):
            key = tree.family(self._tree, key) or ""
            if not key:
                return
            self.move_to(key, scroll=True)
        self.folded.add(key)
        self.post_message(self.TreeChanged())

    def action_unfold(self) -> None:
        key = self.cursor_key
        if key is not None and key in self.folded:
            self.folded.discard(key)
            self.post_message(self.TreeChanged())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("fold", "unfold"):
            return self.tree_mode or self.jobs_mode
        return super().check_action(action, parameters)

    def forget(self) -> None:
        self.folded.clear()
        self.job_rows = {}
        self._tree, self._order = {}, None
        super().forget()

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
            # The container in its own column when shown; else the note says it.
            note = kinds.note_parts(proc, sample, container=self._container_note)
            idle = self.idle.get(proc.key)
            if idle is not None:  # first: it holds memory and does nothing, which is why it is here
                note = [(f"idle {span(idle)}", False), ("; " if note else "", False), *note]
            for text, number in note:
                cmd.add(text, note_style, keep=number)
            if command:
                cmd.add((" · " if note else "") + command)
        state = proc.state or "-"
        return {
            "sel": Cell("●" if selected else " ", self.style_of("proc--selected"), sort_key=not selected),
            "pid": Cell(str(proc.pid), sort_key=proc.pid),
            "user": Cell(fmt.safe(proc.user, 32) or "-", "" if proc.user else muted),
            "container": container_cell(self, proc.container),
            "kind": Cell(kinds.proc_label(proc), kind_style, sort_key=kinds.ORDER.get(proc.kind, 9)),
            "gpu": gpus_cell(self, proc, gpu),
            "mem": Cell(fmt_memory(mem, self.exact_memory), kind_style, sort_key=mem or 0),
            "sm": self.sm_cell(proc, gpu) if proc.key not in self.idle else self.idle_cell(proc),
            "cpu": Cell(fmt_percent(proc.cpu_percent), sort_key=proc.cpu_percent or 0.0),
            "rss": Cell(fmt_memory(proc.rss, self.exact_memory), sort_key=proc.rss or 0),
            "state": Cell(state, self.style_of("proc--warn") if state in ("D", "Z") else "", sort_key=state),
            "elapsed": elapsed_cell(proc.elapsed, proc.pid),
            "command": cmd,
        }

    def job_row(self, job: Job, sample: Sample | None, gpu: int | None) -> Row:
        """A job's row: its root's PID, user, state and command, the GPUs and memory of all its
        members (on the GPU in view, in a GPU's list), their CPU and RSS; the Kind column says how
        many members it has (`◆ job ×2`), the note where it runs (Slurm job, container, unit)."""
        style = self.style_of("proc--job")
        muted = self.style_of("proc--muted")
        note_style = self.style_of("proc--note")
        mine = jobs.members(sample, job)
        if gpu is not None:
            sizes = [p.gpu_memory.get(gpu) for p in mine if gpu in p.gpu_memory]
            mem: int | None = sum(b or 0 for b in sizes) if sizes else None
        else:
            known = [p for p in mine if p.gpu_memory]
            mem = (
                job.memory if job.memory is not None else (sum(p.gpu_bytes for p in known) if known else None)
            )
        sms = [sm for sm in (p.sm_util(gpu) for p in mine) if sm is not None]
        cpus = [p.cpu_percent for p in mine if p.cpu_percent is not None]
        rsses = [p.rss for p in mine if p.rss is not None]
        root = next((p for p in mine if p.pid == job.root), None)
        elapsed = root.elapsed if root is not None else None
        total = len(job.members) or len(mine)
        cmd = Cell(sort_key=job.command_line.casefold())
        command = fmt.safe(job.command_line)
        if self.command_offset:
            cmd.add(ELLIPSIS + command[self.command_offset :] if command else "", style)
        else:
            # Where it runs, then its root's command: what people name a job by. How many members
            # it has is the Kind column's (a number, never cut); they hang below.
            for words in where_parts(job, self._container_note):
                for text, number in words:
                    cmd.add(text, note_style, keep=number)
                cmd.add(" · ", note_style)
            cmd.add(command, style)
        state = job.state or "-"
        return {
            "sel": Cell(" ", sort_key=True),
            "pid": Cell(str(job.root), style, sort_key=job.root),
            "user": Cell(fmt.safe(job.user, 32) or "-", "" if job.user else muted),
            "container": container_cell(self, job.container),
            "kind": Cell(f"{kinds.JOB_GLYPH} job ×{total}", style, sort_key=-1),
            "gpu": indexes_cell(self, job.gpus, gpu),
            "mem": Cell(fmt_memory(mem, self.exact_memory), style, sort_key=mem or 0),
            "sm": Cell(f"{max(sms)}%", sort_key=max(sms)) if sms else Cell("-", muted, sort_key=-1),
            "cpu": Cell(fmt_percent(sum(cpus)) if cpus else "-", sort_key=sum(cpus)),
            "rss": Cell(fmt_memory(sum(rsses), self.exact_memory) if rsses else "-", sort_key=sum(rsses)),
            "state": Cell(state, self.style_of("proc--warn") if state in ("D", "Z") else "", sort_key=state),
            "elapsed": elapsed_cell(elapsed, job.root),
            "command": cmd,
        }

    @property
    def _container_note(self) -> bool:
        """Notes name containers only while the Container column does not show."""
        return not self.width_of("container")

    def idle_cell(self, proc: Proc) -> Cell:
        """An idle holder's SM%: `idle` (0 % for the idle minutes; the note says how long)."""
        return Cell("idle", self.style_of("proc--warn"), sort_key=-0.5)

    def sm_cell(self, proc: Proc, gpu: int | None) -> Cell:
        """SM utilization on the GPU in view, or the highest over its GPUs on the host's view."""
        sm = proc.sm_util(gpu)
        if sm is None:
            return Cell("-", self.style_of("proc--muted"), sort_key=-1)
        return Cell(f"{sm}%", sort_key=sm)

    @property
    def cursor_proc_key(self) -> ProcKey | None:
        """(pid, start time) of the process under the cursor; None on a tree's context row (not in
        the list: never selected, never killed from here) and on a job's row."""
        key = self.cursor_key
        if key is None or key.startswith((CONTEXT, JOB)):
            return None
        return key_of(key)

    @property
    def cursor_any_key(self) -> tuple[ProcKey, bool] | None:
        """(pid, start time) of the row under the cursor, a context row's too (a job's row: its
        root's), and whether it is not a process of the list."""
        key = self.cursor_key
        if key is None:
            return None
        if key.startswith(JOB):
            job = self.job_rows.get(key)
            return (job.key, True) if job is not None else None
        return (key_of(key), key.startswith(CONTEXT))

    @property
    def cursor_job(self) -> Job | None:
        """The job whose row is under the cursor (the jobs view), or None."""
        key = self.cursor_key
        return self.job_rows.get(key) if key is not None else None


def safe_command(record: Proc | Parent) -> str:
    """A parent's command line as people say it, made safe."""
    if record.command:
        return fmt.safe(brief_command(list(record.command)))
    return f"[{fmt.safe(record.name)}]" if record.name else ""


def elapsed_cell(seconds: float | None, pid: int) -> Cell:
    """A process's age at a resolution that holds still (`elapsed_shown`); sorted by what it shows,
    ties by PID (the lower first, oldest first): ages that read the same never swap places."""
    words, shown = elapsed_shown(seconds)
    return Cell(words, sort_key=(shown, -pid))


def gpus_cell(styled: Styled, proc: Proc, gpu: int | None) -> Cell:
    """The GPUs a process uses or holds (`0,1`, `0-3`); in a GPU's view, that GPU stands out. The
    process table's GPU column, and the GPU view's where it shows MIG instances."""
    if proc.mig and proc.gpus:
        return mig_cell(styled, proc, gpu)
    return indexes_cell(styled, proc.gpus, gpu)


def indexes_cell(styled: Styled, gpus: tuple[int, ...], gpu: int | None) -> Cell:
    """GPU indexes as runs (`0,1`, `0-3`), the GPU in view standing out; `-` for none."""
    if not gpus:
        return Cell("-", styled.style_of("proc--muted"), sort_key=(1, ()))
    cell = Cell(sort_key=(0, tuple(sorted(gpus))))
    for i, (text, indexes) in enumerate(index_runs(gpus)):
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
        cell.add(gpu_place(proc, index), styled.style_of("proc--here") if index == gpu else "", keep=True)
    return cell


def container_cell(styled: Styled, container: str | None) -> Cell:
    """The Container column: `lxc/129`, `docker/3f2a9c1d0b7e`, `pod/<uid>` (words: a narrow column
    cuts the end, the detail (d) has it whole); `-` for none."""
    if not container:
        return Cell("-", styled.style_of("proc--muted"), sort_key="")
    return Cell(fmt.safe(container, 200))


def where_parts(job: Job, container: bool = True) -> list[list[kinds.NotePart]]:
    """Where a job runs, as the note of its row says it: `slurm 4711`, `container lxc/129`, `unit
    vllm.service`; the Slurm job's number kept whole. `container`: name the container (False
    where its own column shows it)."""
    out: list[list[kinds.NotePart]] = []
    if job.slurm_job:
        out.append([("slurm ", False), (fmt.safe(job.slurm_job, 40), True)])
    if job.container and container:
        out.append([(f"container {fmt.safe(job.container, 200)}", False)])
    if job.unit:
        out.append([(f"unit {fmt.safe(job.unit, 200)}", False)])
    return out


def matches(proc: Proc, needle: str) -> bool:
    """The filter: a case-insensitive piece of the command line, name, user, PID, container or job id."""
    hay = (" ".join(proc.command), proc.name or "", proc.user or "", str(proc.pid), proc.container or "")
    return any(needle in h.casefold() for h in hay) or (
        proc.job is not None and needle == proc.job.casefold()
    )

"""The confirmation dialog: every plan of a request, grouped by host, before anything is signalled.

It lists what will be stopped (host, PID, user, command, GPU memory, why), the unattributed holders
the sweep would add (a separate, explicit option: `s`), what is left alone and why, the warnings
(other users' processes, state D, ...), what the verdict will prove (GPUs clean, or the chosen
processes gone with their memory released) and the stages with their signals and timeouts, which can
be changed for this plan (`i` signals, `w` the wait after each soft signal, `v` the verification
time). A monitor the operator chose by name is left alone, and `p` offers to include it behind a
second confirmation that names the risk. A plan that stops jobs (X) lists each job (its root,
members, GPUs, memory, where it runs) with its processes under it, root first, each with what it
holds. Focus starts on Cancel, so an accidental Enter cancels;
confirming takes ctrl+k, or Tab to the confirm button and Enter (or a click); the button says the
title's verb (`Stop 3`, `Free 1 GPU`) and the sweep is offered only where it adds something (a plan
that frees GPUs or stops a ghost's holders). A plan with nothing to
signal says so and cannot be confirmed. Every dialog starts from the plans as built (sweep off,
the configured signals): nothing chosen in an earlier, cancelled dialog carries over. The dialog
returns the plans to run, or None.

A plan is confirmed only while a target of it is on screen, whole, with the confirm button: what is
not seen is not confirmed. In a small terminal the explanation gives way first (`fit_level`), the
lists open scrolled to the first target, and below CARDS columns each process is a card (as a
table row its command and why would get a few characters). A confirmation with no target in view
(scrolled away) is refused and brings the targets back; where even the barest dialog cannot show
a target with the warnings and the buttons, it shows no plan, only the size it needs.

Posting's ConfirmationModal pattern: bindings call `dismiss`, the caller awaits `push_screen_wait`.
Every process name, command line and user name is untrusted: built into `Text`, made safe first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, NamedTuple

from rich.console import Group, RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import Button, Static

from gputui.config.killoptions import KillOptions
from gputui.kill.operate import Request
from gputui.kill.plan import SIGNAL_PLANS  # the probe's ladders, as the kill layer passes them on
from gputui.kill.plan.entries import Excluded, Target
from gputui.kill.plan.record import SIGNAL_WORDS, Plan
from gputui.kill.plan.signal import SIGNAL_MEANINGS
from gputui.model import Job, Sample
from gputui.text.units import fmt_bytes, fmt_bytes_of, fmt_gpus, index_runs
from gputui.text.words import count, gpus_words

from .. import fmt, kinds
from ..messages import PlanRequested
from ..widgets.action_log import PID_WIDTH  # the lists' PID column: a row's first line has it
from ..widgets.borders import set_title
from ..widgets.status import StyledStatic
from .dialog import DANGER, SCROLL_BINDINGS, Confirm, Dialog, answer_bindings

# The dialog's keys: ctrl+k's word is the title's verb (confirm_verb); `s` only where a plan offers
# the sweep; `X` where a parent may start a target again.
KEYS_HINT = "ctrl+k {verb} · i signals · w/v times · p monitor · esc cancel"
SWEEP_KEY_HINT = " · s sweep"  # after ctrl+k's
JOB_KEY_HINT = " · X stop job"  # after the monitor's key
STOP_JOB_KEY = "press X"  # how a warning's job is stopped in this dialog (PlanWarning.said)
SIGNAL_KEYS_HINT = "ctrl+k send · esc cancel"  # a signal plan: one signal, nothing to change
TERM_WAITS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)  # `w` cycles through these (seconds)
VERIFY_WAITS = (5.0, 10.0, 30.0, 60.0, 120.0)  # `v`


def stages_line(plan: Plan) -> str:
    """`SIGTERM -> wait up to 5 s -> SIGKILL the survivors -> rescan: ... -> verify ...`."""
    return " -> ".join(plan.stages)


ROLE_LABELS = {
    "root": f"{kinds.JOB_GLYPH} root",
    "between": f"{kinds.JOB_GLYPH} between",
}  # a job's processes that hold no GPU of theirs


def scope_words(plan: Plan) -> str:
    """What one host's plan does, after the host's name (gputui.kill.plan words it)."""
    title = plan.title  # `Stop job 4242 (torchrun ...)`, `Free GPU 3`, `Stop the chosen process`
    return title if plan.jobs else title[:1].lower() + title[1:]


def dialog_title(plans: Sequence[Plan]) -> str:
    """The dialog's title: what its plans do (`Free GPU 3`, `Stop the chosen processes`, `Stop a
    job`), and how many hosts when more than one."""
    hosts = {p.host for p in plans}
    jobs = sum(len(p.jobs) for p in plans)
    if jobs and all(p.jobs and not p.cleans_gpus for p in plans):
        what = "Stop a job" if jobs == 1 else "Stop jobs"
    elif len(plans) == 1:
        what = plans[0].title if not plans[0].jobs else plans[0].kind_title
    else:
        kinds = list(dict.fromkeys(p.kind_title for p in plans))
        what = kinds[0] if len(kinds) == 1 else " and ".join(k.lower() for k in kinds).capitalize()
    if len(what) > 60:
        what = what[:59] + "…"
    return f"{what} · confirm" + (f" · {len(hosts)} hosts" if len(hosts) > 1 else "")


def confirm_verb(plans: Sequence[Plan]) -> str:
    """The verb of the dialog's title (`Free GPU 3`, `Stop a job`, `Send SIGSTOP to ...`), which
    its button and ctrl+k say too: taken from the title, so the two never disagree."""
    return dialog_title(plans).split(" ", 1)[0] if plans else "Stop"


def confirm_words(plans: Sequence[Plan], processes: int) -> str:
    """The button's words: the title's verb and how many of what it frees or stops (`Free 1 GPU`,
    `Stop 3`: the summary above says how many processes that is)."""
    verb = confirm_verb(plans)
    if verb == "Free":
        return f"Free {count(sum(len(p.gpu_indexes) for p in plans), 'GPU')}"
    return f"{verb} {processes}"


def then_words(plans: Sequence[Plan]) -> str:
    """What the summary says comes after the signals: `verify GPU 3 is clean`, `verify GPUs 0, 2
    are clean`, `verify they are gone and their memory released` (`it is` for one process)."""
    gpus = [p for p in plans if p.cleans_gpus]
    if gpus:
        if len(gpus) == 1:
            indexes = gpus[0].gpu_indexes
            return f"verify {gpus_words(indexes)} {'is' if len(indexes) == 1 else 'are'} clean"
        return "verify the GPUs are clean"
    if sum(len(p.signalled) for p in plans) == 1:
        return "verify it is gone and its memory released"
    return "verify they are gone and their memory released"


def nothing_words(plan: Plan) -> str:
    """A plan with no target, in the lists' place."""
    if plan.cleans_gpus:
        return f"Nothing to stop here: no process uses or holds {gpus_words(plan.gpu_indexes)}."
    if plan.excluded:
        return "Nothing to stop here: every process chosen is left alone (why: below)."
    return "Nothing to stop here."


UNSELECT = "esc, unselect it (space) and plan again"  # the way on where nothing includes it
MONITOR_HINT = f"p includes it, after a second confirmation; or {UNSELECT}"  # the dialog's --include-monitor


def refused(plan: Plan) -> str | None:
    """Why the dialog runs no part of `plan`, in the words `gputui clean` (exit 4) and the hub (409)
    refuse it with, or None: a protected process the operator named is left alone. Where none of
    them can be included (the probe, PID 1, a kernel thread), the words say the way on: unselect it."""
    why = plan.refusal(MONITOR_HINT)
    chosen = plan.protected_chosen
    if why is None or not chosen or any(e.can_include for e in chosen):
        return why
    return f"{why} ({UNSELECT})"


def _next(values: tuple[float, ...], now: float) -> float:
    """The next value after `now` in `values`, round and round (a value not in the list: the first
    one above it)."""
    above = [v for v in values if v > now]
    return above[0] if above else values[0]


WIDE = 100  # columns: from this width the why gets its own column; below, it goes under the command
CARDS = 80  # ... and below this one each process is a card: its facts, its command, its why, a line each


class TargetRow(NamedTuple):
    """Where a process to signal is in the lists' lines: its first line, how many lines it takes
    (the why may wrap under the command), and the first line of its table (the header)."""

    start: int
    lines: int
    table: int

    @property
    def end(self) -> int:
        return self.start + self.lines


# How much of the dialog gives way in a small terminal, so that a target and the buttons show:
FULL = 0  # everything, wrapped
TIGHT = 1  # no blank lines; the summary, the stages and the options one line each, cut
COMPACT = 2  # the buttons one line high
BARE = 3  # no stages, no options (the summary, the warnings, the lists, the buttons)
LEVELS = (FULL, TIGHT, COMPACT, BARE)
TOO_SMALL = 4  # not even then: no plan shown, only why
RETRY_S = 0.02  # seconds between two looks at whether the dialog is laid out as asked
BUTTON_ROWS = 3  # a button's height, but compact
EXPLAINED = ("#plan-summary", "#plan-stages", "#plan-options")  # the Statics that wrap at FULL


def rows_needed(rows: Sequence[TargetRow]) -> int:
    """The lists' rows that show the first target whole with its table's title and header."""
    return rows[0].end - max(0, rows[0].table - 1) if rows else 0


def fit_level(height: int, fixed: Sequence[int], rows: Sequence[TargetRow]) -> int:
    """The least level (its rows but the lists' in `fixed`) at which the first target shows with
    everything above it in `height` rows; else the least at which it shows with its title and
    header, the lists scrolled to it; else TOO_SMALL. A plan with no target: FULL."""
    if not rows:
        return FULL
    for need in (rows[0].end, rows_needed(rows)):
        for level in LEVELS:
            if height - fixed[level] >= need:
                return level
    return TOO_SMALL


def row_in_view(row: TargetRow, top: int, height: int) -> bool:
    """Whether lines top .. top + height show `row` whole, or its first line where it is taller."""
    if row.lines > height:
        return top <= row.start < top + height
    return top <= row.start and row.end <= top + height


def too_small_words(size: tuple[int, int], rows: int) -> str:
    return (
        f"This terminal ({size[0]}x{size[1]}) is too small to show this plan's targets with its warnings "
        f"and buttons: it takes {rows} rows at this width. Make it larger, or esc to cancel."
    )


def _starts_row(line: list[Segment]) -> bool:
    """A table line that starts a row: it has a PID (the header may wrap; no cell but the why
    and the header's last one do)."""
    return "".join(segment.text for segment in line)[:PID_WIDTH].strip().isdigit()


class PlanText(StyledStatic):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *kinds.STYLE.values(),
        "plan--host",
        "plan--section",
        "plan--muted",
        "plan--why",
        "plan--warn",
        "plan--error",
        "plan--off",
        "plan--job",
    }


class PlanWarnings(PlanText):
    """Every plan's warnings, above the lists (which may scroll): they must be seen."""

    text = Text()  # as shown

    def show(self, plans: Sequence[Plan]) -> None:
        text = Text()
        hosts = len({p.host for p in plans}) > 1
        for plan in plans:
            # The sweep's own line says whether it is included: no warning for that.
            for w in plan.with_sweep(True).warnings if plan.sweep else plan.warnings:
                if text:
                    text.append("\n")
                style = self.style_of("plan--error" if w.severe else "plan--warn")
                where = f"{fmt.safe(plan.host, 40)}: " if hosts else ""
                text.append(f"! {where}{fmt.safe(w.said(STOP_JOB_KEY), 300)}", style)
        self.display = bool(text)
        self.text = text
        self.update(text)


class PlanBody(PlanText):
    """The plans as tables, grouped by host; rebuilt on every change (sweep, theme, width)."""

    _width = WIDE  # the terminal's columns: which layout of the lists (WIDE, CARDS)
    _parts: tuple[tuple[RenderableType, bool], ...] = ()  # each part, and whether it lists targets
    _marked: set[int]  # the ids of the tables of processes to signal, while the parts are built
    _rows: tuple[int, tuple[TargetRow, ...]] | None = None  # target_rows at a width, kept

    def show(self, plans: Sequence[Plan], samples: dict[str, Sample], operator: str, width: int) -> None:
        self._width = width
        self._marked = set()
        parts: list[RenderableType] = []
        for i, plan in enumerate(plans):
            if i:
                parts.append(Text(""))
            parts.extend(self._host(plan, samples.get(plan.host), operator))
        self._parts = tuple((part, id(part) in self._marked) for part in parts)
        self._rows = None
        self.update(Group(*parts))

    def target_rows(self, width: int) -> tuple[TargetRow, ...]:
        """Where the rows of the processes to signal are at `width` columns, in order: the lines
        are rendered as the widget renders them, part by part."""
        if self._rows is not None and self._rows[0] == width:
            return self._rows[1]
        console = self.app.console
        options = self.app.console_options.update_width(max(1, width)).update(highlight=False)
        rows: list[TargetRow] = []
        at = 0
        for part, targets in self._parts:
            lines = console.render_lines(part, options, pad=False)
            if targets:
                starts = [i for i, line in enumerate(lines) if _starts_row(line)]
                for start, end in zip(starts, [*starts[1:], len(lines)], strict=True):
                    rows.append(TargetRow(at + start, end - start, at))
            at += len(lines)
        self._rows = (width, tuple(rows))
        return self._rows[1]

    # -- one host --------------------------------------------------------------------------

    def _host(self, plan: Plan, sample: Sample | None, operator: str) -> list[RenderableType]:
        muted = self.style_of("plan--muted")
        head = Text(no_wrap=True, overflow="ellipsis")
        head.append(fmt.safe(plan.host, 40), self.style_of("plan--host"))
        head.append(f" · {scope_words(plan)}")
        for g in plan.gpus + plan.touched:
            head.append(f" · GPU {g.index}: {fmt_bytes_of(g.memory_used, g.memory_total)}", muted)
        out: list[RenderableType] = [head]
        proves = Text(no_wrap=False)
        proves.append("Proves: ", self.style_of("plan--section"))
        proves.append(plan.proves, muted)
        out.append(proves)
        in_jobs: set[int] = set()
        for job in plan.jobs:
            mine = plan.job_targets(job)
            in_jobs.update(t.pid for t in mine)
            out.append(self._job_head(job, len(mine)))
            out.append(self._targets(mine, operator))
        rest = tuple(t for t in plan.targets if t.pid not in in_jobs)
        if rest:
            title = "Stop, besides the jobs" if plan.jobs else "Signal" if plan.signal else "Stop"
            out.append(self._section(f"{title} ({len(rest)})"))
            out.append(self._targets(rest, operator))
        elif not plan.targets:
            out.append(Text(nothing_words(plan), muted))
        if plan.sweep:
            n = len(plan.sweep)
            box = "☑" if plan.sweep_included else "☐"
            them = "it" if n == 1 else "them"
            state = (
                f"included: s leaves {them} out" if plan.sweep_included else f"not included: s adds {them}"
            )
            line = Text(no_wrap=True, overflow="ellipsis")
            line.append(f"{box} Sweep ({n}): ", self.style_of("plan--section"))
            what = "the unattributed hidden holder" if n == 1 else f"the {n} unattributed hidden holders"
            line.append(f"also stop {what}, host-wide ({state})", muted)
            out.append(line)
            out.append(self._targets(plan.sweep, operator, off=not plan.sweep_included))
        if plan.excluded:
            out.append(self._section(f"Left alone ({len(plan.excluded)})"))
            out.append(self._excluded(plan.excluded, sample))
        for e in plan.includable:
            line = Text(no_wrap=False)
            line.append(f"{e.pid} ({fmt.safe(e.name or 'monitor', 40)}) is a protected GPU monitor: ", muted)
            line.append("p", self.style_of("plan--section"))
            line.append(" includes it, after a second confirmation", muted)
            out.append(line)
        why = refused(plan)
        if why is not None:
            line = Text(no_wrap=False)
            line.append("Not run: ", self.style_of("plan--warn"))
            line.append(f"nothing here is signalled while a process you named is left alone: {fmt.safe(why)}")
            out.append(line)
        return out

    def _job_head(self, job: Job, stopped: int) -> Text:
        """`Job 4242 (3 to stop) · 2 members · GPU 0,1 · 36.0 GiB · slurm 4711 · user alice`."""
        head = Text(no_wrap=False)
        head.append(f"Job {fmt.safe(job.id, 64)} ({stopped} to stop)", self.style_of("plan--section"))
        facts = [count(len(job.members), "member")]
        if job.gpus:
            facts.append("GPU " + ",".join(text for text, _ in index_runs(job.gpus)))
        if job.memory:
            facts.append(fmt_bytes(job.memory))
        if job.where:
            facts.append(fmt.safe(job.where, 200))
        if job.user:
            facts.append(f"user {fmt.safe(job.user, 32)}")
        head.append(" · " + " · ".join(facts), self.style_of("plan--muted"))
        return head

    def _section(self, title: str) -> Text:
        return Text(title, self.style_of("plan--section"), no_wrap=True)

    def _pid_table(self) -> Table:
        """A list's table with its PID column: the rest is a row's (`_table`) or a card's (`_cards`)."""
        table = Table(
            box=None,
            show_header=True,
            header_style=self.style_of("plan--muted"),
            padding=(0, 1, 0, 0),
            pad_edge=False,
            expand=True,
        )
        table.add_column(Text("PID", justify="right"), justify="right", width=PID_WIDTH, no_wrap=True)
        return table

    def _table(self) -> Table:
        table = self._pid_table()
        table.add_column("User", width=9, no_wrap=True, overflow="ellipsis")
        table.add_column("Kind", width=9, no_wrap=True)
        table.add_column("GPU", width=5, no_wrap=True, overflow="ellipsis")
        table.add_column(Text("GPU mem", justify="right"), justify="right", width=8, no_wrap=True)
        table.add_column("St", width=2, no_wrap=True)
        if self._width >= WIDE:
            table.add_column("Command", ratio=1, no_wrap=True, overflow="ellipsis")
            table.add_column("Why", ratio=1)
        else:
            table.add_column("Command · why", ratio=1)
        return table

    def _cards(self) -> Table:
        """A narrow terminal's lists: the PID, then the rest of the process in one column, where
        the command and the why get the whole width (as columns, they would get a few characters)."""
        table = self._pid_table()
        # The header is cut to the width; the why under the command wraps (its own Text says so).
        table.add_column(
            Text("User · kind · GPU · GPU mem · state · command · why", no_wrap=True, overflow="ellipsis"),
            ratio=1,
        )
        return table

    def _row(
        self,
        table: Table,
        cells: list[Text],
        command: str,
        why: str,
        style: Style | None = None,
    ) -> None:
        cmd = Text(fmt.safe(command, 300), no_wrap=True, overflow="ellipsis")
        reason = Text(fmt.safe(why, 300), self.style_of("plan--why"))
        if self._width >= WIDE:
            table.add_row(*cells, cmd, reason, style=style)
        elif self._width < CARDS:
            pid, user, kind, gpus, memory, state = cells
            facts = [user, kind, Text("GPU ") + gpus, memory, state]
            line = Text(" · ", no_wrap=True, overflow="ellipsis").join(
                f for f in facts if f.plain[-1:] != "-"
            )
            reason = Text("↳ ", self.style_of("plan--why")) + reason
            table.add_row(pid, Group(line, cmd, reason), style=style)
        else:
            reason = Text("↳ ", self.style_of("plan--why")) + reason
            table.add_row(*cells, Group(cmd, reason), style=style)

    def _targets(self, targets: Sequence[Target], operator: str, off: bool = False) -> Table:
        table = self._table() if self._width >= CARDS else self._cards()
        warn, error = self.style_of("plan--warn"), self.style_of("plan--error")
        for t in targets:
            state = t.state or "-"
            cells = [
                Text(str(t.pid), justify="right"),
                Text(fmt.safe(t.user, 32) or "-", warn if t.user is not None and t.user != operator else ""),
                self._kind(t),
                Text(fmt_gpus(t.gpus)),
                Text(fmt_bytes(t.memory) if t.memory else "-", justify="right"),
                Text(state, error if state == "D" else ""),
            ]
            self._row(table, cells, t.brief, t.why, self.style_of("plan--off") if off else None)
        if not off:
            self._marked.add(id(table))  # these will be signalled: the dialog keeps them in view
        return table

    def _kind(self, t: Target) -> Text:
        """A target's kind; a job's root or a process between it and the members (no GPU of its
        own, as a launcher) by its part in the job."""
        if t.role in ROLE_LABELS and t.kind not in kinds.STYLE:
            return Text(ROLE_LABELS[t.role], self.style_of("plan--job"))
        return Text(kinds.label(t.kind), self.style_of(kinds.STYLE.get(t.kind, "kind--hidden")))

    def _excluded(self, excluded: Sequence[Excluded], sample: Sample | None) -> Table:
        table = self._table() if self._width >= CARDS else self._cards()
        by_pid = {p.pid: p for p in sample.processes} if sample is not None else {}
        for e in excluded:
            proc = by_pid.get(e.pid)
            memory = proc.gpu_bytes if proc is not None else 0
            cells = [
                Text(str(e.pid), justify="right"),
                Text(fmt.safe(e.user, 32) or "-"),
                Text(
                    kinds.label(e.kind) if e.kind in kinds.STYLE else ROLE_LABELS.get(e.kind, e.kind),
                    self.style_of(kinds.STYLE.get(e.kind, "plan--job")),
                ),
                Text(fmt_gpus(e.gpus)),
                Text(fmt_bytes(memory) if memory else "-", justify="right"),
                Text((proc.state if proc is not None else None) or "-"),
            ]
            self._row(table, cells, e.brief, e.why)
        return table


class PlanScreen(Dialog[tuple[Plan, ...] | None]):
    """Confirm the plans (one per host). Returns the plans to run, or None (cancelled)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", key_display="esc", tooltip="close, signal nothing"),
        Binding(
            "ctrl+k", "confirm", "Confirm", priority=True, tooltip="confirm: run the plan (stop, verify)"
        ),
        Binding("s", "toggle_sweep", "Sweep", tooltip="add or leave out the unattributed holders"),
        Binding(
            "i",
            "cycle_signals",
            "Signals",
            tooltip="SIGTERM then SIGKILL · SIGINT first · SIGKILL at once · SIGHUP first · SIGUSR1 first",
        ),
        Binding("w", "cycle_term", "Wait", tooltip="seconds after each soft signal before the next"),
        Binding("v", "cycle_verify", "Verify time", tooltip="seconds to prove the outcome"),
        Binding(
            "p", "include_protected", "Include monitor", tooltip="stop a chosen monitor too (asks again)"
        ),
        Binding(
            "X",
            "stop_job",
            "Stop job",
            tooltip="where a warning says a parent may start a target again: close this plan and plan "
            "the stop of that parent's whole job instead",
        ),
        *SCROLL_BINDINGS,
    ]
    AUTO_FOCUS = "#plan-cancel"
    SCROLLS = "#plan-body"

    def __init__(
        self, plans: Sequence[Plan], samples: dict[str, Sample] | None = None, *, operator: str
    ) -> None:
        super().__init__()
        self.plans: tuple[Plan, ...] = tuple(plans)
        self.samples = dict(samples or {})
        self.operator = operator
        self.fitted = False  # laid out for the terminal as it is now, the targets in view
        self.level = FULL  # how much of the explanation gives way to the targets (fit_level)
        self._floor = FULL  # the least level this size takes: where a guess of the rows fell short
        self._texts: dict[str, Text] = {}  # the summary, stages and options as shown

    # -- what it shows ---------------------------------------------------------------------

    @property
    def runnable(self) -> tuple[Plan, ...]:
        """The plans that signal something (verifying alone is not what the operator asked for) and
        leave alone no protected process the operator named (`refused`)."""
        return tuple(p for p in self.plans if not p.is_empty and refused(p) is None)

    @property
    def sweep_on(self) -> bool:
        return any(p.sweep_included for p in self.plans if p.sweep)

    def compose(self) -> ComposeResult:
        with Vertical(id="plan-box", classes=DANGER):
            yield Static("", id="plan-summary", markup=False)
            yield Static("", id="plan-small", markup=False)
            yield PlanWarnings(id="plan-warnings")
            with VerticalScroll(id="plan-body", can_focus=False):
                yield PlanBody(id="plan-text")
            yield Static("", id="plan-stages", markup=False)
            yield Static("", id="plan-options", markup=False)
            with Horizontal(id="plan-buttons"):
                yield Button("Cancel", id="plan-cancel", variant="primary")
                yield Button(confirm_verb(self.plans), id="plan-kill", variant="error")
                yield Static(self._keys_hint(), id="plan-keys", markup=False)

    def _keys_hint(self) -> str:
        if any(p.signal for p in self.plans):
            return SIGNAL_KEYS_HINT
        hint = KEYS_HINT.format(verb=confirm_verb(self.plans).lower())
        if any(p.sweep for p in self.plans):
            cut = hint.index(" · i ")
            hint = hint[:cut] + SWEEP_KEY_HINT + hint[cut:]
        if self.restart_jobs():
            cut = hint.index(" · esc")
            hint = hint[:cut] + JOB_KEY_HINT + hint[cut:]
        return hint

    def restart_jobs(self) -> list[Request]:
        """A request to stop, per host, the jobs whose parents the restart warnings name (the job
        the warning's target and its parent share, in the sample the plan was built from)."""
        requests: list[Request] = []
        for plan in self.plans:
            sample = self.samples.get(plan.host)
            pids = [w.pid for w in plan.warnings if w.kind == "restart" and w.pid is not None]
            if sample is None or not pids:
                continue
            jobs: dict[str, Job] = {}
            for pid in pids:
                job = next((j for j in sample.jobs if pid in {p for p, _ in j.processes}), None)
                if job is not None:
                    jobs.setdefault(job.id, job)
            if jobs:
                requests.append(Request(plan.host, "jobs", jobs=tuple(jobs.values())))
        return requests

    def on_mount(self) -> None:
        box = self.query_one("#plan-box")
        set_title(box, dialog_title(self.plans))
        self.app.theme_changed_signal.subscribe(self, lambda _: self.redraw())
        self.redraw()

    def redraw(self) -> None:
        # Not composed yet, or being taken down (an app that ends as the dialog opens removes its
        # widgets before on_mount runs): nothing to draw.
        if not self.is_attached or not self.query(PlanBody):
            return
        self.fitted = False
        self.query_one(PlanBody).show(self.plans, self.samples, self.operator, self.size.width)
        self.query_one(PlanWarnings).show(self.plans)
        runnable = self.runnable
        n = sum(len(p.signalled) for p in runnable)
        hosts = sorted({p.host for p in runnable})
        summary = Text(no_wrap=True, overflow="ellipsis")
        body = self.query_one(PlanBody)
        signal = next((p.signal for p in self.plans if p.signal), None)
        if signal is not None:
            summary = self._signal_summary(body)
        elif n:
            where = fmt.safe(hosts[0], 40) if len(hosts) == 1 else f"{len(hosts)} hosts"
            if len(hosts) > 1:  # a fleet-wide clean: the totals, since no one host's part says them
                held = sum(t.memory for p in runnable for t in p.signalled)
                where += f" ({fmt_bytes(held)} of GPU memory)" if held else ""
            then = f"then {then_words(runnable)}"
            jobs = sum(len(p.jobs) for p in runnable)
            what = count(n, "process", "processes")
            if jobs:
                what = f"{count(jobs, 'job')} ({what})"
            summary.append(f"Stop {what} on {where}, {then}.", body.style_of("plan--section"))
        else:
            hint = "s adds the sweep" if any(p.sweep for p in self.plans) else "nothing to confirm"
            if any(refused(p) is not None for p in self.plans):
                hint = "a process you named is protected: not run, see why below"
            summary.append(f"Nothing to stop: no process to signal ({hint}).", body.style_of("plan--warn"))
        self._show("#plan-summary", summary)
        stages = Text(no_wrap=False)
        stages.append("Stages: ", body.style_of("plan--section"))
        first = runnable[0] if runnable else (self.plans[0] if self.plans else None)
        stages.append(stages_line(first) if first is not None else "-")
        self._show("#plan-stages", stages)
        options = Text(no_wrap=True, overflow="ellipsis")
        if first is not None and first.signal is not None:
            options.append("Signal: ", body.style_of("plan--section"))
            options.append(f"{first.signal} once · no SIGKILL after it · nothing verified")
        elif first is not None:
            chosen = first.kill
            options.append("Signals: ", body.style_of("plan--section"))
            options.append(f"{SIGNAL_WORDS[chosen.signals]} (i) · ")
            if chosen.signals != "kill":
                options.append(f"wait {chosen.term_timeout:g} s after each soft signal (w) · ")
            options.append(f"verify up to {chosen.verify_timeout:g} s (v)")
        self._show("#plan-options", options)
        kill = self.query_one("#plan-kill", Button)
        if signal is not None:
            kill.label = f"Send {signal}" if n else "Nothing to send"
        else:
            kill.label = (
                confirm_words(self.plans, n) if n else f"Nothing to {confirm_verb(self.plans).lower()}"
            )
        kill.disabled = not n
        self.refresh_bindings()
        self.call_after_refresh(self._fit)

    def _signal_summary(self, body: PlanBody) -> Text:
        """`Send SIGSTOP to 4121 (python train.py) on demo-a, once: pause it (...)`."""
        summary = Text(no_wrap=False)
        plan = next(p for p in self.plans if p.signal)
        assert plan.signal is not None
        if plan.targets:
            t = plan.targets[0]
            meaning = SIGNAL_MEANINGS.get(plan.signal, "")
            words = (
                f"Send {plan.signal} to {t.pid} ({fmt.safe(t.brief, 60)}) on {fmt.safe(plan.host, 40)}, once"
            )
            summary.append(words + (f": {meaning}." if meaning else "."), body.style_of("plan--section"))
        else:
            summary.append(
                f"Nothing to send {plan.signal} to: the process is left alone (why: below).",
                body.style_of("plan--warn"),
            )
        return summary

    def _show(self, selector: str, text: Text) -> None:
        self._texts[selector] = text
        self.query_one(selector, Static).update(text)

    def on_resize(self) -> None:
        self._floor = FULL  # a new size: guess again
        self.redraw()

    def on_screen_resume(self) -> None:
        # On top again (the one-line screen of a too small terminal went): the size may be new.
        self._floor = FULL
        self.redraw()

    # -- fitting the terminal: the targets and the buttons on screen ------------------------------

    def _fit(self) -> None:
        """Choose how much explanation gives way (fit_level) from the rows each part takes at this
        width, and give the lists the rest: they scroll, the rest of the dialog always shows (CSS
        cannot cap an auto-height child at what its auto-height parent has left). Then check it
        as laid out (_check_fit)."""
        if not self.is_attached:
            return
        box = self.query_one("#plan-box")
        width = box.content_region.width
        height = self.size.height - box.styles.gutter.height
        fixed = [self._fixed_rows(level, width) for level in LEVELS]
        # The lists' own width is one less where they scroll (their scrollbar): count them there.
        rows = self.query_one(PlanBody).target_rows(max(1, width - 1))
        level = fit_level(height, fixed, rows)
        if level != TOO_SMALL:
            level = max(level, self._floor)
        self._apply(level, rows, fixed, height)
        body = self.query_one("#plan-body")
        room = max(3, height - fixed[min(level, BARE)])
        if body.styles.max_height is None or body.styles.max_height.value != room:
            body.styles.max_height = room
        self.call_after_refresh(self._check_fit)

    def _fixed_rows(self, level: int, width: int) -> int:
        """The rows of everything but the lists at `level`, at `width` columns."""

        def wrapped(text: Text) -> int:
            return len(Content.from_rich_text(text).wrap(max(1, width))) if text else 0

        texts = self._texts
        warnings = self.query_one(PlanWarnings)
        shown = wrapped(warnings.text) if warnings.display else 0
        if level == FULL:
            summary, stages, options = (wrapped(texts.get(k, Text())) for k in EXPLAINED)
            margins = 3 if shown else 2  # below the warnings, above the stages, above the buttons
            return summary + shown + stages + options + margins + BUTTON_ROWS
        one_line = 1 if level < BARE else 0  # the stages and the options, cut
        buttons = BUTTON_ROWS if level == TIGHT else 1
        return 1 + shown + 2 * one_line + buttons

    def _apply(self, level: int, rows: Sequence[TargetRow], fixed: list[int], height: int) -> None:
        self.level = level
        self.set_class(level >= TIGHT, "-tight")
        self.set_class(level >= COMPACT, "-compact")
        self.set_class(level >= BARE, "-bare")
        self.set_class(level == TOO_SMALL, "-too-small")
        for button in self.query("#plan-buttons Button").results(Button):
            button.compact = level >= COMPACT
        if level == TOO_SMALL:
            short = rows_needed(rows) - (height - fixed[BARE])
            self.query_one("#plan-small", Static).update(too_small_words(self.size, self.size.height + short))

    def _check_fit(self, tries: int = 10) -> None:
        """As laid out: where the others took more rows than counted (the box runs off the screen),
        the next level; else the targets scrolled into view. The layout of new styles may come a
        refresh or two after this is asked for: until then, ask again."""
        if not self.is_attached:
            return
        box = self.query_one("#plan-box")
        if box.region.bottom > self.size.height and FULL <= self.level < BARE:
            self._floor = self.level + 1
            self._fit()
        elif self.level == TOO_SMALL or self.targets_in_view() or not tries:
            self.fitted = True
        else:
            self.scroll_to_targets()
            self.set_timer(RETRY_S, lambda: self._check_fit(tries - 1))

    def scroll_to_targets(self) -> None:
        """The lists scrolled to the first target, with its table's title and header."""
        rows = self._rows_shown()
        if rows:
            body = self.query_one("#plan-body", VerticalScroll)
            body.scroll_to(y=max(0, rows[0].table - 1), animate=False, immediate=True)

    def _rows_shown(self) -> tuple[TargetRow, ...]:
        text = self.query_one(PlanBody)
        return text.target_rows(text.size.width)

    def targets_in_view(self) -> bool:
        """Whether a process to signal is on screen, whole (its why too, unless it is taller than
        the lists), with the confirm button: the one state in which the plan may be confirmed."""
        if not self.is_attached or self.level == TOO_SMALL:
            return False
        body = self.query_one("#plan-body", VerticalScroll)
        kill = self.query_one("#plan-kill", Button)
        if not (self._on_screen(body) and self._on_screen(kill)):
            return False
        top, height = body.scroll_offset.y, body.scrollable_content_region.height
        return any(row_in_view(row, top, height) for row in self._rows_shown())

    def _on_screen(self, widget: Widget) -> bool:
        region = widget.region
        return widget.display and bool(region) and Region(0, 0, *self.size).contains_region(region)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_sweep":
            return any(p.sweep for p in self.plans)
        if action == "include_protected":
            return any(p.includable for p in self.plans)
        if action == "stop_job":
            return bool(self.restart_jobs())
        if action in ("cycle_signals", "cycle_term", "cycle_verify") and any(p.signal for p in self.plans):
            return False  # a signal plan sends its one signal: no ladder, no verification to change
        if action == "cycle_term":
            return True if any(p.kill.signals != "kill" for p in self.plans) else None
        if action == "confirm":
            return True if self.runnable else None
        return True

    # -- what it does ----------------------------------------------------------------------

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_confirm(self) -> None:
        plans = self.runnable
        if not plans:
            return
        if self.targets_in_view():
            self.dismiss(plans)
        elif self.level == TOO_SMALL:
            self.notify(
                "Not confirmed: the terminal is too small to show this plan's targets",
                severity="warning",
                markup=False,
            )
        else:
            # Confirmed only what is seen: bring the targets back, and the next ctrl+k runs them.
            self.scroll_to_targets()
            self.notify(
                "Not confirmed: the targets were not on screen. They are now; confirm again to run",
                severity="warning",
                markup=False,
            )

    def action_toggle_sweep(self) -> None:
        on = not self.sweep_on
        self.plans = tuple(p.with_sweep(on) if p.sweep else p for p in self.plans)
        self.redraw()

    def _set_kill(self, **changes: object) -> None:
        for_all = self.plans[0].kill if self.plans else KillOptions()
        values = {
            "signals": for_all.signals,
            "term_timeout": for_all.term_timeout,
            "verify_timeout": for_all.verify_timeout,
        }
        values.update(changes)
        kill = KillOptions(**values)  # type: ignore[arg-type]
        self.plans = tuple(p.with_options(kill) for p in self.plans)
        self.redraw()

    def action_cycle_signals(self) -> None:
        names = list(SIGNAL_PLANS)
        now = self.plans[0].kill.signals if self.plans else names[0]
        self._set_kill(signals=names[(names.index(now) + 1) % len(names)])

    def action_cycle_term(self) -> None:
        if self.plans:
            self._set_kill(term_timeout=_next(TERM_WAITS, self.plans[0].kill.term_timeout))

    def action_cycle_verify(self) -> None:
        if self.plans:
            self._set_kill(verify_timeout=_next(VERIFY_WAITS, self.plans[0].kill.verify_timeout))

    def action_include_protected(self) -> None:
        monitors = [e for p in self.plans for e in p.includable]
        if monitors:
            self.app.push_screen(IncludeScreen(monitors), self._included)

    def action_stop_job(self) -> None:
        """X: this plan cancelled, and the jobs its restart warnings name planned instead, by the
        path the main screen's X takes. Posted to the app: this screen is going away."""
        requests = self.restart_jobs()
        if requests:
            self.dismiss(None)
            self.app.post_message(PlanRequested(*requests))

    def _included(self, include: bool | None) -> None:
        if include:
            self.plans = tuple(p.including(e.pid for e in p.includable) for p in self.plans)
            self.redraw()

    @on(Button.Pressed, "#plan-cancel")
    def _cancel_pressed(self) -> None:
        self.action_cancel()

    @on(Button.Pressed, "#plan-kill")
    def _kill_pressed(self) -> None:
        self.action_confirm()


class IncludeScreen(Confirm):
    """The second confirmation before a protected monitor joins a plan: it names the risk."""

    BINDINGS: ClassVar[list[BindingType]] = answer_bindings("Include")
    AUTO_FOCUS = "#include-cancel"
    NAME = "include"
    YES = "Include"

    def __init__(self, monitors: Sequence[Excluded]) -> None:
        super().__init__()
        self.monitors = tuple(monitors)

    def on_mount(self) -> None:
        set_title(self.query_one("#include-box"), "Include a protected monitor?")
        text = Text()
        for e in self.monitors:
            text.append(f"{e.pid} {fmt.safe(e.brief, 80)}", "bold")
            text.append(f"\n  {fmt.safe(e.why, 200)}\n")
        text.append(
            "\nA monitor only watches GPUs (DCGM, nvidia-persistenced, an exporter): stopping it ends its "
            "metrics, health checks or persistence for every user of this host, and holds no memory of "
            "a job. Include it only if it is the one in the way."
        )
        self.query_one("#include-text", Static).update(text)

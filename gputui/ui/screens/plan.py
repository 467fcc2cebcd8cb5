"""The confirmation dialog: every plan of a request, grouped by host, before anything is signalled.

It lists what will be stopped (host, PID, user, command, GPU memory, why), the unattributed holders
the sweep would add (a separate, explicit option: `s`), what is left alone and why, the warnings
(other users' processes, state D, ...) and the stages with their timeouts. Focus starts on Cancel,
so an accidental Enter cancels; killing takes ctrl+k, or Tab to the Kill button and Enter (or a
click). A plan with nothing to signal says so and cannot be confirmed. The dialog returns the plans
to run (with the sweep as chosen), or None.

Posting's ConfirmationModal pattern: bindings call `dismiss`, the caller awaits `push_screen_wait`.
Every process name, command line and user name is untrusted: built into `Text`, made safe first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from gputui.model import Sample
from gputui.plan import VERIFY_POLL_MS, Excluded, Plan, PlanWarning, Target
from gputui.units import fmt_bytes

from .. import fmt, kinds
from ..widgets.status import StyledStatic

KEYS_HINT = "ctrl+k kill · tab to Kill, enter · s sweep on/off · ↑↓ scroll · esc cancel"


def stages_line(plan: Plan) -> str:
    """`SIGTERM -> wait 5 s -> SIGKILL -> rescan -> verify (NVML every 20 ms, up to 10 s)`."""
    t = f"{plan.term_timeout:g}"
    steps = [f"SIGINT -> wait {t} s"] if plan.sigint_first else []
    steps += [f"SIGTERM -> wait {t} s", "SIGKILL"]
    sweep = len(plan.sweep) if plan.sweep_included else 0
    steps.append(f"rescan (+ sweep {sweep})" if sweep else "rescan")
    steps.append(f"verify (NVML every {VERIFY_POLL_MS} ms, up to {plan.verify_timeout:g} s)")
    return " -> ".join(steps)


def scope_words(plan: Plan) -> str:
    gpus = ",".join(map(str, plan.gpu_indexes)) or "-"
    if plan.scope == "host":
        return f"free every GPU ({gpus})"
    if plan.scope == "gpus":
        return f"free GPU {gpus}"
    return f"stop the chosen processes, verify GPU {gpus}"


def _is_severe(warning: PlanWarning) -> bool:
    text = warning.message
    return "state D" in text or "not to you" in text or "will be refused" in text


WIDE = 100  # columns: from this width the why gets its own column; below, it goes under the command


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
    }


class PlanWarnings(PlanText):
    """Every plan's warnings, above the lists (which may scroll): they must be seen."""

    def show(self, plans: Sequence[Plan]) -> None:
        text = Text()
        hosts = len({p.host for p in plans}) > 1
        for plan in plans:
            # The sweep's own line says whether it is included: no warning for that.
            for w in plan.with_sweep(True).warnings if plan.sweep else plan.warnings:
                if text:
                    text.append("\n")
                style = self.style_of("plan--error" if _is_severe(w) else "plan--warn")
                where = f"{fmt.safe(plan.host, 40)}: " if hosts else ""
                text.append(f"! {where}{fmt.safe(w.message, 300)}", style)
        self.display = bool(text)
        self.update(text)


class PlanBody(PlanText):
    """The plans as tables, grouped by host; rebuilt on every change (sweep, theme, width)."""

    _wide = True

    def show(self, plans: Sequence[Plan], samples: dict[str, Sample], operator: str, wide: bool) -> None:
        self._wide = wide
        parts: list[RenderableType] = []
        for i, plan in enumerate(plans):
            if i:
                parts.append(Text(""))
            parts.extend(self._host(plan, samples.get(plan.host), operator))
        self.update(Group(*parts))

    # -- one host --------------------------------------------------------------------------

    def _host(self, plan: Plan, sample: Sample | None, operator: str) -> list[RenderableType]:
        muted = self.style_of("plan--muted")
        head = Text(no_wrap=True, overflow="ellipsis")
        head.append(fmt.safe(plan.host, 40), self.style_of("plan--host"))
        head.append(f" · {scope_words(plan)}")
        for g in plan.gpus:
            head.append(f" · GPU{g.index} {fmt_bytes(g.memory_used)} of {fmt_bytes(g.memory_total)}", muted)
        out: list[RenderableType] = [head]
        if plan.targets:
            out.append(self._section(f"Stop ({len(plan.targets)})"))
            out.append(self._targets(plan.targets, operator))
        else:
            out.append(Text("Nothing to stop here: no process uses or holds these GPUs.", muted))
        if plan.sweep:
            n = len(plan.sweep)
            box = "☑" if plan.sweep_included else "☐"
            state = "included: s leaves them out" if plan.sweep_included else "not included: s adds them"
            line = Text(no_wrap=True, overflow="ellipsis")
            line.append(f"{box} Sweep ({n}) ", self.style_of("plan--section"))
            line.append(f"unattributed hidden holders, host-wide ({state})", muted)
            out.append(line)
            out.append(self._targets(plan.sweep, operator, off=not plan.sweep_included))
        if plan.excluded:
            out.append(self._section(f"Left alone ({len(plan.excluded)})"))
            out.append(self._excluded(plan.excluded, sample))
        return out

    def _section(self, title: str) -> Text:
        return Text(title, self.style_of("plan--section"), no_wrap=True)

    def _table(self) -> Table:
        table = Table(
            box=None,
            show_header=True,
            header_style=self.style_of("plan--muted"),
            padding=(0, 1, 0, 0),
            pad_edge=False,
            expand=True,
        )
        table.add_column(Text("PID", justify="right"), justify="right", width=7, no_wrap=True)
        table.add_column("User", width=9, no_wrap=True, overflow="ellipsis")
        table.add_column("Kind", width=9, no_wrap=True)
        table.add_column("GPU", width=4, no_wrap=True, overflow="ellipsis")
        table.add_column(Text("GPU mem", justify="right"), justify="right", width=7, no_wrap=True)
        table.add_column("St", width=2, no_wrap=True)
        if self._wide:
            table.add_column("Command", ratio=1, no_wrap=True, overflow="ellipsis")
            table.add_column("Why", ratio=1)
        else:
            table.add_column("Command · why", ratio=1)
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
        if self._wide:
            table.add_row(*cells, cmd, reason, style=style)
        else:
            reason = Text("↳ ", self.style_of("plan--why")) + reason
            table.add_row(*cells, Group(cmd, reason), style=style)

    def _targets(self, targets: Sequence[Target], operator: str, off: bool = False) -> Table:
        table = self._table()
        warn, error = self.style_of("plan--warn"), self.style_of("plan--error")
        for t in targets:
            state = t.state or "-"
            cells = [
                Text(str(t.pid), justify="right"),
                Text(fmt.safe(t.user, 32) or "-", warn if t.user is not None and t.user != operator else ""),
                Text(kinds.label(t.kind), self.style_of(kinds.STYLE.get(t.kind, "kind--hidden"))),
                Text(",".join(map(str, t.gpus)) or "-"),
                Text(fmt_bytes(t.memory) if t.memory else "-", justify="right"),
                Text(state, error if state == "D" else ""),
            ]
            self._row(table, cells, t.brief, t.why, self.style_of("plan--off") if off else None)
        return table

    def _excluded(self, excluded: Sequence[Excluded], sample: Sample | None) -> Table:
        table = self._table()
        by_pid = {p.pid: p for p in sample.processes} if sample is not None else {}
        for e in excluded:
            proc = by_pid.get(e.pid)
            memory = proc.gpu_bytes if proc is not None else 0
            cells = [
                Text(str(e.pid), justify="right"),
                Text(fmt.safe(e.user, 32) or "-"),
                Text(kinds.label(e.kind), self.style_of(kinds.STYLE.get(e.kind, "kind--hidden"))),
                Text(",".join(map(str, e.gpus)) or "-"),
                Text(fmt_bytes(memory) if memory else "-", justify="right"),
                Text((proc.state if proc is not None else None) or "-"),
            ]
            self._row(table, cells, e.brief, e.why)
        return table


class PlanScreen(ModalScreen[tuple[Plan, ...] | None]):
    """Confirm the plans (one per host). Returns the plans to run, or None (cancelled)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", key_display="esc", tooltip="close, signal nothing"),
        Binding("ctrl+k", "confirm", "Kill", priority=True, tooltip="confirm: run the plan (stop, verify)"),
        Binding("s", "toggle_sweep", "Sweep", tooltip="add or leave out the unattributed holders"),
        Binding("up", "scroll(-1)", "Scroll up", show=False),
        Binding("down", "scroll(1)", "Scroll down", show=False),
        Binding("pageup", "scroll(-10)", "Page up", show=False),
        Binding("pagedown", "scroll(10)", "Page down", show=False),
    ]
    AUTO_FOCUS = "#plan-cancel"

    def __init__(
        self, plans: Sequence[Plan], samples: dict[str, Sample] | None = None, *, operator: str
    ) -> None:
        super().__init__()
        self.plans: tuple[Plan, ...] = tuple(plans)
        self.samples = dict(samples or {})
        self.operator = operator

    # -- what it shows ---------------------------------------------------------------------

    @property
    def runnable(self) -> tuple[Plan, ...]:
        """The plans that signal something: verifying alone is not what the operator asked for."""
        return tuple(p for p in self.plans if not p.is_empty)

    @property
    def sweep_on(self) -> bool:
        return any(p.sweep_included for p in self.plans if p.sweep)

    def compose(self) -> ComposeResult:
        with Vertical(id="plan-box"):
            yield Static("", id="plan-summary", markup=False)
            yield PlanWarnings(id="plan-warnings")
            with VerticalScroll(id="plan-body", can_focus=False):
                yield PlanBody(id="plan-text")
            yield Static("", id="plan-stages", markup=False)
            with Horizontal(id="plan-buttons"):
                yield Button("Cancel", id="plan-cancel", variant="primary")
                yield Button("Kill", id="plan-kill", variant="error")
                yield Static(KEYS_HINT, id="plan-keys", markup=False)

    def on_mount(self) -> None:
        box = self.query_one("#plan-box")
        hosts = {p.host for p in self.plans}
        title = "Free GPUs · confirm" + (f" · {len(hosts)} hosts" if len(hosts) > 1 else "")
        fmt.set_title(box, title)
        self.app.theme_changed_signal.subscribe(self, lambda _: self.redraw())
        self.redraw()

    def redraw(self) -> None:
        if not self.is_attached:
            return
        self.query_one(PlanBody).show(self.plans, self.samples, self.operator, self.size.width >= WIDE)
        self.query_one(PlanWarnings).show(self.plans)
        runnable = self.runnable
        n = sum(len(p.signalled) for p in runnable)
        hosts = sorted({p.host for p in runnable})
        summary = Text(no_wrap=True, overflow="ellipsis")
        body = self.query_one(PlanBody)
        if n:
            where = fmt.safe(hosts[0], 40) if len(hosts) == 1 else f"{len(hosts)} hosts"
            summary.append(
                f"Stop {n} process{'es' if n != 1 else ''} on {where}, then verify the GPUs are free.",
                body.style_of("plan--section"),
            )
        else:
            hint = "s adds the sweep" if any(p.sweep for p in self.plans) else "nothing to confirm"
            summary.append(f"Nothing to stop: no process to signal ({hint}).", body.style_of("plan--warn"))
        self.query_one("#plan-summary", Static).update(summary)
        stages = Text(no_wrap=True, overflow="ellipsis")
        stages.append("Stages: ", body.style_of("plan--section"))
        stages.append(stages_line(runnable[0] if runnable else self.plans[0]) if self.plans else "-")
        self.query_one("#plan-stages", Static).update(stages)
        kill = self.query_one("#plan-kill", Button)
        kill.label = f"Kill {n}" if n else "Nothing to kill"
        kill.disabled = not n
        self.refresh_bindings()
        self.call_after_refresh(self._fit)

    def on_resize(self) -> None:
        self.redraw()

    def _fit(self) -> None:
        """The lists scroll; the rest of the dialog (summary, warnings, stages, buttons) always
        shows: CSS cannot cap an auto-height child at what its auto-height parent has left."""
        box = self.query_one("#plan-box")
        body = self.query_one("#plan-body")
        others = sum(
            w.outer_size.height + w.styles.margin.top + w.styles.margin.bottom
            for w in box.children
            if w is not body and w.display
        )
        frame = box.outer_size.height - box.size.height + box.styles.padding.top + box.styles.padding.bottom
        room = max(3, self.size.height - others - frame - body.styles.margin.top - body.styles.margin.bottom)
        if body.styles.max_height is None or body.styles.max_height.value != room:
            body.styles.max_height = room

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_sweep":
            return any(p.sweep for p in self.plans)
        if action == "confirm":
            return True if self.runnable else None
        return True

    # -- what it does ----------------------------------------------------------------------

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_confirm(self) -> None:
        plans = self.runnable
        if plans:
            self.dismiss(plans)

    def action_toggle_sweep(self) -> None:
        on = not self.sweep_on
        self.plans = tuple(p.with_sweep(on) if p.sweep else p for p in self.plans)
        self.redraw()

    def action_scroll(self, lines: int) -> None:
        self.query_one("#plan-body", VerticalScroll).scroll_relative(y=lines, animate=False)

    @on(Button.Pressed, "#plan-cancel")
    def _cancel_pressed(self) -> None:
        self.action_cancel()

    @on(Button.Pressed, "#plan-kill")
    def _kill_pressed(self) -> None:
        self.action_confirm()

"""The process detail (`d` on the process table): one process in full.

It opens at once with what the latest sample says (kind and why, user, state, CPU, RSS, GPU memory
per GPU, the device files it holds), asks the host's probe to read the rest from /proc now (the
`detail` request: whole command line, working directory, executable, threads, parents up to init,
cgroup, device files by fd) and shows it when it comes; a process that has exited, or whose PID
now names another process, is said to be gone. Nothing is cut: long values wrap. Everything from
the host is shown literally (rich Text, never markup; control characters escaped at the edge).
`c` copies the PID, `C` the command line as shown (control characters as their escapes, each
argument quoted as a shell would need it; it is never run). `e` shows its environment (read by the
probe for the process's own user or root; secret-looking values hidden until asked: environ.py).
`k` sends it any signal by name (SIGSTOP and SIGCONT too): chosen in signal.py, confirmed in the
plan dialog, sent once by the host's probe after it checked the process again; not offered
read-only, on a host that takes no plans, or for a process not in /proc.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from typing import ClassVar

from rich.console import RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll

from gputui.fleet.history import ProcReadings
from gputui.fleet.session import EventArrived, FleetEvent, SampleArrived
from gputui.kill.operate import SignalRequest
from gputui.model import GpuShare, Job, Parent, Proc, ProcDetail, Sample, brief_command
from gputui.model.textsafe import printable
from gputui.text.units import fmt_duration, fmt_memory, fmt_percent, index_runs
from gputui.text.words import count

from .. import fmt, kinds
from ..messages import PlanRequested, View
from ..panels.kill import not_relayed
from ..widgets.borders import set_title
from ..widgets.chart import Scale, Series, nice_bytes, nice_top, stacked, stacked_cells
from ..widgets.detail_body import DetailBody, no_answer_words, unread_words
from .dialog import DIALOG, Dialog
from .environ import EnvironScreen
from .signal import SignalScreen

STATES = {
    "R": "running",
    "S": "sleeping",
    "D": "uninterruptible (inside the kernel or driver: not even SIGKILL ends it now)",
    "Z": "zombie (exited; its parent has not reaped it)",
    "T": "stopped",
    "t": "stopped by a debugger",
    "I": "idle",
    "X": "dead",
}
CHAIN_ENDS = {
    "init": "",
    "probe": " (the probe's own chain from here)",
    "gone": " (a parent exited while it was read)",
    "limit": " (and more)",
}
LABEL_WIDTH = 13


def command_text(command: tuple[str, ...]) -> str:
    """A command line as one string, each argument quoted where a shell would need it (what `C`
    copies: the text, never run)."""
    return shlex.join(command)


class Rows:
    """The detail's rows as they are built: a label and its text, the text from plain and styled parts."""

    def __init__(self, muted: Style, warn: Style, ok: ProcDetail | None) -> None:
        self.muted, self.warn = muted, warn
        self.ok = ok  # what /proc said just now, when it was read
        self.rows: list[tuple[str, Text]] = []

    def add(self, name: str, *parts: tuple[str, Style | str] | str) -> None:
        text = Text(overflow="fold")
        for part in parts:
            if isinstance(part, str):
                text.append(part)
            else:
                text.append(*part)
        self.rows.append((name, text))

    def unreadable(self, field: str) -> tuple[str, Style]:
        """A value /proc did not give: why, or `-`."""
        why = self.ok.unreadable.get(field) if self.ok is not None else None
        return (f"not readable: {why}" if why else "-", self.muted)


class ProcDetailScreen(Dialog[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,d", "dismiss", "Close", key_display="esc"),
        Binding("c", "copy_pid", "Copy PID", tooltip="copy the PID to the clipboard"),
        Binding("C", "copy_command", "Copy command", tooltip="copy the whole command line"),
        Binding("r", "reread", "Read again", tooltip="read the process from /proc again"),
        Binding("e", "environ", "Environment", tooltip="its environment (secret-looking values hidden)"),
        Binding("k", "signal", "Signal", tooltip="send it a signal by name (SIGSTOP, SIGCONT, SIGTERM...)"),
        Binding("k", "refuse('signal')", show=False),  # a host read through a hub: why not, at once
    ]

    def __init__(self, host: str, record: Proc | Parent) -> None:
        super().__init__()
        self.host = host
        self.record = record
        self.detail: ProcDetail | None = None
        self.status = "reading"  # reading, read, no-answer, gone, ghost

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="pdetail-box", classes=DIALOG) as box:
            set_title(box, f"Process {self.record.pid} · {fmt.safe(self.host, 40)}")
            # Short enough for 80 columns: what each key does is in the footer and the help.
            box.border_subtitle = (
                "c/C copy PID/command · e environment · k signal · r again · esc close"
                if self._can_signal()
                else "c/C copy PID/command · e environment · r read again · esc close"
            )
            yield DetailBody(id="pdetail-body")

    def on_mount(self) -> None:
        self.body = self.query_one(DetailBody)
        self._awaiting = False  # a signal was asked for: read the process again once it is sent
        self.dash.fleet.follow(self.host)  # its processes' history is kept from now on, in any fleet
        self.dash.fleet.listen(self._on_fleet)
        self.action_reread()

    def on_unmount(self) -> None:
        self.dash.fleet.unlisten(self._on_fleet)

    def _on_fleet(self, change: FleetEvent) -> None:
        """The `done` of a plan about this process (the signal chosen here): read it again, so
        its state (T after SIGSTOP) shows without `r`. A sample of its host: the charts move on."""
        if isinstance(change, SampleArrived) and change.view.name == self.host:
            self.redraw()
            return
        if not (self._awaiting and isinstance(change, EventArrived) and change.view.name == self.host):
            return
        event = change.event
        processes = event.data.get("processes") if event.stage == "done" else None
        if isinstance(processes, list) and any(
            isinstance(p, dict) and p.get("pid") == self.record.pid for p in processes
        ):
            self._awaiting = False
            self.action_reread()

    def on_resize(self) -> None:
        self.call_after_refresh(self.redraw)  # the charts' width is the body's, laid out anew

    # -- reading -----------------------------------------------------------------------------

    def action_reread(self) -> None:
        record = self._latest()
        if record.start_time is None:
            self.status = "ghost"  # NVML lists a PID that is not in /proc: nothing to read there
            self.redraw()
            return
        self.status = "reading"
        self.redraw()
        self.run_worker(self._read(record.pid, record.start_time), exclusive=True, group="detail")

    async def _read(self, pid: int, start_time: int) -> None:
        detail = await self.dash.fleet.request_detail(self.host, pid, start_time)
        if not self.is_attached:
            return
        self.detail = detail
        self.status = "no-answer" if detail is None else "gone" if not detail.ok else "read"
        self.redraw()

    def _latest(self) -> Proc | Parent:
        """The record as the latest sample has it (same PID and start time), else as opened."""
        sample = self._sample()
        if sample is not None:
            records: tuple[Proc | Parent, ...] = (*sample.processes, *sample.parents)
            for record in records:
                if record.key == self.record.key and type(record) is type(self.record):
                    self.record = record
                    break
        return self.record

    def _sample(self) -> Sample | None:
        try:
            return self.dash.fleet.view(self.host).sample
        except KeyError:
            return None

    def action_environ(self) -> None:
        record = self._latest()
        if record.start_time is None:
            self.notify(f"PID {record.pid} is not in /proc: no environment to read.", severity="warning")
            return
        self.app.push_screen(EnvironScreen(self.host, record.pid, record.start_time))

    def _can_signal(self) -> bool:
        """Whether `k` is offered: not read-only, a host that takes plans (directly), a process in /proc."""
        if self.dash.read_only or self.record.start_time is None:
            return False
        try:
            view = self.dash.fleet.view(self.host)
        except KeyError:
            return False
        return view.can_kill and not_relayed(view, "Signals") is None

    def _signal_refusal(self) -> str | None:
        """Why `k` is refused: read-only, or a host read through a hub."""
        if self.dash.read_only:
            return self.dash.read_only_why
        try:
            return not_relayed(self.dash.fleet.view(self.host), "Signals")
        except KeyError:
            return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "signal":
            return self._can_signal()
        if action == "refuse":
            return self._signal_refusal() is not None
        return True

    def action_refuse(self, action: str) -> None:
        reason = self._signal_refusal()
        if reason is not None:
            self.notify(reason, title="Signal: not offered here", severity="warning", timeout=8, markup=False)

    def action_signal(self) -> None:
        if not self._can_signal():
            return
        record = self._latest()
        command = brief_command(self._command()) or (record.name or "?")
        self.app.push_screen(SignalScreen(self.host, record.pid, command), self._signal_chosen)

    def _signal_chosen(self, name: str | None) -> None:
        """The app plans it (a fresh scan), and the plan dialog confirms it: process and signal."""
        record = self._latest()
        if name is not None and record.start_time is not None:
            target = (record.pid, record.start_time)
            self._awaiting = True
            self.post_message(PlanRequested(SignalRequest(self.host, name, target), view=View(self)))

    def on_screen_suspend(self) -> None:
        self._covered = True

    def on_screen_resume(self) -> None:
        if getattr(self, "_covered", False):
            self._covered = False
            self.action_reread()  # back from the environment, or a signal's dialog: read it anew

    # -- copying -----------------------------------------------------------------------------

    def action_copy_pid(self) -> None:
        self.app.copy_to_clipboard(str(self.record.pid))
        self.notify(f"Copied PID {self.record.pid}.", timeout=3)

    def action_copy_command(self) -> None:
        command = self._command()
        if not command:
            self.notify("No command line to copy (the process is not in /proc).", severity="warning")
            return
        text = command_text(command)
        self.app.copy_to_clipboard(text)
        self.notify(f"Copied the command line of PID {self.record.pid} ({len(text)} characters).", timeout=3)

    def _command(self) -> tuple[str, ...]:
        detail = self.detail
        if detail is not None and detail.ok and detail.command:
            return detail.command
        return self.record.command

    # -- drawing -----------------------------------------------------------------------------

    def redraw(self) -> None:
        body = self.body
        if not body.is_attached:
            return  # the screen is closing: Textual prunes the body first, and its styles with it
        detail = self.detail
        ok = detail if detail is not None and detail.ok else None
        rows = Rows(body.style_of("pdetail--muted"), body.style_of("pdetail--warn"), ok)
        sample = self._sample()
        self._who_rows(rows, sample)
        self._time_rows(rows)
        self._family_rows(rows, sample)
        self._place_rows(rows)
        grid = _grid(rows.rows, body.style_of("pdetail--label"))
        body.show([self._status_line(body), Text(), grid, Text(), *self._history(body)])

    def _history(self, body: DetailBody) -> list[RenderableType]:
        """Its GPU memory, SM, CPU and RSS over time, as the host's rings kept them."""
        section = body.style_of("pdetail--label")
        muted = body.style_of("pdetail--muted")
        try:
            ring = self.dash.fleet.view(self.host).processes.get(self.record.key)
        except KeyError:
            ring = None
        if ring is None or not ring.count:
            why = "no samples of it yet (kept for the 16 processes that hold the most GPU memory)"
            return [Text("History", section), Text(why, muted)]
        times = ring.times
        series = self._series(body, ring)
        width = body.size.width
        if not width:  # not laid out yet: drawn again, to its width, once it is
            self.call_after_refresh(self.redraw)
            width = 60
        shown = min(len(times), stacked_cells(series, width, LABEL_WIDTH))  # what the charts draw
        seconds = times[-1] - times[-shown]
        heading = f"History, the last {fmt_duration(seconds)} ({count(shown, 'sample')}, one a cell)"
        charts = stacked(series, times, width, label=section, axis=muted, label_width=LABEL_WIDTH)
        return [Text(heading, section), charts]

    def _series(self, body: DetailBody, ring: ProcReadings) -> list[Series]:
        exact = self.dash.exact_memory

        def memory(value: float) -> str:
            return fmt_memory(int(value), exact)

        gpu, sm, cpu, rss = ring.gpu_memory, ring.sm, ring.cpu, ring.rss
        top_gpu = nice_bytes(max((v or 0.0 for v in gpu), default=0.0))
        top_rss = nice_bytes(max((v or 0.0 for v in rss), default=0.0))
        percent = Scale(100.0, _percent)
        cpu_scale = Scale(nice_top(max((v or 0.0 for v in cpu), default=0.0), 100.0), _percent)
        return [
            Series(
                "GPU memory", gpu, Scale(top_gpu, memory), body.style_of("pdetail--gpu"), _now(gpu, memory)
            ),
            Series("SM", sm, percent, body.style_of("pdetail--sm"), _now(sm, _percent)),
            Series("CPU", cpu, cpu_scale, body.style_of("pdetail--cpu"), _now(cpu, _percent)),
            Series("RSS", rss, Scale(top_rss, memory), body.style_of("pdetail--rss"), _now(rss, memory)),
        ]

    def _who_rows(self, rows: Rows, sample: Sample | None) -> None:
        """Command, kind, user and state."""
        record, ok, muted = self.record, rows.ok, rows.muted
        command = self._command()
        rows.add("Command", printable(command_text(command)) if command else ("-", muted))
        if isinstance(record, Proc):
            self._kind_rows(record, sample, rows)
        else:
            rows.add(
                "Kind", ("not a GPU process: the parent of GPU processes, shown to join their family", muted)
            )
        user = (ok.user if ok else None) or record.user
        uid = ok.uid if ok and ok.uid is not None else record.uid
        rows.add("User", fmt.safe(user, 200) or "-", (f" (uid {uid})" if uid is not None else "", muted))
        state = (ok.state if ok else None) or record.state
        if state:
            flagged = rows.warn if state in ("D", "Z") else ""
            rows.add("State", (state, flagged), f" {STATES.get(state, '')}".rstrip())
        else:
            rows.add("State", ("-", muted))

    def _time_rows(self, rows: Rows) -> None:
        """When it started, and what it costs: CPU, RSS, threads."""
        record, ok, muted = self.record, rows.ok, rows.muted
        started = ok.started if ok else None
        elapsed = ok.elapsed if ok and ok.elapsed is not None else getattr(record, "elapsed", None)
        when = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started)) if started else None
        rows.add(
            "Started",
            f"{when}, " if when else "",
            f"{fmt_duration(elapsed)} ago" if elapsed is not None else ("-", muted),
            (
                f" (start time {record.start_time} ticks after boot)"
                if record.start_time is not None
                else "",
                muted,
            ),
        )
        if isinstance(record, Proc):
            cpu_time = f"{ok.cpu_time:.1f} s of CPU in all" if ok and ok.cpu_time is not None else ""
            if record.cpu_percent is not None:
                now = f"{fmt_percent(record.cpu_percent)} of one core now"
                rows.add("CPU", now + (f" · {cpu_time}" if cpu_time else ""))
            else:  # a ghost, or a process the probe has not timed yet: no figure to give
                rows.add("CPU", cpu_time or ("-", muted))
        rss = ok.rss if ok and ok.rss is not None else getattr(record, "rss", None)
        rows.add("RSS", fmt_memory(rss, self.dash.exact_memory) if rss is not None else ("-", muted))
        if ok is not None:
            rows.add("Threads", str(ok.threads) if ok.threads is not None else rows.unreadable("status"))

    def _family_rows(self, rows: Rows, sample: Sample | None) -> None:
        """Its family and job, its parents up to init, where it runs from."""
        record, ok, muted = self.record, rows.ok, rows.muted
        ppid = ok.ppid if ok else record.ppid
        group = [f"parent {ppid}" if ppid is not None else "parent -"]
        pgid = ok.pgid if ok else getattr(record, "pgid", None)
        sid = ok.sid if ok else getattr(record, "sid", None)
        if pgid is not None:
            group.append(f"process group {pgid}")
        if sid is not None:
            group.append(f"session {sid}")
        rows.add("Family", " · ".join(group))
        job = job_of_record(sample, record)
        if job is not None:
            rows.add("Job", *self._job_words(job, record, muted))
        if ok is None:
            return
        if ok.parents:
            chain = " ← ".join(f"{a.pid} {fmt.safe(a.name, 40) or '?'}" for a in ok.parents)
            rows.add("Parents", f"{ok.pid} ← {chain}", (CHAIN_ENDS.get(ok.parents_end or "", ""), muted))
        else:
            rows.add("Parents", ("none", muted))
        rows.add("Working dir", fmt.safe(ok.cwd, 5000) if ok.cwd else rows.unreadable("cwd"))
        rows.add("Executable", fmt.safe(ok.exe, 5000) if ok.exe else rows.unreadable("exe"))

    def _place_rows(self, rows: Rows) -> None:
        """Its container and cgroup, and the device files it holds."""
        record, ok, muted = self.record, rows.ok, rows.muted
        container = (ok.container if ok else None) or getattr(record, "container", None)
        nspid = ok.nspid if ok else ()
        inner = nspid[-1] if len(nspid) > 1 else getattr(record, "nspid", None)
        where = fmt.safe(container, 300) if container else ""
        if inner is not None:
            where += f"{' · ' if where else ''}PID {inner} in its own PID namespace"
        rows.add("Container", where or ("none", muted))
        if ok is not None:
            cgroup = "\n".join(fmt.safe(line, 600) for line in ok.cgroup)
            rows.add("Cgroup", cgroup or rows.unreadable("cgroup"))
            self._fd_rows(ok, rows)
        elif isinstance(record, Proc) and record.holds:
            rows.add("Holds", "\n".join(fmt.safe(h, 300) for h in record.holds))

    def _job_words(
        self, job: Job, record: Proc | Parent, muted: Style
    ) -> list[tuple[str, Style | str] | str]:
        """The job this process belongs to (or is the root of): its id, members, GPUs, memory,
        where it runs; the root's command when it is another process."""
        role = (
            "its root"
            if record.pid == job.root
            else "a member"
            if record.pid in job.members
            else "part of it"
        )
        members = ", ".join(str(pid) for pid in job.members[:8]) + (" …" if len(job.members) > 8 else "")
        parts: list[tuple[str, Style | str] | str] = [
            f"job {fmt.safe(job.id, 64)} ({role}) · {count(len(job.members), 'member')}",
            f": {members}" if members else "",
        ]
        if job.gpus:
            parts.append(f" · GPU {','.join(text for text, _ in index_runs(job.gpus))}")
        if job.memory is not None:
            parts.append(f" · {fmt_memory(job.memory, self.dash.exact_memory)}")
        if job.where:
            parts.append(f" · {fmt.safe(job.where, 300)}")
        if record.pid != job.root:
            parts.append((f"\nroot {job.root}: {fmt.safe(job.command_line, 300)}", muted))
        if not self.dash.read_only:
            parts.append(
                ("\nX on the process table stops the whole job (root first, then every member)", muted)
            )
        return parts

    def _kind_rows(self, proc: Proc, sample: Sample | None, rows: Rows) -> None:
        add, muted, warn = rows.add, rows.muted, rows.warn
        kind_style = self.body.style_of(kinds.STYLE.get(proc.kind, "kind--hidden"))
        why = kinds.note(proc, sample)
        add("Kind", (kinds.proc_label(proc), kind_style), f": {why}" if why else "")
        add("", (kinds.MEANINGS.get(proc.kind, ""), muted))
        if proc.mps in kinds.MPS_MEANINGS:
            add("MPS", (kinds.MPS_MEANINGS[proc.mps], muted))
        if proc.mig:
            add(
                "MIG",
                " · ".join(
                    f"GPU {m.gpu}, GPU instance {m.gi}, compute instance {'?' if m.ci is None else m.ci} ({m.label})"
                    for m in proc.mig
                ),
            )
        if proc.protected:
            add("Protected", (f"{fmt.safe(proc.protected)}: never signalled unless included by name", warn))
        if proc.gpu_memory:
            parts = [
                f"GPU {gpu}: {fmt_memory(size, self.dash.exact_memory) if size is not None else 'not reported'}"
                for gpu, size in sorted(proc.gpu_memory.items())
            ]
            if len(proc.gpu_memory) > 1:
                parts.append(f"{fmt_memory(proc.gpu_bytes, self.dash.exact_memory)} in all")
            add("GPU memory", " · ".join(parts))
        else:
            add("GPU memory", ("none listed by NVML", muted))
        if proc.gpus and not proc.gpu_memory:
            runs = ",".join(text for text, _ in index_runs(proc.gpus))
            add("GPUs", f"attributed to GPU {runs}")
        if proc.gpu_util:
            add(
                "GPU util",
                " · ".join(
                    f"GPU {gpu}: {share_words(share)}" for gpu, share in sorted(proc.gpu_util.items())
                ),
            )
        elif proc.gpu_memory:
            add("GPU util", (util_missing(sample), muted))

    def _fd_rows(self, ok: ProcDetail, rows: Rows) -> None:
        add, muted, unreadable = rows.add, rows.muted, rows.unreadable
        if "fds" in ok.unreadable:
            add("Device files", unreadable("fds"))
            return
        lines = [f"fd {f.fd:<4} {fmt.safe(f.path, 300)}" for f in ok.fds]
        if ok.fds_more:
            lines.append(f"… and {ok.fds_more} more")
        total = f"{ok.fd_count} open files in all" if ok.fd_count is not None else ""
        if lines:
            add("Device files", "\n".join(lines), (f"\n{total}" if total else "", muted))
        else:
            add("Device files", ("none", muted), (f" ({total})" if total else "", muted))

    def _status_line(self, body: DetailBody) -> Text:
        host = fmt.safe(self.host, 40)
        pid = self.record.pid
        status = body.style_of("pdetail--status")
        warn = body.style_of("pdetail--warn")
        detail = self.detail
        if self.status == "ghost":
            return Text(
                f"PID {pid} is not in /proc on {host}: NVML lists a PID that is dead or in another PID "
                "namespace. What the latest sample says:",
                warn,
            )
        if self.status == "reading":
            return Text(f"Reading /proc on {host}… (the latest sample meanwhile)", status)
        if self.status == "no-answer":
            return Text(f"{no_answer_words(host)}: what the latest sample says. r: read again.", warn)
        if self.status == "gone" and detail is not None:
            return Text(f"PID {pid} {unread_words(detail)}. What the last sample said:", warn)
        return Text(f"Read from /proc on {host} just now (r: again).", status)


def _now(values: list[float | None], say: Callable[[float], str]) -> str:
    """The latest reading, as the chart's scale says it; `-` where none was read."""
    value = values[-1] if values else None
    return "-" if value is None else say(value)


def _percent(value: float) -> str:
    return f"{value:.0f}%"


def job_of_record(sample: Sample | None, record: Proc | Parent) -> Job | None:
    """The job a process belongs to (its `job`), or that a parent is the root of or part of."""
    if sample is None:
        return None
    if isinstance(record, Proc):
        return sample.job_of(record)
    return next((j for j in sample.jobs if record.key == j.key or record.key in j.processes), None)


def share_words(share: GpuShare) -> str:
    """A process's share of one GPU: SM and memory controller, encoder and decoder when busy."""
    words = f"SM {_pct(share.sm)} · memory {_pct(share.mem)}"
    if share.enc or share.dec:
        words += f" · encoder {_pct(share.enc)} · decoder {_pct(share.dec)}"
    return words


def _pct(value: int | None) -> str:
    return f"{value}%" if value is not None else "-"


def util_missing(sample: Sample | None) -> str:
    """Why a GPU user has no utilization figures."""
    state = sample.proc_util.state if sample is not None else "unsupported"
    if state == "off":
        return "not read (per-process utilization is off)"
    if state == "on":
        return "none in the last reading (idle then, or started since)"
    return "not reported by this driver"


def _grid(rows: list[tuple[str, Text]], label: Style) -> Table:
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(width=LABEL_WIDTH, no_wrap=True)
    grid.add_column(ratio=1, overflow="fold")
    for name, value in rows:
        grid.add_row(Text(name, label), value)
    return grid

"""The process pane: the processes of the GPU (or host) under the GPU cursor, its title, the process
followed (.), and what its keys do to the selection (space, u, I), a process (d) or a job (X)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from textual.notifications import SeverityLevel
from textual.screen import Screen

from gputui.fleet.session import LIVE, HostView
from gputui.kill.operate import Request
from gputui.model import Job, Parent, Proc, ProcUtilState
from gputui.text.units import fmt_memory
from gputui.text.words import count
from gputui.views.filter import NOTHING_MATCHES
from gputui.views.problems import group_of, proc_subject

from .. import fmt, kinds
from ..context import Dashboard
from ..state import DashboardState
from ..widgets.borders import set_subtitle, set_title
from ..widgets.proc_table import ProcScope, ProcTable, key_of
from .base import Panel


def sm_words(util: ProcUtilState, host: bool) -> str:
    """What the SM% column holds and how fresh it is (the driver's per-process query is slow: the
    probe reads it every few samples)."""
    if util.state == "off":
        return "SM% off"
    if util.state != "on":
        return "SM%: not reported by this driver"
    every = f"every {util.every:g} s" if util.every else "now and then"
    return f"SM% {'highest of its GPUs, ' if host else ''}{every}"


class ProcessesPanel(Panel):
    def __init__(
        self,
        screen: Screen[None],
        state: DashboardState,
        dash: Dashboard,
        table: ProcTable,
        scope_now: Callable[[], ProcScope | None],
    ) -> None:
        super().__init__(screen, state, dash)
        self.table = table
        self.scope: ProcScope | None = None  # what the table lists now
        self._scope_now = scope_now  # what it should list: the GPU (or fleet) pane's cursor says

    def shows(self, host: str) -> bool:
        return self.scope is not None and self.scope.host == host

    def refresh(self, force: bool = True) -> None:
        """List the processes of the GPU under the cursor: again where `force`, or where that
        changed."""
        scope = self._scope_now()
        if scope != self.scope:
            if self.scope is None or scope is None or scope.host != self.scope.host:
                self.table.forget()  # another host's processes: a new list, not a refresh
            self.scope = scope
            force = True
        if not force:
            return
        if scope is None:
            set_title(self.table, "Processes")
            self.table.sync({})
            self.keep_following()
            return
        view = self.view(scope.host)
        idle = view.idle.durations(self.dash.idle_after)
        query = self.state.procs.query
        self.table.show(
            view.sample,
            scope,
            self.state.procs.text,
            self.state.selection.keys(scope.host),
            live=view.status == LIVE,
            keep=self._keep(view, scope.gpu, idle) if query else None,
            idle=idle,
        )
        self.keep_following()
        self.title()

    def _keep(
        self, view: HostView, gpu: int | None, idle: Mapping[tuple[int, int | None], float]
    ) -> Callable[[Proc], bool]:
        """The process filter as a predicate (the language's query on each process)."""
        query, group, after = self.state.procs.query, group_of(view), self.dash.idle_after
        return lambda proc: query.matches(proc_subject(view, group, proc, gpu, idle.get(proc.key), after))

    def title(self) -> None:
        scope = self.scope
        if scope is None:
            set_title(self.table, "Processes")
            return
        view = self.view(scope.host)
        # What the operator switched on comes before the explanations, which a narrow pane cuts.
        title = f"Processes · {fmt.safe(scope.host, 40)}{self.not_live(view)}{self._modes(view)}"
        # Which memory the GPU mem column holds: a process on GPUs 0 and 1 shows what it has on
        # the GPU in view, and its total over its GPUs (the GPU column lists them) on the host's.
        title += (
            " · all GPUs · memory: total on its GPUs"
            if scope.gpu is None
            else f" · GPU {scope.gpu} · memory on GPU {scope.gpu}"
        )
        title += self._notes(view, scope)
        set_title(self.table, title)
        set_subtitle(self.table, self.table.hidden_sort())

    def _modes(self, view: HostView) -> str:
        """The filter, tree, jobs, following: what the operator switched on."""
        table, words = self.table, ""
        if self.state.procs.text:
            words += f" · filter: {fmt.safe(self.state.procs.text, 30)}"
            if not table.in_view:
                words += f" · {NOTHING_MATCHES}"
        if table.tree_mode:
            words += " · tree"
        if table.jobs_mode:
            jobs = len(view.sample.jobs) if view.sample is not None else 0
            words += f" · {count(jobs, 'job')}"
        key = self.state.following.key
        if key is not None:
            words += f" · following PID {key_of(key)[0]}"
            if key not in table.rows_data():
                words += " (not in this list)"
        return words

    def _notes(self, view: HostView, scope: ProcScope) -> str:
        """SM%, the jobs left out, the selection, the commands' offset."""
        table, sample, words = self.table, view.sample, ""
        if sample is not None and table.width_of("sm"):
            words += " · " + sm_words(sample.proc_util, scope.gpu is None)
        if sample is not None and sample.jobs_omitted and table.jobs_mode:
            words += f" · {count(sample.jobs_omitted, 'job')} left out by the probe (the smallest)"
        selection = self.state.selection
        selected = selection.count(scope.host)
        if selected:
            words += f" · {selected} selected"
        elsewhere = selection.count() - selected
        if elsewhere:
            words += f" · {elsewhere} selected on other hosts"
        if table.command_offset:
            words += f" · commands from character {table.command_offset + 1} (home: start)"
        return words

    def toggle_mode(self, tree: bool) -> None:
        """t (`tree`) or J: processes as a tree of families, or grouped by job; again: a list."""
        table = self.table
        if tree:
            table.tree_mode, table.jobs_mode = not table.tree_mode, False
        else:
            table.jobs_mode, table.tree_mode = not table.jobs_mode, False
        self.refresh()

    # -- following a process (.) ---------------------------------------------------------------

    def follow(self) -> None:
        key = self.table.cursor_key
        if key is None:
            return
        if self.state.following.key == key:
            self.unfollow(f"No longer following PID {key_of(key)[0]}.")
            return
        if self.table.cursor_proc_key is None:
            what = "is a job's" if self.table.cursor_job is not None else "only joins a family"
            self.screen.notify(f"Only a process of the list can be followed (this row {what}).")
            return
        self.state.following.follow(key, self.scope.host if self.scope is not None else None)
        self.title()

    def unfollow(self, words: str, severity: SeverityLevel = "information") -> None:
        self.state.following.end()
        self.screen.notify(words, severity=severity, timeout=4)
        self.title()

    def keep_following(self) -> None:
        """After a refresh: the cursor on the followed process, in view. Out of this list (another
        GPU's, filtered out, in a folded family) it is still followed, and the cursor goes back to it
        when it is listed again; on another host, or exited, following ends."""
        key = self.state.following.key
        if key is None:
            return
        table = self.table
        if key in table.rows_data():
            table.move_to(key)
            table.reveal_cursor()
            return
        pid_start = key_of(key)
        scope = self.scope
        if scope is None or scope.host != self.state.following.host:
            self.unfollow(f"No longer following PID {pid_start[0]} (another host in view).")
            return
        sample = self.view(scope.host).sample
        if sample is None or not any(p.key == pid_start for p in sample.processes):
            self.unfollow(f"PID {pid_start[0]} has exited: no longer following it.", "warning")

    def cursor_moved(self) -> None:
        """The cursor as it is now (a refresh moves rows, and puts it back on its process): a move
        to another row is the operator's, and ends following."""
        key = self.state.following.key
        if key is not None and key in self.table.rows_data() and self.table.cursor_key != key:
            self.unfollow(f"No longer following PID {key_of(key)[0]} (the cursor moved).")

    # -- what is under the cursor --------------------------------------------------------------

    def cursor_proc(self) -> Proc | None:
        """The process under the cursor, from the sample shown (the plan rescans anyway)."""
        key, scope = self.table.cursor_proc_key, self.scope
        sample = self.view(scope.host).sample if scope is not None and key is not None else None
        return next((p for p in sample.processes if p.key == key), None) if sample else None

    def cursor_record(self) -> Proc | Parent | None:
        """The process under the cursor, or the parent a tree's context row is."""
        scope, at = self.scope, self.table.cursor_any_key
        sample = self.view(scope.host).sample if scope is not None and at is not None else None
        if sample is None or at is None:
            return None
        key, _ = at
        found = next((p for p in sample.processes if p.key == key), None)
        return found if found is not None else next((p for p in sample.parents if p.key == key), None)

    def cursor_job(self) -> Job | None:
        """The job under the cursor: a job's row (the jobs view), a process's job, or the job whose
        root a tree's context row is (a launcher); None for none. From the sample shown (the plan
        is built from a fresh scan, by the job's id and root)."""
        scope = self.scope
        sample = self.view(scope.host).sample if scope is not None else None
        if sample is None:
            return None
        job = self.table.cursor_job
        if job is not None:
            return sample.job(job.id) or job
        at = self.table.cursor_any_key
        if at is None:
            return None
        key, _ = at
        proc = next((p for p in sample.processes if p.key == key), None)
        if proc is not None:
            return sample.job_of(proc)
        return next((j for j in sample.jobs if j.key == key), None)

    # -- the selection -------------------------------------------------------------------------

    def toggle_select(self) -> None:
        if self.table.cursor_proc_key is None and self.table.cursor_job is not None:
            self.screen.notify(
                "A job's row: X stops the whole job; space selects one of its processes.", timeout=4
            )
            return
        proc = self.cursor_proc()
        if proc is None or self.scope is None:
            return
        self.state.selection.toggle(self.scope.host, proc)
        self.refresh()
        self.table.action_cursor_down()

    def tag_user(self) -> None:
        """Select every process of the user under the cursor in this list (again: unselect them);
        only those a plan would signal (GPU users and hidden holders, none protected)."""
        table, scope = self.table, self.scope
        if scope is None or table.cursor_key is None:
            return
        key = table.cursor_proc_key
        if key is None:
            what = "is a job" if table.cursor_job is not None else "only joins a family (not in the list)"
            self.screen.notify(f"This row {what}: put the cursor on a process to tag its user.")
            return
        proc = next((p for p in table.in_view if p.key == key), None)
        if proc is None:
            return
        if not proc.user:
            self.screen.notify(f"PID {proc.pid} has no user to go by (not in /proc): nothing tagged.")
            return
        mine = [p for p in table.in_view if p.user == proc.user]
        chosen = [p for p in mine if kinds.killable(p)]
        self._tag(scope.host, fmt.safe(proc.user, 40), chosen, len(mine) - len(chosen))
        self.refresh()

    def _tag(self, host: str, user: str, chosen: list[Proc], left: int) -> None:
        selection, notify = self.state.selection, self.screen.notify
        if chosen and all(p.key in selection.keys(host) for p in chosen):
            selection.discard(host, (p.key for p in chosen))
            notify(f"Unselected {count(len(chosen), 'process', 'processes')} of {user}.", timeout=4)
        elif chosen:
            for p in chosen:
                selection.add(host, p)
            words = f"Selected {count(len(chosen), 'process', 'processes')} of {user}"
            if left:
                words += (
                    f" ({left} more not tagged: monitors, zombies, protected ones and unattributed holders,"
                    " which the sweep takes)"
                )
            notify(words + ".", timeout=4)
        else:
            notify(
                f"None of {user}'s processes here can be tagged (monitors, zombies, protected ones, "
                "unattributed holders)."
            )

    def select_idle(self, views: list[HostView]) -> None:
        """I: select every idle holder of `views`, for x to plan their kill through the confirmation
        dialog; again: unselect them."""
        after, selection = self.dash.idle_after, self.state.selection
        found = [
            (v.name, h.proc) for v in views if v.can_kill for h in v.idle.holders(v.name, v.sample, after)
        ]
        if not found:
            host = self.state.host
            where = fmt.safe(host, 40) if host is not None else "the fleet"
            self.screen.notify(
                f"No idle holder on {where}: no process has held GPU memory at 0% SM for {after / 60:g} min "
                "([idle] minutes in the config, --idle-minutes).",
                timeout=6,
                markup=False,
            )
            return
        if all(proc.key in selection.keys(host) for host, proc in found):
            for host, proc in found:
                selection.discard(host, (proc.key,))
            self.screen.notify(f"Unselected {count(len(found), 'idle holder')}.", timeout=4)
        else:
            for host, proc in found:
                selection.add(host, proc)
            hosts = len({host for host, _ in found})
            memory = fmt_memory(sum(proc.gpu_bytes for _, proc in found), self.dash.exact_memory)
            self.screen.notify(
                f"Selected {count(len(found), 'idle holder')} on {count(hosts, 'host')} "
                f"({memory}): x plans their kill, with the confirmation dialog.",
                timeout=6,
                markup=False,
            )
        self.refresh()

    def selected_requests(self) -> list[Request]:
        """The selection, one request per host (every host: a plan per host, one dialog); with
        nothing selected, the process under the cursor."""
        requests: list[Request] = []
        selection = self.state.selection
        hosts = selection.hosts()
        cursor = self.table.cursor_proc_key
        if not hosts and cursor is not None and self.scope is not None:
            hosts = [self.scope.host]
        for host in hosts:
            sample = self.view(host).sample
            if sample is None:
                continue
            chosen = selection.keys(host) or ({cursor} if cursor is not None else set())
            procs: tuple[Proc, ...] = tuple(p for p in sample.processes if p.key in chosen)
            if procs:
                requests.append(Request(host, "processes", processes=procs))
        return requests

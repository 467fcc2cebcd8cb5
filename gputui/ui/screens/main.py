"""The main screen: host list, GPU (or fleet) table, process table, action log, legend, footer.

The screen renders fleet state; it never waits on a host. The app calls `refresh_data` from a short
timer with the names of the hosts that changed since the last call, and only those hosts' rows (and
the visible tables) are touched.

Why one module of about a thousand lines (issue 20 asks a room over ~700 to say why): in Textual a
key's action is a method of the screen that has the focus' bindings, and every key here acts across
the panes (select a process, fold a group, filter, follow, free a GPU, stop a job). The parts are
sections of the one class (pause, refreshing, following, host selection, layout, filter, the
kill-flow hooks); what they compute lives elsewhere (gputui.views.problems, gputui.views.filter,
..selection, the widgets), and the kill flow itself is gputui.kill's. Splitting the class into
mixins would only move the panes' declarations into a second place.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import ClassVar, cast

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Input, Static

from gputui.fleet.session import LIVE, REASONS, HostView
from gputui.kill.operate import Request, RequestScope
from gputui.model import Job, Parent, Proc, ProcUtilState
from gputui.text.units import fmt_memory
from gputui.text.words import count
from gputui.views.filter import EVERYTHING, FilterError, Query, parse
from gputui.views.problems import FleetProblems, group_of, proc_subject

from .. import fmt, kinds
from ..context import Dashboard
from ..messages import PlanRequested
from ..selection import Selection
from ..widgets.action_log import ActionLog
from ..widgets.filter_bar import FilterBar, FilterProblem
from ..widgets.fleet_table import FleetTable
from ..widgets.footer import Footer
from ..widgets.gpu_table import ALL, GpuTable
from ..widgets.host_list import ALL_HOSTS, GROUP, HostList, busy_total, not_live, seen
from ..widgets.host_list import GROUP as HOST_GROUP
from ..widgets.proc_table import ProcScope, ProcTable, key_of
from ..widgets.status import HostNotice, Legend, StatusLine
from ..widgets.table import KeyedTable
from .gpu_detail import GpuDetailScreen
from .proc_detail import ProcDetailScreen
from .users import UsersScreen

NARROW = 100  # columns: below this the host list starts hidden (b shows it)
# Above this many hosts, the fleet's counts (the table's title, the status line) are drawn once a
# second, with the ages, not on every redraw: at a thousand hosts they changed ten times a second,
# and a new title repaints the whole table (issue 21).
SUMMARY_HOSTS = 256
KILL_ACTIONS = ("toggle_select", "free_gpu", "free_host", "plan", "tag_user", "stop_job", "select_idle")


def sm_words(util: ProcUtilState, host: bool) -> str:
    """What the SM% column holds and how fresh it is (the driver's per-process query is slow: the
    probe reads it every few samples)."""
    if util.state == "off":
        return "SM% off"
    if util.state != "on":
        return "SM%: not reported by this driver"
    every = f"every {util.every:g} s" if util.every else "now and then"
    return f"SM% {'highest of its GPUs, ' if host else ''}{every}"


class MainScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "app.quit", "Quit"),
        Binding(
            "question_mark", "app.help", "Help", key_display="?", tooltip="every key, and what the kinds mean"
        ),
        Binding(
            "slash",
            "filter",
            "Filter",
            key_display="/",
            tooltip="filter the focused table: a word (command, user, PID), or user:alice "
            "state:idle-held host:gpu0* group:rack3 mem>40G, -term to negate (docs/FLEET_VIEW.md)",
        ),
        Binding("escape", "clear_filter", "Clear filter", show=False, tooltip="clear every filter"),
        Binding("o", "free_only", "Free only", tooltip="fleet table: only free GPUs (again: all)"),
        Binding(
            "f", "free_gpu", "Free GPU", tooltip="free the GPU under the cursor: kill its holders, verify"
        ),
        Binding("F", "free_host", "Free host", tooltip="free every GPU of this host"),
        Binding(
            "x",
            "plan",
            "Plan",
            show=False,
            tooltip="kill the selected processes (or the one under the cursor)",
        ),
        Binding(
            "X",
            "stop_job",
            "Stop job",
            tooltip="stop the job under the cursor (a job's row, or a process's job): its root, every "
            "member, verified",
        ),
        # Where a kill key is not offered (read-only, no GPU, not connected), pressing it says why.
        Binding("f", "refuse('free_gpu')", show=False),
        Binding("F", "refuse('free_host')", show=False),
        Binding("x", "refuse('plan')", show=False),
        Binding("X", "refuse('stop_job')", show=False),
        Binding("I", "refuse('select_idle')", show=False),
        Binding("i", "gpu_detail", "GPU view", tooltip="the GPU under the cursor: memory, settings, history"),
        Binding("l", "toggle_log", "Log", tooltip="show or hide the action log"),
        Binding("b", "toggle_hosts", "Host list", show=False, tooltip="show or hide the host list"),
        Binding("left_square_bracket", "step_host(-1)", "Previous host", key_display="[", show=False),
        Binding("right_square_bracket", "step_host(1)", "Next host", key_display="]", show=False),
        Binding("t", "toggle_tree", "Tree", tooltip="processes as a tree of families (again: a list)"),
        Binding(
            "J",
            "toggle_jobs",
            "Jobs",
            tooltip="processes grouped by job, each job a row above its members (again: a list)",
        ),
        Binding(
            "T", "app.next_theme", "Next theme", show=False, tooltip="next gputui theme (ctrl+p: any theme)"
        ),
        Binding(
            "z,Z",
            "toggle_pause",
            "Pause",
            key_display="z",
            show=False,
            tooltip="pause: freeze the view, samples still kept (again: resume)",
        ),
        Binding("m", "app.toggle_mib", "MiB", show=False, tooltip="memory in exact MiB (again: GiB)"),
        Binding(
            "I",
            "select_idle",
            "Idle holders",
            show=False,
            tooltip="select the idle holders (GPU memory held at 0 % SM for the idle minutes) of the host "
            "in view, or of the whole fleet: x then plans their kill (again: unselect them)",
        ),
        Binding(
            "U",
            "users",
            "Users",
            tooltip="GPUs and memory per user across the fleet (enter there: that user's GPUs here)",
        ),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.host: str | None = None  # None: the fleet ("All hosts")
        self.proc_filter = ""
        self.fleet_filter = ""
        # The filters as the language reads them (gputui/views/filter.py): the last text that could be.
        self.proc_query: Query = EVERYTHING
        self.fleet_query: Query = EVERYTHING
        # What is wrong with each host and GPU, and which groups fold (gputui/views/problems.py): shared by
        # the fleet table and the host list.
        self.problems = FleetProblems()
        self.free_only = False
        self.selection = Selection()  # survives refreshes; by (pid, start time)
        self._gpu_cursor: dict[str, str] = {}  # per host: the GPU row the cursor was on
        self._proc_scope: ProcScope | None = None
        self._widgets_cached = False  # on_mount sets the widget attributes (check_action needs them)
        self._hosts_toggled: bool | None = None  # None: the width decides
        self._busy: dict[str, tuple[int, int]] = {}
        self._order: dict[str, int] = {}  # each host's place in the fleet (the fleet table's sort)
        self._focus_before_filter: Widget | None = None
        self._shown_once = False
        self._kills_offered: bool | None = None  # what the footer shows now
        self.following: str | None = None  # the process row the cursor follows (.), by row key
        self._following_host: str | None = None
        # Paused (z): the views as they were, drawn instead of the fleet's until z again. Samples
        # keep arriving into the fleet (the kill flow plans from fresh scans, never from these).
        self._frozen: dict[str, HostView] | None = None
        self._frozen_ages: dict[str, float | None] = {}
        self.paused_since: float | None = None  # the app's clock() when paused
        self.columns_hidden: Mapping[str, frozenset[str]] = {}

    @property
    def dash(self) -> Dashboard:
        return cast(Dashboard, self.app)

    def compose(self) -> ComposeResult:
        read_only = self.dash.read_only
        yield StatusLine(id="status")
        with Horizontal(id="body"):
            yield HostList(id="hosts")
            with Vertical(id="main"):
                yield HostNotice(id="notice")
                yield GpuTable(id="gpus")
                yield FleetTable(id="fleet")
                yield ProcTable(id="procs", selectable=not read_only)
        yield ActionLog(id="log")
        with Horizontal(id="filter-row"):
            yield Static("/ filter ", id="filter-label")
            yield FilterBar(id="filter")
            yield FilterProblem(id="filter-problem")
        yield Legend(id="legend")
        yield Footer()

    def on_mount(self) -> None:
        # Widget references are cached once: the refresh path never queries the DOM.
        self.status_line = self.query_one(StatusLine)
        self.host_list = self.query_one(HostList)
        self.notice = self.query_one(HostNotice)
        self.gpu_table = self.query_one(GpuTable)
        self.fleet_table = self.query_one(FleetTable)
        self.proc_table = self.query_one(ProcTable)
        self.action_log = self.query_one(ActionLog)
        self.filter_bar = self.query_one(FilterBar)
        self.filter_problem = self.query_one(FilterProblem)
        self.legend = self.query_one(Legend)
        fmt.set_title(self.host_list, "Hosts")
        self.filter_row = self.query_one("#filter-row")
        self._widgets_cached = True
        hidden = self.dash.hidden_columns
        for table, name in (
            (self.proc_table, "processes"),
            (self.gpu_table, "gpus"),
            (self.fleet_table, "fleet"),
        ):
            table.hide_columns(hidden.get(name, frozenset()))
        hosts = self.dash.fleet.hosts
        self.host_list.show(hosts, {}, {}, hosts)
        self.select_host(None if len(hosts) > 1 else hosts[0].name if hosts else None)
        self._apply_width()
        (self.fleet_table if self.host is None else self.gpu_table).focus()

    # -- pause -------------------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        return self._frozen is not None

    def views(self) -> list[HostView]:
        """The hosts as the screen shows them: the fleet's, or as they were when paused."""
        live = self.dash.fleet.hosts
        frozen = self._frozen
        return live if frozen is None else [frozen.get(v.name, v) for v in live]

    def view(self, host: str) -> HostView:
        frozen = self._frozen
        if frozen is not None and host in frozen:
            return frozen[host]
        return self.dash.fleet.view(host)

    def age_of(self, host: str) -> float | None:
        """The age of the sample shown: while paused, its age then plus the time since."""
        if self.paused_since is None:
            return self.dash.age_of(host)
        age = self._frozen_ages.get(host)
        return None if age is None else age + self.paused_for()

    def paused_for(self) -> float:
        return max(0.0, self.dash.clock() - self.paused_since) if self.paused_since is not None else 0.0

    def action_toggle_pause(self) -> None:
        if self._frozen is None:
            self._frozen = {v.name: _frozen_copy(v) for v in self.dash.fleet.hosts}
            self._frozen_ages = {v.name: self.dash.age_of(v.name) for v in self.dash.fleet.hosts}
            self.paused_since = self.dash.clock()  # the header says PAUSED and for how long
        else:
            self._frozen, self._frozen_ages, self.paused_since = None, {}, None
        self.refresh_data(set(), everything=True)  # resuming catches up at once

    # -- memory units --------------------------------------------------------------------------

    def memory_units_changed(self) -> None:
        """`m` flipped GiB and exact MiB: every memory cell again, the columns measured again."""
        exact = self.dash.exact_memory
        for table in (self.gpu_table, self.fleet_table, self.proc_table):
            table.exact_memory = exact
        self.refresh_data(set(), everything=True)
        for table in (self.gpu_table, self.fleet_table, self.proc_table):
            table.remeasure()

    # -- refreshing --------------------------------------------------------------------------

    def refresh_data(self, changed: set[str], *, everything: bool = False, ages: bool = False) -> None:
        """Bring the visible widgets up to date with the fleet, touching only what `changed` names.

        `everything`: every host (after a theme switch or a filter change); `ages`: refresh the age
        column of every host (once a second: ages move even when nothing arrives)."""
        if not self.is_attached:
            return  # the app is exiting: its widgets are being taken down, with their styles
        views = self.views()
        if self.paused and not everything:
            changed = set()  # frozen: only the PAUSED time moves
        elif ages:
            # An idle holder's time moves with its host's samples, which may have no news (and not
            # be drawn: gputui/fleet/news.py): the tick that moves ages draws the hosts that have one
            # (and one that just became one).
            after = self.dash.idle_after
            changed = changed | {v.name for v in views if v.idle.any_for(after)}
        touched = views if everything else [v for v in views if v.name in changed]
        if touched:
            # What is wrong where (problems first, healthy hosts folded by group): worked out again
            # for the hosts that changed; a group whose folding changed is drawn again whole.
            regrouped = self.problems.update(touched, views, self.dash.idle_after)
            if regrouped and not everything:
                names = {v.name for v in touched}
                touched = touched + [
                    v for v in views if v.name not in names and self.problems.group(v.name) in regrouped
                ]
        for view in touched:
            self._busy[view.name] = busy_total(view)
            for gone in self.selection.prune(view.name, view.sample):
                self.action_log.note(
                    view.name, f"selected {gone.label} is gone: dropped from the selection", "warn"
                )
        listed = views if (ages or everything) else touched
        # A host that is not live says how old its numbers are: the tick that moves ages redraws it.
        aging = {v.name for v in views if v.status != LIVE and v.sample is not None} if ages else set()
        summary = everything or ages or len(views) <= SUMMARY_HOSTS  # the fleet's counts too
        with self.app.batch_update():
            if listed:
                ages_now = {v.name: self.age_of(v.name) for v in listed}
                self.host_list.show(listed, ages_now, self._busy, views if summary else None, self.problems)
            if self.host is None:
                names = {v.name for v in touched}
                self._refresh_fleet(views, touched + [v for v in views if v.name in aging - names], summary)
            else:
                self._refresh_host(self.view(self.host), everything or bool({self.host} & (changed | aging)))
            scope = self._proc_scope
            redo = scope is not None and scope.host in changed | aging
            self.refresh_procs(force=everything or redo)
        self._footer_follows()

    def _footer_follows(self) -> None:
        """The footer offers kill keys where they work: a host connected, went down, or the fleet
        cursor moved to another host."""
        offered = self.kill_refusal() is None
        if offered != self._kills_offered:
            self._kills_offered = offered
            self.refresh_bindings()

    def restyle(self) -> None:
        """After a theme switch: cells and lines keep the styles they were made with."""
        self.legend.redraw()
        self.action_log.restyle()
        self.refresh_data(set(), everything=True)

    def _refresh_fleet(self, views: list[HostView], touched: list[HostView], summary: bool = True) -> None:
        if touched:
            if len(self._order) != len(views):  # the fleet's hosts keep their order
                self._order = {v.name: i for i, v in enumerate(views)}
            ages = {v.name: self.age_of(v.name) for v in touched}
            self.fleet_table.show_hosts(
                touched,
                self._order,
                self.fleet_query,
                self.free_only,
                ages,
                fleet=views,
                problems=self.problems,
            )
        if not summary:
            return  # (SUMMARY_HOSTS) the counts wait for the next ages tick
        if touched or len(views) > SUMMARY_HOSTS:
            self._fleet_title()
        paused = self.paused_for() if self.paused else None
        self.status_line.show_fleet(
            views, self._busy, self.dash.read_only, paused=paused, paced=self.dash.paced
        )

    def _fleet_title(self) -> None:
        total = sum(t for _, t in self._busy.values())
        free = sum(t - b for b, t in self._busy.values())
        unknown = sum(not_live(v) for v in self.views())  # on hosts not live: neither busy nor free
        title = f"All GPUs · {total + unknown} on {count(len(self.dash.fleet.hosts), 'host')}, {free} free"
        if unknown:
            title += f", {unknown} not live"
        troubled = self.problems.troubled()
        if troubled:
            title += f" · {count(troubled, 'host')} with problems first"
        folded = self.fleet_table.folded_hosts
        if folded and not self.free_only and not self.fleet_query:
            title += f" · {count(folded, 'healthy host')} folded (enter: unfold)"
        if self.free_only:
            title += f" · showing free only ({self.fleet_table.row_count})"
        if self.fleet_filter:
            title += f" · filter: {fmt.safe(self.fleet_filter, 30)}"
        fmt.set_title(self.fleet_table, title)
        sort_note(self.fleet_table)

    def _refresh_host(self, view: HostView, changed: bool) -> None:
        self.status_line.show_host(
            view,
            self.age_of(view.name),
            self.dash.read_only,
            paused=self.paused_for() if self.paused else None,
            exact=self.dash.exact_memory,
            paced=self.dash.paced,
        )
        if not changed:
            return
        self.notice.display = self.notice.show_host(view)
        self.gpu_table.display = bool(view.sample and view.sample.gpus)
        self.gpu_table.idle_after = self.dash.idle_after
        self.gpu_table.show(view)
        fmt.set_title(self.gpu_table, f"GPUs · {fmt.safe(view.name, 40)}{self._not_live(view)}")

    def _not_live(self, view: HostView) -> str:
        """` · down, last seen 2m ago` for a host whose numbers are from a sample that is not live."""
        if view.status == LIVE or view.sample is None:
            return ""
        return f" · {view.status}, {seen(self.age_of(view.name))}"

    def shows_in_full(self, host: str) -> bool:
        """Whether `host` is shown in full: on its own screen or in the process pane, where what a
        sample with no news changes (ages, CPU, sparklines: gputui/fleet/news.py) is drawn."""
        scope = self._proc_scope
        return host == self.host or (scope is not None and scope.host == host)

    def current_scope(self) -> ProcScope | None:
        """The processes to list: of the GPU under the GPU (or fleet) cursor, or of the whole host."""
        if self.host is not None:
            return ProcScope(self.host, self.gpu_table.cursor_gpu)
        at = self.fleet_table.cursor_gpu
        return ProcScope(at[0], at[1]) if at is not None else None

    def refresh_procs(self, force: bool = True) -> None:
        if not self.is_attached:
            return
        scope = self.current_scope()
        if scope != self._proc_scope:
            if self._proc_scope is None or scope is None or scope.host != self._proc_scope.host:
                self.proc_table.forget()  # another host's processes: a new list, not a refresh
            self._proc_scope = scope
            force = True
        if not force:
            return
        if scope is None:
            fmt.set_title(self.proc_table, "Processes")
            self.proc_table.sync({})
            self._keep_following()
            return
        view = self.view(scope.host)
        selected = self.selection.keys(scope.host)
        idle = view.idle.durations(self.dash.idle_after)
        self.proc_table.show(
            view.sample,
            scope,
            self.proc_filter,
            selected,
            live=view.status == LIVE,
            keep=self._proc_keep(view, scope.gpu, idle) if self.proc_query else None,
            idle=idle,
        )
        self._keep_following()
        self._procs_title()

    def _proc_keep(
        self, view: HostView, gpu: int | None, idle: Mapping[tuple[int, int | None], float]
    ) -> Callable[[Proc], bool]:
        """The process filter as a predicate (the language's query on each process)."""
        query, group, after = self.proc_query, group_of(view), self.dash.idle_after
        return lambda proc: query.matches(proc_subject(view, group, proc, gpu, idle.get(proc.key), after))

    def _procs_title(self) -> None:
        scope = self._proc_scope
        if scope is None:
            fmt.set_title(self.proc_table, "Processes")
            return
        # Which memory the GPU mem column holds: a process on GPUs 0 and 1 shows what it has on
        # the GPU in view, and its total over its GPUs (the GPU column lists them) on the host's.
        where = (
            "all GPUs · memory: total on its GPUs"
            if scope.gpu is None
            else f"GPU {scope.gpu} · memory on GPU {scope.gpu}"
        )
        title = f"Processes · {fmt.safe(scope.host, 40)}{self._not_live(self.view(scope.host))}"
        # What the operator switched on comes before the explanations, which a narrow pane cuts.
        if self.proc_table.tree_mode:
            title += " · tree"
        if self.proc_table.jobs_mode:
            sample = self.view(scope.host).sample
            jobs = len(sample.jobs) if sample is not None else 0
            title += f" · {count(jobs, 'job')}"
        if self.following is not None:
            title += f" · following PID {key_of(self.following)[0]}"
            if self.following not in self.proc_table.rows_data():
                title += " (not in this list)"
        title += f" · {where}"
        sample = self.view(scope.host).sample
        if sample is not None and self.proc_table.width_of("sm"):
            title += " · " + sm_words(sample.proc_util, scope.gpu is None)
        if sample is not None and sample.jobs_omitted and self.proc_table.jobs_mode:
            title += f" · {count(sample.jobs_omitted, 'job')} left out by the probe (the smallest)"
        if self.proc_filter:
            title += f" · filter: {fmt.safe(self.proc_filter, 30)}"
        selected = self.selection.count(scope.host)
        if selected:
            title += f" · {selected} selected"
        elsewhere = self.selection.count() - selected
        if elsewhere:
            title += f" · {elsewhere} selected on other hosts"
        if self.proc_table.command_offset:
            title += f" · commands from character {self.proc_table.command_offset + 1} (home: start)"
        fmt.set_title(self.proc_table, title)
        sort_note(self.proc_table)

    @on(ProcTable.CommandScrolled)
    def _command_scrolled(self) -> None:
        self.refresh_procs()

    @on(ProcTable.TreeChanged)
    def _tree_changed(self) -> None:
        self.refresh_procs()

    @on(KeyedTable.Sorted)
    def _sorted(self) -> None:
        if self.proc_table.tree_mode or self.proc_table.jobs_mode:
            self.refresh_procs()  # the branches follow the siblings' new order
        self._procs_title()
        self._fleet_title()

    def action_toggle_tree(self) -> None:
        self.proc_table.tree_mode = not self.proc_table.tree_mode
        self.proc_table.jobs_mode = False
        self.refresh_procs()
        self.refresh_bindings()

    def action_toggle_jobs(self) -> None:
        self.proc_table.jobs_mode = not self.proc_table.jobs_mode
        self.proc_table.tree_mode = False
        self.refresh_procs()
        self.refresh_bindings()

    # -- following a process (.) -------------------------------------------------------------

    def action_follow(self) -> None:
        key = self.proc_table.cursor_key
        if key is None:
            return
        if self.following == key:
            self._unfollow(f"No longer following PID {key_of(key)[0]}.")
            return
        if self.proc_table.cursor_proc_key is None:
            what = "is a job's" if self.proc_table.cursor_job is not None else "only joins a family"
            self.notify(f"Only a process of the list can be followed (this row {what}).")
            return
        self.following = key
        self._following_host = self._proc_scope.host if self._proc_scope is not None else None
        self._procs_title()

    def _unfollow(self, words: str, severity: SeverityLevel = "information") -> None:
        self.following = None
        self.notify(words, severity=severity, timeout=4)
        self._procs_title()

    def _keep_following(self) -> None:
        """After a refresh: the cursor on the followed process, in view. Out of this list (another
        GPU's, filtered out, in a folded family) it is still followed, and the cursor goes back to it
        when it is listed again; on another host, or exited, following ends."""
        key = self.following
        if key is None:
            return
        table = self.proc_table
        if key in table.rows_data():
            table.move_to(key)
            table.reveal_cursor()
            return
        pid_start = key_of(key)
        scope = self._proc_scope
        if scope is None or scope.host != self._following_host:
            self._unfollow(f"No longer following PID {pid_start[0]} (another host in view).")
            return
        sample = self.view(scope.host).sample
        if sample is None or not any(p.key == pid_start for p in sample.processes):
            self._unfollow(f"PID {pid_start[0]} has exited: no longer following it.", "warning")

    @on(DataTable.RowHighlighted, "#procs")
    def _proc_highlighted(self, event: DataTable.RowHighlighted) -> None:
        # The cursor as it is now (a refresh moves rows, and puts it back on its process): a move
        # to another row is the operator's, and ends following.
        key = self.following
        if key is not None and key in self.proc_table.rows_data() and self.proc_table.cursor_key != key:
            self._unfollow(f"No longer following PID {key_of(key)[0]} (the cursor moved).")

    # -- host selection ----------------------------------------------------------------------

    def select_host(self, host: str | None) -> None:
        """Show `host`'s dashboard, or the fleet table for None."""
        if self._shown_once and host == self.host:
            return
        self._shown_once = True
        if self.host is not None and self.gpu_table.cursor_key is not None:
            self._gpu_cursor[self.host] = self.gpu_table.cursor_key
        self.host = host
        fleet_view = host is None
        # The GPU pane changes; focus on the pane that goes away moves to the one that comes.
        refocus = self.focused in (self.fleet_table, self.gpu_table)
        self.fleet_table.display = fleet_view
        self.gpu_table.display = not fleet_view
        if refocus:
            (self.fleet_table if fleet_view else self.gpu_table).focus()
        self.notice.display = False
        self.gpu_table.forget()
        self.host_list.move_to(ALL_HOSTS if host is None else host)
        self.refresh_data(set(), everything=True)
        if host is not None:
            self.gpu_table.move_to(self._gpu_cursor.get(host, ALL), scroll=True)
        self.refresh_procs()
        self.refresh_bindings()

    @on(DataTable.RowHighlighted, "#hosts")
    def _host_highlighted(self, event: DataTable.RowHighlighted) -> None:
        # The cursor as it is now, not as the (possibly stale) event says: adding the first rows
        # highlights whatever row came first before the screen put the cursor where it belongs.
        if self._shown_once:
            self.select_host(self.host_list.cursor_host)

    @on(DataTable.RowHighlighted, "#gpus")
    @on(DataTable.RowHighlighted, "#fleet")
    def _gpu_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.refresh_procs(force=False)
        self._footer_follows()

    def action_drill(self) -> None:
        """Enter on the host list: into the host's GPUs. Enter on the fleet table: into that host;
        on a group's line: unfold it."""
        if self.focused is self.fleet_table and self.fleet_table.on_group_row:
            group = self.fleet_table.cursor_group
            if group is not None:
                self._fold(group, folded=False)
            return
        if self.focused is self.host_list and (group := self.host_list.cursor_group) is not None:
            self._fold(group, folded=False)
            return
        if self.focused is self.fleet_table and (at := self.fleet_table.cursor_gpu) is not None:
            host, gpu = at
            self._gpu_cursor[host] = ALL if gpu is None else str(gpu)
            self.select_host(host)
        (self.fleet_table if self.host is None else self.gpu_table).focus()

    def action_step_host(self, delta: int) -> None:
        keys = [ALL_HOSTS, *(v.name for v in self.dash.fleet.hosts)]
        current = ALL_HOSTS if self.host is None else self.host
        index = (keys.index(current) + delta) % len(keys) if current in keys else 0
        self.select_host(None if keys[index] == ALL_HOSTS else keys[index])

    @on(FleetTable.FoldChanged)
    @on(HostList.FoldChanged)
    def _fold_changed(self, event: FleetTable.FoldChanged | HostList.FoldChanged) -> None:
        self._fold(event.group, event.folded)

    def _fold(self, group: str, folded: bool) -> None:
        """Fold a group's healthy hosts into its line, or unfold them; the cursor stays with the group."""
        self.problems.set_folded(group, folded)
        self.refresh_data(set(), everything=True)
        if folded:
            self.fleet_table.move_to(GROUP + group, scroll=True)
            self.host_list.move_to(HOST_GROUP + group, scroll=True)
            return
        # Unfolded: the cursor on the group's first host (its first GPU in the fleet table).
        first = next(iter(self.problems.members(group)), None)
        if first is not None:
            if self.focused is self.host_list:
                self.host_list.move_to(first, scroll=True)
            else:
                self.fleet_table.move_to(min(self.fleet_table.keys_of(first), default=None), scroll=True)

    def action_users(self) -> None:
        """U: GPUs and memory per user across the fleet; a user chosen there filters the fleet table."""
        self.app.push_screen(UsersScreen(), self._user_chosen)

    def _user_chosen(self, user: str | None) -> None:
        if not user:
            return
        text = f"user:{quoted(user)}"
        if self.host is not None:
            self.select_host(None)
        self.fleet_filter, self.fleet_query = text, parse(text)
        self.refresh_data(set(), everything=True)
        self.fleet_table.focus()
        self.notify(f"Fleet filtered: {text} (esc clears it).", timeout=4, markup=False)

    def action_select_idle(self) -> None:
        """I: select every idle holder of the host in view (of the fleet on "All hosts"), for x to
        plan their kill through the confirmation dialog; again: unselect them."""
        views = [self.view(self.host)] if self.host is not None else self.views()
        after = self.dash.idle_after
        found = [
            (v.name, h.proc) for v in views if v.can_kill for h in v.idle.holders(v.name, v.sample, after)
        ]
        if not found:
            where = fmt.safe(self.host, 40) if self.host is not None else "the fleet"
            minutes = f"{after / 60:g}"
            self.notify(
                f"No idle holder on {where}: no process has held GPU memory at 0% SM for {minutes} min "
                "([idle] minutes in the config, --idle-minutes).",
                timeout=6,
                markup=False,
            )
            return
        if all(proc.key in self.selection.keys(host) for host, proc in found):
            for host, proc in found:
                self.selection.discard(host, (proc.key,))
            self.notify(f"Unselected {count(len(found), 'idle holder')}.", timeout=4)
        else:
            for host, proc in found:
                self.selection.add(host, proc)
            hosts = len({host for host, _ in found})
            memory = sum(proc.gpu_bytes for _, proc in found)
            self.notify(
                f"Selected {count(len(found), 'idle holder')} on {count(hosts, 'host')} "
                f"({fmt_memory(memory)}): x plans their kill, with the confirmation dialog.",
                timeout=6,
                markup=False,
            )
        self.refresh_procs()

    @on(KeyedTable.Refitted)
    def _refitted(self, event: KeyedTable.Refitted) -> None:
        if event.table is self.proc_table:
            self.refresh_procs()  # the processes alone: not every host of the fleet again (issue 21)
        else:
            self.refresh_data(set(), everything=True)

    def action_show_procs(self) -> None:
        self.proc_table.focus()

    # -- layout ------------------------------------------------------------------------------

    def on_resize(self) -> None:
        self._apply_width()
        self.call_after_refresh(self._lift_toasts)

    def _lift_toasts(self) -> None:
        """Notifications stack above the action log while it shows, so a toast never covers the
        log's last lines (a verdict's toast would hide the verdict's own line)."""
        try:
            rack = self.query_one("#textual-toastrack")
        except NoMatches:  # notifications are off
            return
        bottom = 1  # Textual's own: above the footer
        if self.action_log.display and self.action_log.region.height:
            bottom = max(bottom, self.size.height - self.action_log.region.y)
        if rack.styles.margin.bottom != bottom:
            rack.styles.margin = (0, 0, bottom, 0)

    def on_screen_resume(self) -> None:
        # What arrived while a dialog or the help was on top was kept, not drawn: draw it now.
        self.dash.want_redraw()

    def _apply_width(self) -> None:
        show = self._hosts_toggled
        if show is None:
            show = len(self.dash.fleet.hosts) > 1 and self.size.width >= NARROW
        self.host_list.display = show

    def action_toggle_hosts(self) -> None:
        self._hosts_toggled = not self.host_list.display
        self._apply_width()
        if self.host_list.display:
            self.host_list.focus()

    def show_log(self) -> None:
        self.action_log.display = True
        self.call_after_refresh(self._lift_toasts)

    def action_toggle_log(self) -> None:
        self.action_log.display = not self.action_log.display
        self.call_after_refresh(self._lift_toasts)
        if (
            not self.action_log.display
            and self.focused is not None
            and self.action_log in self.focused.ancestors
        ):
            self.proc_table.focus()

    # -- filter ------------------------------------------------------------------------------

    def _filter_target(self) -> str:
        focused = self.focused
        if focused is not None and (focused is self.action_log or self.action_log in focused.ancestors):
            return "log"
        if self.host is None and focused is not self.proc_table:
            return "fleet"
        return "procs"

    def action_filter(self) -> None:
        target = self._filter_target()
        text = {"log": self.action_log.filter_text, "fleet": self.fleet_filter}.get(target, self.proc_filter)
        self._focus_before_filter = self.focused
        self.filter_row.display = True
        self.filter_bar.open(target, text)
        self.call_after_refresh(self._lift_toasts)

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._set_filter(self.filter_bar.target, event.value)

    def _set_filter(self, target: str, text: str) -> None:
        if target == "log":
            self.action_log.set_filter(text)
            return
        try:
            query = parse(text)
        except FilterError as exc:
            # Said beside the box; the table keeps the last filter that could be read.
            self.filter_problem.say(fmt.safe(exc.message, 300))
            return
        self.filter_problem.say("")
        if target == "fleet":
            if text != self.fleet_filter:
                self.fleet_filter, self.fleet_query = text, query
                self.refresh_data(set(), everything=True)
        elif text != self.proc_filter:
            self.proc_filter, self.proc_query = text, query
            self.refresh_procs()

    @on(FilterBar.Done)
    def _filter_done(self) -> None:
        self.filter_problem.say("")  # left unread: the last filter that could be read stays
        self.filter_bar.value = {"fleet": self.fleet_filter, "procs": self.proc_filter}.get(
            self.filter_bar.target, self.filter_bar.value
        )
        self.filter_row = self.query_one("#filter-row")
        self.filter_row.display = False
        self.call_after_refresh(self._lift_toasts)
        target = self._focus_before_filter
        (target if target is not None and target.is_attached else self.proc_table).focus()

    def action_clear_filter(self) -> None:
        for target in ("procs", "fleet", "log"):
            self._set_filter(target, "")

    def action_free_only(self) -> None:
        self.free_only = not self.free_only
        self.refresh_data(set(), everything=True)

    # -- kill-flow hooks (issue 4): gather targets, post a request ----------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if not self._widgets_cached:
            # The footer may ask while the screen is still being put together (its first size was
            # 0x0, then the terminal grew): nothing to judge by yet. The first redraw asks again.
            return None
        # I selects the idle holders of every host it can (on "All hosts", the whole fleet): only
        # read-only takes it away, not the host under the cursor.
        if action == "select_idle":
            return not self.dash.read_only
        if action == "refuse" and parameters == ("select_idle",):
            return self.dash.read_only
        if action in KILL_ACTIONS:
            if self.kill_refusal() is not None:
                return False  # not offered: hidden from the footer and the help; the key says why
            if action in ("toggle_select", "tag_user") and self.focused is not self.proc_table:
                return None
        if action == "refuse":
            return self.kill_refusal() is not None  # only where the kill action itself is not offered
        if action == "free_only":
            return self.host is None
        return True

    def kill_refusal(self) -> str | None:
        """Why no kill action is offered for the host in view (or under the fleet cursor), in words
        for a notification; None when they are."""
        if self.dash.read_only:
            return "gputui runs read-only (--read-only, or read_only in the config): it signals nothing."
        host = self._target_host()
        if host is None:
            return None  # nothing under the cursor: the actions themselves say what to do
        view = self.dash.fleet.view(host)
        name = fmt.safe(host, 40)
        facts = view.facts
        if view.read_only:
            return f"{name} is marked read-only (read_only in the config): gputui signals nothing there."
        if facts is not None and facts.read_only:
            return f"the probe on {name} runs read-only: it refuses every plan."
        if facts is not None and facts.error_code:
            why = REASONS.get(facts.error_code, fmt.safe(facts.error_code, 40))
            return f"{name} has no GPU to free ({why})."
        if view.status != LIVE or view.sample is None:
            why = REASONS.get(view.reason or "", fmt.safe(view.reason, 40)) if view.reason else ""
            state = f"{view.status}: {why}" if why else view.status
            return f"{name} is not connected ({state}): nothing can be sent to it now."
        if not view.sample.gpus:
            return f"{name} has no GPU to free."
        return None

    def action_refuse(self, action: str) -> None:
        reason = self.kill_refusal()
        if reason is not None:
            what = {
                "free_gpu": "Free GPU",
                "free_host": "Free host",
                "plan": "Plan",
                "toggle_select": "Select",
                "tag_user": "Tag user",
                "stop_job": "Stop job",
                "select_idle": "Idle holders",
            }.get(action, "Kill")
            self.notify(reason, title=f"{what}: not offered here", severity="warning", timeout=6)

    def _target_host(self) -> str | None:
        if self.host is not None:
            return self.host
        at = self.fleet_table.cursor_gpu
        return at[0] if at is not None else None

    def action_toggle_select(self) -> None:
        key = self.proc_table.cursor_proc_key
        scope = self._proc_scope
        if key is None and self.proc_table.cursor_job is not None:
            self.notify("A job's row: X stops the whole job; space selects one of its processes.", timeout=4)
            return
        if key is None or scope is None:
            return
        sample = self.view(scope.host).sample  # what the operator sees (the plan rescans anyway)
        proc = next((p for p in sample.processes if p.key == key), None) if sample else None
        if proc is None:
            return
        self.selection.toggle(scope.host, proc)
        self.refresh_procs()
        self.proc_table.action_cursor_down()

    def action_tag_user(self) -> None:
        """Select every process of the user under the cursor in this list (again: unselect them);
        only those a plan would signal (GPU users and hidden holders, none protected)."""
        key = self.proc_table.cursor_proc_key
        scope = self._proc_scope
        if scope is None or self.proc_table.cursor_key is None:
            return
        if key is None:
            what = (
                "is a job"
                if self.proc_table.cursor_job is not None
                else "only joins a family (not in the list)"
            )
            self.notify(f"This row {what}: put the cursor on a process to tag its user.")
            return
        proc = next((p for p in self.proc_table.in_view if p.key == key), None)
        if proc is None:
            return
        if not proc.user:
            self.notify(f"PID {proc.pid} has no user to go by (not in /proc): nothing tagged.")
            return
        user = fmt.safe(proc.user, 40)
        mine = [p for p in self.proc_table.in_view if p.user == proc.user]
        chosen = [p for p in mine if kinds.killable(p)]
        left = len(mine) - len(chosen)
        held = self.selection.keys(scope.host)
        if chosen and all(p.key in held for p in chosen):
            self.selection.discard(scope.host, (p.key for p in chosen))
            self.notify(f"Unselected {count(len(chosen), 'process', 'processes')} of {user}.", timeout=4)
        elif chosen:
            for p in chosen:
                self.selection.add(scope.host, p)
            words = f"Selected {count(len(chosen), 'process', 'processes')} of {user}"
            if left:
                words += (
                    f" ({left} more not tagged: monitors, zombies, protected ones and unattributed holders,"
                    " which the sweep takes)"
                )
            self.notify(words + ".", timeout=4)
        else:
            self.notify(
                f"None of {user}'s processes here can be tagged (monitors, zombies, protected ones, "
                "unattributed holders)."
            )
        self.refresh_procs()

    def action_proc_detail(self) -> None:
        """The process under the cursor in full (a context row of the tree too)."""
        scope = self._proc_scope
        at = self.proc_table.cursor_any_key
        if scope is None or at is None:
            return
        sample = self.view(scope.host).sample
        if sample is None:
            return
        (pid, start), _ = at
        record: Proc | Parent | None = next((p for p in sample.processes if p.key == (pid, start)), None)
        if record is None:
            record = next((p for p in sample.parents if p.key == (pid, start)), None)
        if record is not None:
            self.app.push_screen(ProcDetailScreen(scope.host, record))

    def _request(self, scope: RequestScope, gpus: tuple[int, ...] = ()) -> None:
        host = self._target_host()
        if host is None:
            return
        self.post_message(PlanRequested(Request(host, scope, gpus=gpus)))

    def _selected_requests(self) -> list[Request]:
        """The selection, one request per host (every host: a plan per host, one dialog); with
        nothing selected, the process under the cursor."""
        requests: list[Request] = []
        hosts = self.selection.hosts()
        cursor = self.proc_table.cursor_proc_key
        if not hosts and cursor is not None and self._proc_scope is not None:
            hosts = [self._proc_scope.host]
        for host in hosts:
            sample = self.view(host).sample
            if sample is None:
                continue
            chosen = self.selection.keys(host) or ({cursor} if cursor is not None else set())
            procs: tuple[Proc, ...] = tuple(p for p in sample.processes if p.key in chosen)
            if procs:
                requests.append(Request(host, "processes", processes=procs))
        return requests

    def action_gpu_detail(self) -> None:
        scope = self.current_scope()
        if scope is None:
            self.notify("No GPU here yet.")
            return
        gpu = scope.gpu
        if gpu is None:  # the host's "all" row: its first GPU ([ and ] step through the others)
            sample = self.dash.fleet.view(scope.host).sample
            if sample is None or not sample.gpus:
                self.notify(f"{scope.host} has no GPU to show.", markup=False)
                return
            gpu = sample.gpus[0].index
        self.app.push_screen(GpuDetailScreen(scope.host, gpu))

    def action_free_gpu(self) -> None:
        scope = self.current_scope()
        if scope is None or scope.gpu is None:
            self.notify("Put the cursor on a GPU to free it (F frees every GPU of the host).")
            return
        self._request("gpus", (scope.gpu,))

    def action_free_host(self, sweep: bool = False) -> None:
        """F; with `sweep` (the command palette's "sweep"), the dialog opens with the unattributed
        holders included (s there leaves them out again)."""
        host = self._target_host()
        if host is None:
            return
        sample = self.dash.fleet.view(host).sample
        gpus = tuple(g.index for g in sample.gpus) if sample else ()
        self.post_message(PlanRequested(Request(host, "host", gpus=gpus, sweep=sweep)))

    def sweep_candidates(self, host: str) -> int:
        """Hidden holders of `host` tied to no GPU: what a sweep would add."""
        sample = self.dash.fleet.view(host).sample
        return sum(1 for p in sample.processes if p.kind == "hidden" and not p.gpus) if sample else 0

    def cursor_job(self) -> Job | None:
        """The job under the process table's cursor: a job's row (the jobs view), a process's job,
        or the job whose root a tree's context row is (a launcher); None for none. From the sample
        shown (the plan is built from a fresh scan, by the job's id and root)."""
        scope = self._proc_scope
        sample = self.view(scope.host).sample if scope is not None else None
        if sample is None:
            return None
        table = self.proc_table
        job = table.cursor_job
        if job is not None:
            return sample.job(job.id) or job
        at = table.cursor_any_key
        if at is None:
            return None
        key, _ = at
        proc = next((p for p in sample.processes if p.key == key), None)
        if proc is not None:
            return sample.job_of(proc)
        return next((j for j in sample.jobs if j.key == key), None)

    def action_stop_job(self) -> None:
        """X: a plan that stops the job under the cursor (its root first, then every member left),
        in the confirmation dialog."""
        scope = self._proc_scope
        if scope is None or self.proc_table.cursor_key is None:
            self.notify("Put the process table's cursor on a job (J lists them) or one of its processes.")
            return
        job = self.cursor_job()
        if job is None:
            at = self.proc_table.cursor_any_key
            pid = f"PID {at[0][0]}" if at is not None else "This row"
            self.notify(
                f"{pid} belongs to no job the probe named (a monitor, or a process without a GPU): "
                "x stops the process itself.",
                timeout=6,
            )
            return
        self.post_message(PlanRequested(Request(scope.host, "jobs", jobs=(job,))))

    def action_plan(self) -> None:
        requests = self._selected_requests()
        if not requests:
            self.notify("Select processes with space first (or put the cursor on one).")
            return
        self.post_message(PlanRequested(*requests))


def sort_note(table: KeyedTable) -> None:
    """What sorts the rows when its column is not shown (the config hides it), on the pane's bottom
    border: the title above is long and a narrow pane cuts its end; this line is the note's own."""
    note = table.hidden_sort()
    if getattr(table, "_gputui_sort_note", None) != note:
        table._gputui_sort_note = note  # type: ignore[attr-defined]  # a mark of ours, as fmt.set_title's
        table.border_subtitle = Content(note)


def _frozen_copy(view: HostView) -> HostView:
    """`view` as it is now: the fleet replaces its sample and appends to its histories in place."""
    frozen = copy.copy(view)
    frozen.history = copy.deepcopy(view.history)
    frozen.preflight = dict(view.preflight)
    frozen.idle = view.idle.copy()
    return frozen


def quoted(text: str) -> str:
    """A value for the filter language: in double quotes when it has a space or a quote (a quote
    itself cannot be written: such a name is matched by the rest, with a wildcard)."""
    if any(c.isspace() or c in '"' for c in text):
        return '"' + text.replace('"', "?") + '"'
    return text

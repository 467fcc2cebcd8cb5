"""The main screen: host list, GPU (or fleet) table, process table, action log, legend, footer.

The screen renders fleet state; it never waits on a host. The app calls `refresh_data` from a short
timer with the names of the hosts that changed since the last call, and only those hosts' rows (and
the visible tables) are touched.

It composes the panels (gputui/ui/panels/: header, hosts, GPUs, processes, log, filter, the kill
keys), which draw their panes from one view state (gputui/ui/state.py). Its keys are the ones that
act wherever the focus is (htop's one table of keys: select a host, filter, follow, pause, free a
GPU, stop a job); a pane's own keys are bound on its widget. Its handlers route the widgets'
messages to the panels.
"""

from __future__ import annotations

from typing import ClassVar, cast

from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from gputui.fleet.session import HostView
from gputui.views.filter import exact_value

from ..context import Dashboard
from ..keys import FOOTER_RANKS, MAIN_KEYS
from ..oversh import OverSsh
from ..panels.filter import FilterPanel
from ..panels.gpus import GpusPanel
from ..panels.header import HeaderPanel
from ..panels.hosts import HostsPanel
from ..panels.kill import KILL_ACTIONS, KillPanel
from ..panels.log import LogPanel
from ..panels.processes import ProcessesPanel
from ..panels.redraw import Redraw
from ..state import DashboardState
from ..widgets.action_log import ActionLog
from ..widgets.borders import set_title
from ..widgets.filter_bar import FilterBar, FilterProblem
from ..widgets.fleet_table import FleetTable
from ..widgets.footer import Footer
from ..widgets.gpu_table import ALL, GpuTable
from ..widgets.host_list import HostList
from ..widgets.proc_table import ProcScope, ProcTable
from ..widgets.status import HostNotice, Legend, StatusLine
from ..widgets.table import KeyedTable
from .choose import ChooseScreen, ladder_choices, sort_choices
from .gpu_detail import GpuDetailScreen
from .proc_detail import ProcDetailScreen
from .users import UsersScreen


class MainScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = MAIN_KEYS

    def __init__(self, start_filter: str = "") -> None:
        super().__init__()
        self.state = DashboardState(start_filter)
        self._widgets_cached = False  # on_mount makes the panels (check_action needs them)
        self._shown_once = False
        self._kills_offered: bool | None = None  # what the footer shows now
        self._over_ssh: OverSsh | None = None  # made on first use: the app's openers

    @property
    def dash(self) -> Dashboard:
        return cast(Dashboard, self.app)

    def compose(self) -> ComposeResult:
        yield StatusLine(id="status")
        with Horizontal(id="body"):
            yield HostList(id="hosts")
            with Vertical(id="main"):
                yield HostNotice(id="notice")
                yield GpuTable(id="gpus")
                yield FleetTable(id="fleet")
                yield ProcTable(id="procs", selectable=not self.dash.read_only)
        yield ActionLog(id="log")
        with Horizontal(id="filter-row"):
            yield Static("/ filter ", id="filter-label")
            yield FilterBar(id="filter")
            yield FilterProblem(id="filter-problem")
        yield Legend(id="legend")
        yield Footer(FOOTER_RANKS)

    def on_mount(self) -> None:
        # Widget references are cached once: the refresh path never queries the DOM.
        self.status_line = self.query_one(StatusLine)
        self.host_list = self.query_one(HostList)
        self.gpu_table = self.query_one(GpuTable)
        self.fleet_table = self.query_one(FleetTable)
        self.proc_table = self.query_one(ProcTable)
        self.action_log = self.query_one(ActionLog)
        self._make_panels()
        set_title(self.host_list, "Hosts")
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
        self.apply_width()
        self.gpus.table().focus()

    def _make_panels(self) -> None:
        state, dash = self.state, self.dash
        self.header = HeaderPanel(self, state, dash, self.status_line, self.query_one(Legend))
        self.hosts = HostsPanel(self, state, dash, self.host_list)
        notice = self.query_one(HostNotice)
        self.gpus = GpusPanel(self, state, dash, self.gpu_table, self.fleet_table, notice)
        self.procs = ProcessesPanel(self, state, dash, self.proc_table, self.gpus.scope)
        self.log_panel = LogPanel(self, state, dash, self.action_log)
        self.filters = FilterPanel(self, state, dash, self.query_one("#filter-row"), self.log_panel)
        self.filters.bar.leave = self._leave_filter
        self.kills = KillPanel(self, state, dash, self.gpus, self.procs)
        panes = (self.header, self.hosts, self.gpus, self.procs)
        self.redraw = Redraw(self, state, dash, panes, self.action_log)
        self._widgets_cached = True

    # -- the hosts as shown ----------------------------------------------------------------------

    def views(self) -> list[HostView]:
        """The hosts as the screen shows them: the fleet's, or as they were when paused."""
        return self.state.pause.views(self.dash.fleet.hosts)

    def shows_in_full(self, host: str) -> bool:
        """Whether `host` is shown in full: on its own screen or in the process pane, where what a
        sample with no news changes (ages, CPU, sparklines: gputui/fleet/news.py) is drawn."""
        # Asked from the first sample on, which may come before the screen is mounted (no panels).
        return host == self.state.host or (self._widgets_cached and self.procs.shows(host))

    def current_scope(self) -> ProcScope | None:
        return self.gpus.scope()

    def action_toggle_pause(self) -> None:
        live = self.dash.fleet.hosts
        ages = {v.name: self.dash.age_of(v.name) for v in live} if not self.state.pause.on else {}
        self.state.pause.toggle(live, ages, self.dash.clock())  # the header says PAUSED, for how long
        self.refresh_data(set(), everything=True)  # resuming catches up at once

    def memory_units_changed(self) -> None:
        """`m` flipped GiB and exact MiB: every memory cell again, the columns measured again."""
        tables = (self.gpu_table, self.fleet_table, self.proc_table)
        for table in tables:
            table.exact_memory = self.dash.exact_memory
        self.refresh_data(set(), everything=True)
        for table in tables:
            table.remeasure()

    # -- refreshing ------------------------------------------------------------------------------

    def refresh_data(self, changed: set[str], *, everything: bool = False, ages: bool = False) -> None:
        """Bring the visible widgets up to date with the fleet, touching only what `changed` names.

        `everything`: every host (after a theme switch or a filter change); `ages`: refresh the age
        column of every host (once a second: ages move even when nothing arrives)."""
        if not self.is_attached:
            return  # the app is exiting: its widgets are being taken down, with their styles
        self.redraw.hosts_changed(changed, everything=everything, ages=ages)
        self._footer_follows()
        if self._over_ssh is not None and self._over_ssh.waiting:
            for line, live in self._over_ssh.settled(self.dash.fleet.hosts):
                self.notify(line, severity="information" if live else "error", markup=False, timeout=8)

    def _footer_follows(self) -> None:
        """The footer offers kill keys where they work: a host connected, went down, or the fleet
        cursor moved to another host."""
        offered = self.kills.refusal() is None
        if offered != self._kills_offered:
            self._kills_offered = offered
            self.refresh_bindings()

    def restyle(self) -> None:
        """After a theme switch: cells and lines keep the styles they were made with."""
        self.header.legend.redraw()
        self.action_log.restyle()
        self.refresh_data(set(), everything=True)

    def refresh_procs(self, force: bool = True) -> None:
        if self.is_attached:
            self.procs.refresh(force)

    def on_proc_table_command_scrolled(self) -> None:
        self.refresh_procs()

    def on_proc_table_tree_changed(self) -> None:
        self.refresh_procs()

    def on_keyed_table_sorted(self) -> None:
        if self.proc_table.tree_mode or self.proc_table.jobs_mode:
            self.refresh_procs()  # the branches follow the siblings' new order
        self.procs.title()
        self.gpus.fleet_title()

    def on_keyed_table_refitted(self, event: KeyedTable.Refitted) -> None:
        if event.table is self.proc_table:
            self.refresh_procs()  # the processes alone: not every host of the fleet again
        else:
            self.refresh_data(set(), everything=True)

    def action_toggle_tree(self) -> None:
        self.procs.toggle_mode(tree=True)
        self.refresh_bindings()

    def action_toggle_jobs(self) -> None:
        self.procs.toggle_mode(tree=False)
        self.refresh_bindings()

    def action_follow(self) -> None:
        self.procs.follow()

    @on(DataTable.RowHighlighted, "#procs")
    def _proc_highlighted(self) -> None:
        self.procs.cursor_moved()

    # -- host selection --------------------------------------------------------------------------

    def select_host(self, host: str | None) -> None:
        """Show `host`'s dashboard, or the fleet table for None."""
        if self._shown_once and host == self.state.host:
            return
        self._shown_once = True
        self.gpus.switch(host)
        self.hosts.point_at(host)
        self.refresh_data(set(), everything=True)
        self.gpus.restore_cursor()
        self.refresh_procs()
        self.refresh_bindings()

    @on(DataTable.RowHighlighted, "#hosts")
    def _host_highlighted(self) -> None:
        # The cursor as it is now, not as the (possibly stale) event says: adding the first rows
        # highlights whatever row came first before the screen put the cursor where it belongs.
        if self._shown_once and not self.hosts.on_line_of(self.state.host):
            self.select_host(self.host_list.cursor_host)

    @on(DataTable.RowHighlighted, "#gpus")
    @on(DataTable.RowHighlighted, "#fleet")
    def _gpu_highlighted(self) -> None:
        self.refresh_procs(force=False)
        self._footer_follows()

    def action_drill(self) -> None:
        """Enter on the host list: into the host's GPUs. Enter on the fleet table: into that host;
        on a group's line: unfold it."""
        focused, fleet = self.focused, self.fleet_table
        if focused is fleet and fleet.on_group_row:
            group = fleet.cursor_group
            if group is not None:
                self._fold(group, folded=False)
            return
        if focused is self.host_list and (group := self.host_list.cursor_group) is not None:
            self._fold(group, folded=False)
            return
        at = fleet.cursor_gpu if focused is fleet else None
        host = at[0] if at is not None else self.host_list.cursor_host if focused is self.host_list else None
        if self.over_ssh.offers(host):
            self._open_over_ssh(host)
            return
        if at is not None:
            host, gpu = at
            self.state.enter_at(host, ALL if gpu is None else str(gpu))
            self.select_host(host)
        self.gpus.table().focus()

    @property
    def over_ssh(self) -> OverSsh:
        if self._over_ssh is None:
            self._over_ssh = OverSsh(self.dash.over_ssh)
        return self._over_ssh

    def _open_over_ssh(self, host: str) -> None:
        """Enter on a host read from Prometheus: the same host over SSH, beside it, in view."""
        twin, line = self.over_ssh.open(host)
        self.notify(line, severity="information" if twin else "error", markup=False, timeout=8)
        if twin is not None:
            self.refresh_data(set(), everything=True)
            self.select_host(twin)
            self.gpus.table().focus()

    def action_step_host(self, delta: int) -> None:
        """[ and ]: the previous or next host in the order the host list shows (problems first)."""
        shown = self.host_list.shown_order(v.name for v in self.dash.fleet.hosts)
        self.select_host(self.state.step_host(shown, delta))

    def on_fleet_table_fold_changed(self, event: FleetTable.FoldChanged) -> None:
        self._fold(event.group, event.folded)

    def on_host_list_fold_changed(self, event: HostList.FoldChanged) -> None:
        self._fold(event.group, event.folded)

    def _fold(self, group: str, folded: bool) -> None:
        """Fold a group's healthy hosts into its line, or unfold them; the cursor stays with the group."""
        self.state.problems.set_folded(group, folded)
        self.refresh_data(set(), everything=True)
        if folded:
            self.gpus.folded(group)
            self.hosts.folded(group)
            return
        # Unfolded: the cursor on the group's first host (its first GPU in the fleet table).
        first = next(iter(self.state.problems.members(group)), None)
        if first is None:
            return
        if self.focused is self.host_list:
            self.host_list.move_to(first, scroll=True)
        else:
            self.gpus.first_of(first)

    def action_users(self) -> None:
        """U: GPUs and memory per user across the fleet; a user chosen there filters the fleet table."""
        self.app.push_screen(UsersScreen(), self._user_chosen)

    def _user_chosen(self, user: str | None) -> None:
        if not user:
            return
        text = f"user:{exact_value(user)}"  # that user only: `[i]mallory` is no pattern here
        if self.state.host is not None:
            self.select_host(None)
        self.state.fleet.set(text)
        self.refresh_data(set(), everything=True)
        self.fleet_table.focus()
        self.notify(f"Fleet filtered: {text} (esc clears it).", timeout=4, markup=False)

    def action_show_procs(self) -> None:
        self.proc_table.focus()

    # -- layout ----------------------------------------------------------------------------------

    def on_resize(self) -> None:
        self.apply_width()
        self.call_after_refresh(self.log_panel.lift_toasts)

    def on_screen_resume(self) -> None:
        # What arrived while a dialog or the help was on top was kept, not drawn: draw it now.
        self.dash.want_redraw()

    def apply_width(self) -> None:
        self.hosts.fit(self.size.width)

    def action_toggle_hosts(self) -> None:
        self.hosts.toggle(self.size.width)

    def show_log(self) -> None:
        self.log_panel.show()

    def action_toggle_log(self) -> None:
        self.log_panel.toggle(focus_after=self.proc_table)

    # -- filter ----------------------------------------------------------------------------------

    def action_filter(self) -> None:
        self.filters.open(self.filters.target(self.proc_table))

    def set_filter(self, target: str, text: str) -> None:
        """Filter `target` ("fleet", "procs", "log") by `text`; its table drawn again."""
        if not self.filters.set(target, text):
            return
        if target == "fleet":
            self.refresh_data(set(), everything=True)
        else:
            self.refresh_procs()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.set_filter(self.filters.bar.target, event.value)

    def _leave_filter(self, keep: bool) -> None:
        """Enter (`keep`) or esc in the filter box, in turn with the keys typed before it (their
        Changed messages may still be on their way: the box's text is read now). Enter on text that
        cannot be read keeps the box open, its problem said: closing would drop what was typed."""
        target = self.filters.bar.target
        self.set_filter(target, self.filters.bar.value if keep else "")
        if keep and self.filters.unreadable():
            return
        self.filters.close(fallback=self.proc_table)

    def action_clear_filter(self) -> None:
        for target in ("procs", "fleet", "log"):
            self.set_filter(target, "")

    def action_free_only(self) -> None:
        self.state.free_only = not self.state.free_only
        self.refresh_data(set(), everything=True)

    # -- the kill keys: gather targets, post a request -------------------------------------------

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
        if action == "signal_menu" or (action == "refuse" and parameters == ("signal_menu",)):
            refused = self.kills.menu_refusal() is not None
            return refused if action == "refuse" else not refused
        if action in KILL_ACTIONS:
            if self.kills.refusal() is not None:
                return False  # not offered: hidden from the footer and the help; the key says why
            if action in ("toggle_select", "tag_user") and self.focused is not self.proc_table:
                return None
        if action == "refuse":
            return self.kills.refusal() is not None  # only where the kill action itself is not offered
        if action == "free_only":
            return self.state.host is None
        # `/` is text in the box (its binding, a priority one, would take it first).
        return not (action == "filter" and isinstance(self.focused, Input))

    def action_refuse(self, action: str) -> None:
        self.kills.refuse(action)

    def action_toggle_select(self) -> None:
        self.procs.toggle_select()

    def action_tag_user(self) -> None:
        self.procs.tag_user()

    def action_select_idle(self) -> None:
        """I: the idle holders of the host in view, or of the fleet on "All hosts"."""
        host = self.state.host
        self.procs.select_idle([self.gpus.view(host)] if host is not None else self.views())

    def action_proc_detail(self) -> None:
        """The process under the cursor in full (a context row of the tree too)."""
        record, scope = self.procs.cursor_record(), self.procs.scope
        if record is not None and scope is not None:
            self.app.push_screen(ProcDetailScreen(scope.host, record))

    def action_gpu_detail(self) -> None:
        scope = self.gpus.scope()
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
        self.kills.free_gpu()

    def action_free_host(self, sweep: bool = False) -> None:
        """F; with `sweep` (the command palette's "sweep"), the dialog opens with the unattributed
        holders included (s there leaves them out again)."""
        self.kills.free_host(sweep)

    def action_stop_job(self) -> None:
        self.kills.stop_job()

    def action_plan(self) -> None:
        self.kills.plan()

    def action_signal_plan(self, signals: str) -> None:
        """T, K, I (nvitop's): the selection planned with that ladder, in the same dialog as x."""
        self.kills.plan(signals)

    def action_signal_menu(self) -> None:
        """F9 (htop's): which signals for the selection; the plan dialog then confirms them."""
        if not self.kills.chosen():
            return
        what = "the selection" if self.state.selection.count() else "the process under the cursor"
        self.app.push_screen(ChooseScreen(f"Signal {what}", ladder_choices()), self._ladder_chosen)

    def _ladder_chosen(self, signals: str | None) -> None:
        if signals is not None:
            self.kills.plan(signals)

    def action_sort_menu(self) -> None:
        """F6 (htop's): the focused table's columns by name; the one chosen sorts it."""
        table = self.focused
        if not isinstance(table, KeyedTable) or not table.sortable_columns():
            self.notify("F6 sorts the table with the focus: the GPUs, the fleet or the processes (tab).")
            return
        sort = table.sort_column
        chosen = ChooseScreen("Sort by", sort_choices(table), sort[0] if sort else None)
        self.app.push_screen(chosen, lambda column: table.sort_by(column) if column else None)

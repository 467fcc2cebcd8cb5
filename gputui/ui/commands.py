"""gputui's own entries in the command palette (ctrl+p), beside Textual's (themes, keys, quit).

Each entry runs the action its key runs (`free_gpu`, `free_host`, `toggle_pause`, ...) through
`App.run_action`, so the palette goes through the same `check_action` and the same code as the key:
there is no second path to a kill. An entry is listed only where it can act now: no kill entry in a
read-only app or on a host that takes no plans, no "Free GPU" without a GPU under the cursor, no
sweep without unattributed holders, no host entry for the host already in view.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.markup import escape

from gputui.text.words import count

from . import fmt
from .screens.main import MainScreen


@dataclass(frozen=True)
class Entry:
    title: str
    help: str
    run: Callable[[], Awaitable[Any] | None]

    @classmethod
    def switch(
        cls,
        on: bool,
        if_on: tuple[str, str],
        if_off: tuple[str, str],
        run: Callable[[], Awaitable[Any] | None],
    ) -> Entry:
        """An entry that switches something on or off: (title, help) of what it switches to, for
        each state it can be in now (not what is shown now)."""
        return cls(*(if_on if on else if_off), run)


class GpuTuiCommands(Provider):
    """Free GPU, free host, stop a job, sweep, switch host, pause, MiB, GPU view, process tree,
    jobs and detail, export, the action log."""

    def _main(self) -> MainScreen | None:
        stack = self.app.screen_stack
        main = stack[0] if stack else None
        return main if isinstance(main, MainScreen) and main.is_mounted else None

    def entries(self) -> Iterator[Entry]:
        main = self._main()
        if main is not None and self.screen is main:
            yield from self._kill_entries(main)
            yield from self._view_entries(main)
            yield from self._host_entries(main)
        yield from self._app_entries()

    def _view_entries(self, main: MainScreen) -> Iterator[Entry]:
        """What the main screen's keys switch or open: the GPU view, the process views, pause, the log."""
        act = partial(self.app.run_action, default_namespace=main)
        scope = main.current_scope()
        if scope is not None:
            which = f"GPU {scope.gpu}" if scope.gpu is not None else "its first GPU"
            yield Entry(
                f"GPU view: {which} on {fmt.safe(scope.host, 40)}",
                "memory, settings and history of one GPU (i)",
                partial(act, "gpu_detail"),
            )
        yield Entry.switch(
            main.proc_table.tree_mode,
            ("Processes as a list", "t: one row per process, in the sort's order (no families)"),
            ("Processes as a tree", "t: each process under its parent; - and + fold and unfold a family"),
            partial(act, "toggle_tree"),
        )
        yield Entry.switch(
            main.proc_table.jobs_mode,
            ("Processes as a list (not by job)", "J: one row per process, without the jobs' rows"),
            ("Processes by job", "J: each job (a launcher, a supervisor, a service) a row above its members"),
            partial(act, "toggle_jobs"),
        )
        yield Entry(
            "Users: GPUs and memory per user",
            "U: who holds the fleet, with their idle holders; enter filters the fleet to one",
            partial(act, "users"),
        )
        if not main.dash.read_only:
            yield Entry(
                "Select the idle holders",
                "I: GPU memory held at 0 % SM for the idle minutes (the host in view, or the "
                "fleet); x then plans their kill",
                partial(act, "select_idle"),
            )
        at = main.proc_table.cursor_any_key
        if scope is not None and at is not None:
            yield Entry(
                f"Process detail: PID {at[0][0]}",
                "d: everything about the process under the process table's cursor",
                partial(act, "proc_detail"),
            )
        yield Entry.switch(
            main.state.pause.on,
            ("Resume (catch up)", "z: back to the live view, with what arrived meanwhile"),
            ("Pause the view", "z: freeze the view to read it; samples still arrive and are kept"),
            partial(act, "toggle_pause"),
        )
        log = "l: every plan, signal and verdict"
        yield Entry.switch(
            bool(main.action_log.display),
            ("Hide the action log", log),
            ("Show the action log", log),
            partial(act, "toggle_log"),
        )

    def _host_entries(self, main: MainScreen) -> Iterator[Entry]:
        """A switch to every host but the one in view, and to all hosts."""
        hosts = main.dash.fleet.hosts
        if len(hosts) > 1 and main.state.host is not None:
            yield Entry(
                "Switch to all hosts",
                "the fleet table: every GPU of every host",
                partial(main.select_host, None),
            )
        for view in hosts:
            if view.name != main.state.host:
                yield Entry(
                    f"Switch to host {fmt.safe(view.name, 60)}",
                    f"{view.status}: its GPUs and processes",
                    partial(main.select_host, view.name),
                )

    def _app_entries(self) -> Iterator[Entry]:
        """The app's own, on every screen: memory units and the export."""
        app: Any = self.app
        yield Entry.switch(
            bool(getattr(app, "exact_memory", False)),
            ("Memory in GiB", "m: GPU memory, RAM and RSS in GiB again"),
            ("Memory in exact MiB", "m: GPU memory, RAM and RSS in whole MiB (as nvidia-smi)"),
            partial(app.run_action, "toggle_mib"),
        )
        yield Entry(
            "Export snapshot",
            "write what the dashboard shows as JSON and text (as `gputui snapshot` does)",
            partial(app.run_action, "export"),
        )

    def _kill_entries(self, main: MainScreen) -> Iterator[Entry]:
        """Only where the keys would act: check_action says whether kills are offered here."""
        if not main.check_action("free_gpu", ()):
            return
        host = main.gpus.target_host()
        if host is None:
            return
        act = partial(self.app.run_action, default_namespace=main)
        name = fmt.safe(host, 40)
        scope = main.current_scope()
        if scope is not None and scope.gpu is not None:
            yield Entry(
                f"Free GPU {scope.gpu} on {name}",
                "f: kill its holders, then verify its memory came back (a confirmation first)",
                partial(act, "free_gpu"),
            )
        yield Entry(
            f"Free host {name}",
            "F: every GPU of the host (a confirmation first)",
            partial(act, "free_host"),
        )
        job = main.procs.cursor_job()
        if job is not None:
            yield Entry(
                f"Stop job {fmt.safe(job.id, 40)} on {name}: {fmt.safe(job.command_line, 60)}",
                f"X: its root first, then every member ({count(len(job.members), 'member')}); a "
                "confirmation first",
                partial(act, "stop_job"),
            )
        unattributed = main.kills.sweep_candidates(host)
        if unattributed:
            yield Entry(
                f"Sweep: free host {name} and its {count(unattributed, 'unattributed holder')}",
                "F with the sweep included: hidden holders tied to no GPU (a confirmation first)",
                partial(act, "free_host(True)"),
            )

    # The palette reads a str as markup: a title carries host names, job ids and command lines, so
    # it goes as Content (or escaped, for the matcher's highlight), never as markup ("gpu[/b]").

    async def discover(self) -> Hits:
        for entry in self.entries():
            yield DiscoveryHit(Content(entry.title), entry.run, text=entry.title, help=escape(entry.help))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for entry in self.entries():
            score = matcher.match(entry.title)
            if score > 0:
                shown = matcher.highlight(escape(entry.title))
                yield Hit(score, shown, entry.run, text=entry.title, help=escape(entry.help))

"""The user table (the users view, `U`): GPUs and memory per user across the fleet.

One row per user: on how many hosts, how many GPUs, how much GPU memory, in how many processes and
jobs, and their idle holders (memory held at 0 % SM for the idle minutes: how many, how much, the
longest). From gputui.views.problems.user_usage, over the live hosts; most memory first."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType

from gputui.fleet.idle import span
from gputui.text.units import fmt_memory
from gputui.views.problems import NO_USER, UserUse

from .. import fmt
from .cells import Cell, Row
from .columns import Column
from .table import KeyedTable


class UserTable(KeyedTable):
    COLUMNS = (
        Column("user", "User", width=None, nominal=12, cut=True),
        Column("hosts", "Hosts", justify="right", descending=True),
        Column("gpus", "GPUs", justify="right", descending=True),
        Column("memory", "GPU mem", justify="right", descending=True),
        Column("procs", "Procs", justify="right", descending=True, priority=2),
        Column("jobs", "Jobs", justify="right", descending=True, priority=3),
        Column(
            "idle",
            "Idle holders",
            width=None,
            nominal=24,
            justify="left",
            descending=True,
            priority=1,
            cut=True,
        ),
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "enter", "screen.choose", "Their GPUs", tooltip="the fleet table, filtered to this user's GPUs"
        ),
    ]
    DEFAULT_SORT = ("memory", True)
    COMPONENT_CLASSES: ClassVar[set[str]] = {"proc--warn", "proc--muted"}

    def show_users(self, users: list[UserUse]) -> None:
        self.sync({use.user: self.row(use) for use in users})

    def row(self, use: UserUse) -> Row:
        muted = self.style_of("proc--muted")
        name = Cell(fmt.safe(use.user, 64), muted if use.user == NO_USER else "")
        if use.idle_holders:
            idle = Cell.numbers(
                f"{use.idle_holders} · {fmt_memory(use.idle_memory, self.exact_memory)} · "
                f"longest {span(use.longest_idle or 0)}",
                self.style_of("proc--warn"),
            )
            idle.sort_key = use.idle_memory
        else:
            idle = Cell("-", muted, sort_key=0)
        return {
            "user": name,
            "hosts": Cell(str(len(use.hosts)), sort_key=len(use.hosts)),
            "gpus": Cell(str(len(use.gpus)), sort_key=len(use.gpus)),
            "memory": Cell(fmt_memory(use.memory, self.exact_memory), sort_key=use.memory),
            "procs": Cell(str(use.processes), sort_key=use.processes),
            "jobs": Cell(str(len(use.jobs)), sort_key=len(use.jobs)),
            "idle": idle,
        }

    @property
    def cursor_user(self) -> str | None:
        key = self.cursor_key
        return key if key != NO_USER else None

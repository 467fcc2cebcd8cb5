"""What the screens need of the app, as an interface: the screens never import the app.

The main screen reads fleet state and asks for redraws; the app implements this protocol
(gputui.ui.app.GpuTuiApp). Keeping it here breaks the circle app -> screen -> app.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from gputui.fleet.fleet import Fleet


class Dashboard(Protocol):
    fleet: Fleet
    read_only: bool
    read_only_why: str  # why nothing is signalled, when read_only: a refused key's notification
    clock: Callable[[], float]
    exact_memory: bool  # memory in exact MiB (`m`), else GiB
    hidden_columns: Mapping[str, frozenset[str]]  # the config's [columns]: table -> column keys
    idle_after: float  # seconds at 0 % SM that make a process holding GPU memory an idle holder
    paced: float | None  # the interval the app slowed the samples to (gputui/fleet/pacing.py); None: as asked
    # A host read without a probe (from Prometheus) -> what opens it over SSH (gputui/ui/oversh.py).
    over_ssh: Mapping[str, Callable[[], str]]

    def age_of(self, host: str) -> float | None:
        """Seconds since `host`'s last sample arrived, by the app's clock (None: none yet)."""

    def want_redraw(self) -> None:
        """Schedule a redraw of what changed."""

"""`make_app`: the one way the CLI, the tests and the benches build the dashboard, live or replayed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gputui.fleet.fleet import Fleet

from .app import GpuTuiApp

if TYPE_CHECKING:
    from .replay import ReplayControls


def make_app(fleet: Fleet, *, replay: ReplayControls | None = None, **options: Any) -> GpuTuiApp:
    """The app for `fleet`, not started: `GpuTuiApp(fleet, **options)` (its parameters are said
    there). With `replay` (the fleet plays a recording, and these are its controls), the recording's
    app (gputui/ui/replay.py): read-only, with the replay's keys and line; pass its recorded time as
    `clock`."""
    if replay is None:
        return GpuTuiApp(fleet, **options)
    # Imported here for start-up time: the recording's reader is loaded only when a file is played.
    from .replay import ReplayApp

    return ReplayApp(fleet, replay=replay, **{**options, "read_only": True})

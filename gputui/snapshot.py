"""`gputui snapshot`: one sample of every host, as a table for people or versioned JSON for scripts.

The text and the JSON document (schema version 1) are gputui.export's, which the dashboard's export
writes too.
"""

from __future__ import annotations

from .export import NO_GPU_CODES, SCHEMA_VERSION, as_json, dumps, host_status, render
from .fleet import DOWN, Fleet, HostView

__all__ = ["NO_GPU_CODES", "SCHEMA_VERSION", "as_json", "dumps", "exit_code", "host_status", "render", "take"]

EXIT_OK, EXIT_DOWN, EXIT_USAGE, EXIT_NO_GPU = 0, 1, 2, 3


def exit_code(views: list[HostView]) -> int:
    statuses = [host_status(v)[0] for v in views]
    if any(s == DOWN for s in statuses):
        return EXIT_DOWN
    if any(s == "no-gpu" for s in statuses):
        return EXIT_NO_GPU
    return EXIT_OK


async def take(fleet: Fleet, timeout: float) -> list[HostView]:
    fleet.start()
    try:
        await fleet.wait_first_samples(timeout)
    finally:
        await fleet.stop()
    return fleet.hosts

"""The sim reader, moved whole into a package (reader.py: the reader; worker.py: its jobs' program)
before it is split along its seams. Re-exports what its callers use.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

from .reader import (
    MEMORY_RESERVED,
    MEMORY_TOTAL,
    MIG_LAYOUT,
    ROLES,
    SCENARIO_JOBS,
    GiB,
    SimError,
    SimJob,
    SimReader,
    create_context,
    open_devices,
    signal_checked,
    start_time,
    watched,
)

__all__ = [
    "MEMORY_RESERVED",
    "MEMORY_TOTAL",
    "MIG_LAYOUT",
    "ROLES",
    "SCENARIO_JOBS",
    "GiB",
    "SimError",
    "SimJob",
    "SimReader",
    "create_context",
    "open_devices",
    "signal_checked",
    "start_time",
    "watched",
]

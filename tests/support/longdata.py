"""The demo recordings with long numbers and long words, for the truncation rule (issue 12, defect 1).

Every PID becomes a 7-digit one (as on a host whose pid_max is 4194304), every command line grows
long arguments, and host names are long: what an operator meets on a busy cluster node.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.support.apps import recording

OFFSET = 4_120_381  # 4912 -> 4125293: seven digits, as on a host whose pid_max is 4194304
LONG_ARGS = ["--config", "/mnt/shared/experiments/2025-11-29/llama-3.1-70b/sweep-lr-3e-4/config.yaml"]
HOSTS = {"demo-a": "gpu-node-017.rack-04.example.org", "demo-b": "gpu-node-018.rack-04.example.org"}


def _pid(value: Any) -> Any:
    return value + OFFSET if isinstance(value, int) and value > 1 else value


def long_records(name: str) -> list[dict[str, Any]]:
    records = copy.deepcopy(list(recording(name)))
    for record in records:
        if record["type"] == "hello":
            record["pid"] = _pid(record["pid"])
            continue
        for proc in record.get("processes", ()):
            for field in ("pid", "ppid", "pgid", "sid"):
                proc[field] = _pid(proc.get(field))
            proc["links"] = [_pid(p) for p in proc.get("links") or []]
            if proc.get("command"):
                proc["command"] = [*proc["command"], *LONG_ARGS]
    return records


def long_fleet_records() -> dict[str, list[dict[str, Any]]]:
    return {HOSTS[name]: long_records(name) for name in ("demo-a", "demo-b")}


def long_pid(pid: int) -> int:
    return pid + OFFSET

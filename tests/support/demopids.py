"""The recorded demo's processes named by what they run (the vllm server, the notebook kernel), not by
PID: a test that means "the notebook" stays right when the demo is recorded again with new PIDs
(tests/fixtures/record.py)."""

from __future__ import annotations

from typing import Any

from tests.support.apps import recording


def last_sample(host: str = "demo-a") -> dict[str, Any]:
    return next(r for r in reversed(recording(host)) if r["type"] == "sample")


def demo_pid(script: str | None, kind: str = "user", host: str = "demo-a") -> int:
    """The PID of the one process of `kind` in `host`'s last recorded sample whose command line has an
    argument that contains `script` (None: the one process of that kind, a ghost or a zombie)."""
    found = [
        p["pid"]
        for p in last_sample(host)["processes"]
        if p["kind"] == kind and (script is None or any(script in arg for arg in p["command"] or ()))
    ]
    if len(found) != 1:
        raise LookupError(f"{len(found)} {kind} processes run {script!r} in {host}'s recording: {found}")
    return int(found[0])

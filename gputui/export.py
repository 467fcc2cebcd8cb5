"""The fleet's state as versioned JSON: `gputui snapshot --json` and the dashboard's "Export snapshot"
write the same document, built here once (the UI may not import the CLI's modules).

Schema (version 1): {"version": 1, "time": ..., "hosts": [HOST, ...]} where HOST is
{"name", "status" ("live" | "down" | "no-gpu"), "reason", "message", "host" (the hello's host facts),
"metrics" (the last sample's `host` object: CPU %, load, RAM, swap, uptime), "gpus" and
"processes" (the probe's records, docs/PROTOCOL.md), "scan"}.
"""

from __future__ import annotations

import json
import time
from typing import Any

from .fleet import DOWN, HostView

SCHEMA_VERSION = 1
NO_GPU_CODES = ("no-driver", "no-gpu", "no-library", "no-permission")


def host_status(view: HostView) -> tuple[str, str | None, str | None]:
    """(status, reason code, message) of a host for a one-shot report."""
    if view.facts is not None and view.facts.error_code in NO_GPU_CODES:
        return "no-gpu", view.facts.error_code, view.facts.error_message
    if view.sample is not None:
        return "live", None, None
    return DOWN, view.reason or "timeout", view.detail or "no sample arrived in time"


def as_json(views: list[HostView], now: float | None = None) -> dict[str, Any]:
    hosts = []
    for v in views:
        status, reason, message = host_status(v)
        raw = v.raw_sample or {}
        hosts.append(
            {
                "name": v.name,
                "status": status,
                "reason": reason,
                "message": message,
                "host": (v.raw_hello or {}).get("host"),
                "metrics": raw.get("host"),
                "gpus": raw.get("gpus", []),
                "processes": raw.get("processes", []),
                "scan": raw.get("scan"),
            }
        )
    return {"version": SCHEMA_VERSION, "time": time.time() if now is None else now, "hosts": hosts}


def dumps(views: list[HostView], now: float | None = None) -> str:
    """The document as text (ASCII: a host's control characters stay escaped)."""
    return json.dumps(as_json(views, now), indent=2, ensure_ascii=True)

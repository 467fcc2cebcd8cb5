"""The event stream's frames as bytes: `event: NAME\\ndata: JSON\\n\\n` (server-sent events), and the
JSON each kind carries (docs/SERVE.md "The event stream").

Every frame is made once and the same bytes go to every client. The JSON is ASCII (control characters
and every non-ASCII character escaped) with `<`, `>` and `&` escaped too (`\\u003c`...): a host's text
cannot end a `<script>` element or open markup wherever a frame's data is put, and a line break
inside a host's text can never end an SSE field (json never writes a raw one).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .. import __version__
from ..fleet.session import HostView
from ..model.host import HUB_PROTOCOL
from ..views.problems import FleetProblems

HISTORY_POINTS = 60  # a GPU's last readings sent at join and reset (the page's sparklines)
# Problem states by severity (views/problems.RANKS' order): the host or its numbers are gone, the
# GPU is in trouble; memory someone should look at; how it runs.
CRITICAL = frozenset({"down", "stale", "no-gpu", "error", "ecc"})
WARNING = frozenset({"ghost", "orphaned", "outside", "unaccounted", "idle-held"})
_HTML = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})
_HTML_BYTES = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"))


def to_json(value: Any) -> str:
    """`value` as compact ASCII JSON, safe to put anywhere in HTML (no `<`, `>` or `&`)."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False).translate(_HTML)


def safe_json_bytes(data: bytes) -> bytes:
    """ASCII JSON made elsewhere (the probe's wire encoder) with `<`, `>`, `&` escaped as to_json does:
    outside strings JSON has none of them, so the text means the same."""
    for raw, escaped in _HTML_BYTES:
        if raw in data:
            data = data.replace(raw, escaped)
    return data


def frame(event: str, data_json: bytes) -> bytes:
    """One server-sent event; `data_json` is one line of JSON."""
    return b"event: " + event.encode("ascii") + b"\ndata: " + data_json + b"\n\n"


def json_frame(event: str, value: Any) -> bytes:
    return frame(event, to_json(value).encode("ascii"))


def host_frame(name: str, record_json: bytes, event: str) -> bytes:
    """A frame whose data is `["NAME", RECORD]`, the record already JSON (no newline)."""
    return frame(event, b"[" + to_json(name).encode("ascii") + b"," + safe_json_bytes(record_json) + b"]")


PING = b": ping\n\n"
RESET = json_frame("reset", {})


def hub_record(interval: float, actions: bool, hosts: Iterable[str]) -> dict[str, Any]:
    return {
        "v": HUB_PROTOCOL,
        "version": __version__,
        "interval": interval,
        "actions": actions,
        "hosts": list(hosts),
    }


def host_status(view: HostView) -> tuple[str, str | None, str | None]:
    """(status, reason code, message): the status as people are shown it (a host that went down stays
    down while it tries again), and why, where known."""
    status = view.shown_status
    if status == "live":
        return status, None, None
    reason = view.reason or view.last_down
    return status, reason, view.shown_detail or view.down_why or view.phase_detail


def host_record(view: HostView, group: str, with_history: bool) -> dict[str, Any]:
    status, reason, message = host_status(view)
    record: dict[str, Any] = {
        "status": status,
        "reason": reason,
        "message": message,
        "group": group,
        "read_only": not view.can_kill if view.facts is not None else view.read_only,
    }
    if with_history:
        record["history"] = history(view)
    return record


def history(view: HostView, points: int = HISTORY_POINTS) -> dict[str, dict[str, list[float]]]:
    """Each GPU's last `points` readings: utilization and memory in percent, and their times."""
    out: dict[str, dict[str, list[float]]] = {}
    for index, readings in view.history.items():
        out[str(index)] = {
            "util": readings.util[-points:],
            "memory": [round(m, 2) for m in readings.memory[-points:]],
            "time": [round(t, 3) for t in readings.times[-points:]],
        }
    return out


def severity(state: str) -> str:
    if state in CRITICAL:
        return "critical"
    return "warning" if state in WARNING else "info"


def problems_record(problems: FleetProblems, order: Mapping[str, int]) -> list[dict[str, Any]]:
    """Every problem of the fleet, worst first, then by the host's place and the GPU's index: what the
    `problems` frame carries (`state` beside the issue's fields: the filter's `state:` word)."""
    rows: list[tuple[int, int, int, dict[str, Any]]] = []
    for host, state in problems.states.items():
        place = order.get(host, len(order))
        for p in state.problems:
            rows.append((p.rank, place, -1, _problem(p.state, host, None, p.text())))
        for index, gpu_problems in state.gpus.items():
            for p in gpu_problems:
                rows.append((p.rank, place, index, _problem(p.state, host, index, p.text())))
    rows.sort(key=lambda row: row[:3])
    return [row[3] for row in rows]


def _problem(state: str, host: str, gpu: int | None, text: str) -> dict[str, Any]:
    return {"severity": severity(state), "state": state, "host": host, "gpu": gpu, "text": text}

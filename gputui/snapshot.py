"""`gputui snapshot`: one sample of every host, as a table for people or versioned JSON for scripts.

JSON schema (version 1): {"version": 1, "time": ..., "hosts": [HOST, ...]} where HOST is
{"name", "status" ("live" | "down" | "no-gpu"), "reason", "message", "host" (the hello's host facts),
"gpus" and "processes" (the probe's records, docs/PROTOCOL.md), "scan"}.
"""

from __future__ import annotations

import json
import time
from typing import Any, TextIO

from .fleet import DOWN, REASONS, Fleet, HostView
from .model import Proc, Sample
from .textsafe import printable
from .units import fmt_bytes, fmt_bytes_of, fmt_duration, fmt_gpus, fmt_percent
from .words import count

SCHEMA_VERSION = 1
NO_GPU_CODES = ("no-driver", "no-gpu", "no-library", "no-permission")

EXIT_OK, EXIT_DOWN, EXIT_USAGE, EXIT_NO_GPU = 0, 1, 2, 3


def host_status(view: HostView) -> tuple[str, str | None, str | None]:
    """(status, reason code, message) of a host for a one-shot report."""
    if view.facts is not None and view.facts.error_code in NO_GPU_CODES:
        return "no-gpu", view.facts.error_code, view.facts.error_message
    if view.sample is not None:
        return "live", None, None
    return DOWN, view.reason or "timeout", view.detail or "no sample arrived in time"


def exit_code(views: list[HostView]) -> int:
    statuses = [host_status(v)[0] for v in views]
    if any(s == DOWN for s in statuses):
        return EXIT_DOWN
    if any(s == "no-gpu" for s in statuses):
        return EXIT_NO_GPU
    return EXIT_OK


def as_json(views: list[HostView]) -> dict[str, Any]:
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
                "gpus": raw.get("gpus", []),
                "processes": raw.get("processes", []),
                "scan": raw.get("scan"),
            }
        )
    return {"version": SCHEMA_VERSION, "time": time.time(), "hosts": hosts}


KIND_NOTE = {
    "ghost": "dead PID NVML still lists",
    "hidden": "holds /dev/nvidia*, not listed by NVML",
    "monitor": "watches only: protected",
    "zombie": "exited, holds nothing",
}


def _note(p: Proc, sample: Sample) -> str:
    if p.kind == "ghost":
        holders = ", ".join(str(pid) for pid in p.links) or "nobody found"
        return f"{p.reason}; memory held by {holders}"
    if p.kind == "hidden":
        return f"via {p.reason} {p.links[0]}" if p.links else "unattributed"
    if p.kind == "zombie":
        return f"parent {p.ppid} must reap it"
    if p.protected:
        return f"protected: {p.protected}"
    return ""


def _sm(p: Proc) -> str:
    sm = p.sm_util()
    return "-" if sm is None else f"{sm}%"


def _cut(text: str, width: int) -> str:
    """`text` in at most `width` characters, an ellipsis where it was cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def render(views: list[HostView], out: TextIO, width: int = 120) -> None:
    for v in views:
        status, reason, message = host_status(v)
        facts = v.facts
        head = f"== {printable(v.name)}"
        if facts is not None:
            head += f"  ({printable(facts.hostname)}, driver {facts.driver_version or '-'})"
        if facts is not None and facts.read_only:
            head += "  [read-only]"
        print(head, file=out)
        if status != "live":
            words = REASONS.get(reason or "", reason)
            print(f"   {status}: {words}: {printable(message or '')}", file=out)
            if status == "no-gpu":
                print("   (try `gputui snapshot --demo` for a simulated cluster)", file=out)
        sample = v.sample
        if sample is None:
            print(file=out)
            continue
        if sample.gpus:
            print(
                f"   {'GPU':>3}  {'name':<22} {'memory used/total':>18} {'util':>5} {'temp':>5} "
                f"{'power':>11}  state",
                file=out,
            )
        for g in sample.gpus:
            used = fmt_bytes_of(g.memory_used, g.memory_total)
            power = f"{g.power_draw or 0:.0f}/{g.power_limit or 0:.0f}W" if g.power_draw is not None else "-"
            temp = f"{g.temperature}C" if g.temperature is not None else "-"
            state = g.error or ("free" if sample.gpu_is_free(g) else "busy")
            print(
                f"   {g.index:>3}  {_cut(printable(g.name or '-'), 22):<22} {used:>18} "
                f"{fmt_percent(g.util_gpu):>5} {temp:>5} {power:>11}  {state}",
                file=out,
            )
        if sample.processes:
            print(
                f"   {'PID':>7} {'kind':<8} {'GPUs':<6} {'GPU mem':>8} {'SM%':>4} {'user':<10} {'elapsed':>8}  command",
                file=out,
            )
        for p in sample.processes:
            gpus = fmt_gpus(p.gpus)
            mem = fmt_bytes(p.gpu_bytes) if p.gpu_memory else "-"
            note = _note(p, sample)
            head = (
                f"   {p.pid:>7} {p.kind:<8} {gpus:<6} {mem:>8} {_sm(p):>4} {_cut(printable(p.user or '-'), 10):<10} "
                f"{fmt_duration(p.elapsed):>8}  "
            )
            tail = f"  ({note})" if note else ""
            # Numbers and the note stay whole; the command gives way, with an ellipsis.
            room = max(width, 60) - len(head) - len(tail)
            print(head + _cut(printable(p.command_line), max(room, 12)) + tail, file=out)
        if sample.scan_unreadable:
            print(
                f"   (the open files of {count(sample.scan_unreadable, 'process', 'processes')} unreadable: run as root to see every holder)",
                file=out,
            )
        print(file=out)


async def take(fleet: Fleet, timeout: float) -> list[HostView]:
    fleet.start()
    try:
        await fleet.wait_first_samples(timeout)
    finally:
        await fleet.stop()
    return fleet.hosts


def dumps(views: list[HostView]) -> str:
    return json.dumps(as_json(views), indent=2, ensure_ascii=True)

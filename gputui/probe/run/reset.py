"""The reset ladder: a GPU reset as an explicit, separate plan, never automatic.

Memory that no process holds (orphaned: gputui/probe/accounting.py) comes back only through a GPU
reset. Before anything, the probe lists what blocks one: every process holding /dev/nvidiaN or
/dev/nvidiactl (monitors included, named), MIG mode, an active display, NVLink peers that would have
to be reset with it, and, on a real GPU, not being root. It refuses while any remains. Persistence
mode is not a blocker but a step: turned off for the reset, turned back on after. Then the reader's
reset (`nvidia-smi --gpu-reset -i UUID` on a real host), a poll until the memory is back at its idle
baseline, and the verdict. `dry_run` lists the ladder and acts on nothing. A probe outside the host's
PID namespace (a container) never resets: it cannot see who else uses the GPU (blocker `outside`).
The app may cancel the ladder (its audit log failed: what it cannot record must not happen): no step
starts after that, and persistence mode, if turned off, is turned back on.

Events as a plan's (docs/PROTOCOL.md "Reset"): blockers, persistence, reset, verify, done.
Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import os
import time
from typing import Any, Callable, Dict, List, Optional  # noqa: F401  (type comments)

from ..accounting import account, device_file
from ..common import DRY_RUN, ERROR, NOT_RESET, POLL_S, REFUSED, RESET, count, took
from ..wire import VERSION, error

VERIFY_S = 20.0  # seconds for the memory to be back after a reset


def _size(nbytes):
    # type: (int) -> str
    """`4.6 GiB`, as the app writes sizes."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return "%.1f %s" % (nbytes / float(1 << shift), unit)
    return "%d B" % nbytes


class Reset(object):
    def __init__(self, probe, record, emit, stop_requested=None):
        # type: (Any, Dict[str, Any], Callable[[Dict[str, Any]], None], Optional[Callable[[], Optional[str]]]) -> None
        self.probe = probe
        self._stop_requested = stop_requested
        self.cancelled = None  # type: Optional[str]  # why the app cancelled the ladder
        self.id = record["id"]
        self.index = record["gpu"]
        self.dry_run = record.get("dry_run") is True
        self._emit = emit
        self.t0 = time.monotonic()

    def event(self, stage, result, message, data=None):
        # type: (str, Optional[str], str, Optional[Dict[str, Any]]) -> Dict[str, Any]
        body = {"elapsed_ms": round((time.monotonic() - self.t0) * 1e3, 1)}  # type: Dict[str, Any]
        body.update(data or {})
        record = {
            "type": "event",
            "v": VERSION,
            "plan": self.id,
            "time": time.time(),
            "stage": stage,
            "pid": None,
            "start_time": None,
            "gpu": self.index,
            "signal": None,
            "result": result,
            "message": message,
            "data": body,
        }
        try:
            self._emit(record)
        except (OSError, ValueError):
            pass  # the app went away: the ladder finishes (it never stops half-way through a reset)
        return record

    def cancel_requested(self):
        # type: () -> bool
        """Has the app cancelled the ladder? Says so once, in a `cancel` event."""
        if self.cancelled is None and self._stop_requested is not None:
            reason = self._stop_requested()
            if reason:
                self.cancelled = reason
                self.event("cancel", "cancelled", "reset cancelled by the app (%s): no further step" % reason)
        return self.cancelled is not None

    def blockers(self, gpu, preflight):
        # type: (Dict[str, Any], Dict[str, Any]) -> List[Dict[str, Any]]
        """What stops a reset of this GPU now, each with words (and a PID for a process)."""
        out = []  # type: List[Dict[str, Any]]
        prefix = self.probe.scanner.prefix
        files = (device_file(gpu, prefix), prefix + "ctl")
        scan = self.probe.scanner.scan(full=True)
        listed = self.probe.read_gpus()[1]
        records = dict((r["pid"], r) for r in self.probe.describe(listed, scan))
        for pid in sorted(records):
            record = records[pid]
            if pid == self.probe.pid:
                continue  # the probe lets go of the driver for the reset itself
            held = [f for f in record.get("holds") or [] if f in files]
            if held or self.index in (record.get("gpus") or []):
                what = record.get("name") or "?"
                out.append(
                    {
                        "kind": "process",
                        "pid": pid,
                        "words": "%d %s (%s) holds %s"
                        % (pid, what, record.get("kind"), ", ".join(held) or "GPU memory"),
                    }
                )
        if preflight.get("mig"):
            out.append({"kind": "mig", "words": "MIG mode is enabled on this GPU"})
        if preflight.get("display_active"):
            out.append({"kind": "display", "words": "a display is active on this GPU"})
        peers = preflight.get("nvlink_peers") or []
        if peers:
            out.append(
                {
                    "kind": "nvlink",
                    "words": "NVLink peers %s would have to be reset with it" % ", ".join(peers),
                }
            )
        if getattr(self.probe, "foreign_pids", False):
            # Inside a container the probe cannot see who else uses the GPU: a reset would take
            # another guest's (or the host's) memory with it. Never from here.
            outside = (account(gpu, listed, records, prefix, True) or {}).get("outside") or 0
            words = (
                "%s used outside this container: another container or the host" % _size(outside)
                if outside
                else "not in the host's PID namespace: processes of another container or the host "
                "may use this GPU, and none of them can be seen from here"
            )
            out.append({"kind": "outside", "words": words + "; reset it from the host"})
        if self.probe.reader.name == "nvml" and os.geteuid() != 0:
            out.append({"kind": "root", "words": "a GPU reset needs root (sudo = true in the host config)"})
        return out

    def run_ladder(self):
        # type: () -> Dict[str, Any]
        """The reset from its blockers to its `done` event: refused while anything blocks it (or a
        dry run), else persistence mode off, the reset, the wait for idle memory, persistence back."""
        gpus = dict((g["index"], g) for g in self.probe.read_gpus()[0])
        gpu = gpus.get(self.index)
        if gpu is None:
            return self.done(REFUSED, "no GPU %s here" % self.index, blockers=[])
        preflight = self.probe.reader.preflight().get(self.index) or {}
        blockers = self.blockers(gpu, preflight)
        persistence = preflight.get("persistence")
        ladder = (["turn persistence mode off"] if persistence else []) + [
            "reset GPU %d" % self.index,
            "verify its memory is back at idle (up to %g s)" % VERIFY_S,
        ]
        if persistence:
            ladder.append("turn persistence mode back on")
        self.event(
            "blockers",
            "blocked" if blockers else "none",
            ("blocked by: " + "; ".join(b["words"] for b in blockers))
            if blockers
            else "nothing blocks a reset",
            data={"blockers": blockers, "ladder": ladder, "memory_before": gpu.get("memory_used")},
        )
        if self.dry_run:
            return self.done(DRY_RUN, "dry run: nothing done", blockers=blockers, ladder=ladder)
        if blockers:
            return self.done(
                REFUSED, "refused: %s remain" % count(len(blockers), "blocker"), blockers=blockers
            )
        if self.cancel_requested():
            return self.done(NOT_RESET, "cancelled by the app (%s): nothing done" % self.cancelled)
        changed = []  # type: List[str]
        if persistence:
            ok, words = self.probe.reader.set_persistence(self.index, False)
            self.event("persistence", "off" if ok else "failed", words)
            if not ok:
                return self.done(NOT_RESET, "persistence mode could not be turned off: " + words)
            changed.append("persistence")
        ok, words = False, ""
        back = None  # type: Optional[float]
        try:
            if not self.cancel_requested():
                ok, words = self.probe.reader.reset(self.index)
                self.event("reset", "done" if ok else "failed", words)
                back = self.verify(gpu) if ok else None
        finally:
            if "persistence" in changed:
                restored, again = self.probe.reader.set_persistence(self.index, True)
                self.event("persistence", "on" if restored else "failed", again)
        if self.cancelled is not None and not ok:
            return self.done(NOT_RESET, "cancelled by the app (%s): no reset" % self.cancelled)
        if not ok:
            return self.done(NOT_RESET, "the reset failed: " + words)
        if back is None:
            return self.done(NOT_RESET, "reset, but the memory is not back at idle after %g s" % VERIFY_S)
        return self.done(
            RESET, "GPU %d reset: memory back at idle in %s" % (self.index, took(back)), memory_after=0
        )

    def verify(self, before):
        # type: (Dict[str, Any]) -> Optional[float]
        """Poll until the GPU's memory is back at its idle baseline; ms taken, or None."""
        deadline = time.monotonic() + VERIFY_S
        started = time.monotonic()
        while time.monotonic() < deadline:
            gpus = dict((g["index"], g) for g in self.probe.read_gpus()[0])
            gpu = gpus.get(self.index)
            if gpu is not None and self.probe.gpu_is_idle(gpu):
                ms = (time.monotonic() - started) * 1e3
                self.event(
                    "verify",
                    "idle",
                    "GPU %d: memory back at idle" % self.index,
                    data={"memory_after": gpu.get("memory_used")},
                )
                return ms
            time.sleep(POLL_S)
        self.event("verify", "timeout", "GPU %d: memory not back at idle after %g s" % (self.index, VERIFY_S))
        return None

    def done(self, result, message, **data):
        # type: (str, str, Any) -> Dict[str, Any]
        data["ok"] = result in (RESET, DRY_RUN)
        return self.event("done", result, message, data=data)


def execute(probe, record, emit, stop_requested=None):
    # type: (Any, Dict[str, Any], Callable[[Dict[str, Any]], None], Optional[Callable[[], Optional[str]]]) -> Optional[Dict[str, Any]]
    """Run one `reset` record to its end (a read-only probe refuses it). `stop_requested` says why
    the app has cancelled it, once it has (as a plan's)."""
    reset_id = record.get("id")
    if not isinstance(reset_id, str) or not 0 < len(reset_id) <= 64:
        emit(error("bad-message", "a reset needs an 'id' string of 1 to 64 characters"))
        return None
    index = record.get("gpu")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        emit(error("bad-message", "a reset names its GPU: 'gpu', an NVML index", reset_id))
        return None
    if probe.read_only:
        emit(error("read-only", "this probe runs read-only: resets are refused", reset_id))
        return None
    run = Reset(probe, record, emit, stop_requested)
    try:
        return run.run_ladder()
    except Exception as exc:  # a bug must end the ladder visibly, not kill the probe
        return run.done(
            ERROR, "reset %s failed inside the probe: %s: %s" % (reset_id, type(exc).__name__, exc)
        )

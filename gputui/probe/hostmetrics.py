"""The host's own load, for the host header and the fleet table: CPU %, load average, RAM, swap, uptime.

Read from /proc in one pass per sample (docs/PROTOCOL.md, `sample.host`): `/proc/stat`'s first line
(CPU % is the busy share of all CPUs between two readings, so the first one is taken when the probe
starts), `/proc/loadavg`, `/proc/meminfo` (used = MemTotal - MemAvailable, as `free` says) and
`/proc/uptime`. Each file stays open and is read again with one pread() of a few KB: tens of microseconds in all
(bench/sample_cost.py).
A value that cannot be read, or that is outside wire.HOST_LIMITS, is null: never an error.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import os
from typing import Any, Dict, List, Optional, Tuple  # noqa: F401  (type comments)

from .procfs import PROC, close_quietly
from .wire import HOST_LIMITS

CHUNK = 1 << 16  # /proc/stat of a 256-CPU host is ~30 KB: one read, rarely two
MEMINFO = {
    b"MemTotal:": "mem_total",
    b"MemAvailable:": "mem_available",
    b"SwapTotal:": "swap_total",
    b"SwapFree:": "swap_free",
}


class _ProcFile(object):
    """A /proc file kept open and read again from offset 0 each time (pread: the kernel makes the
    text anew), which saves the open and close: a third of the cost of opening it every sample."""

    __slots__ = ("fd", "path")

    def __init__(self, path):
        # type: (str) -> None
        self.path = path
        self.fd = None  # type: Optional[int]

    def read(self):
        # type: () -> Optional[bytes]
        for _ in range(2):  # a stale descriptor is reopened once
            try:
                if self.fd is None:
                    self.fd = os.open(self.path, os.O_RDONLY)
                parts = []
                offset = 0
                while True:
                    data = os.pread(self.fd, CHUNK, offset)
                    if not data:
                        break
                    parts.append(data)
                    offset += len(data)
                return b"".join(parts)
            except OSError:
                self.close()
        return None

    def close(self):
        # type: () -> None
        if self.fd is not None:
            close_quietly(self.fd)
            self.fd = None


def parse_stat(data):
    # type: (bytes) -> Tuple[Optional[Tuple[int, int]], Optional[int]]
    """((busy ticks, total ticks) of all CPUs, online CPUs) from /proc/stat's text.

    The first line is `cpu  user nice system idle iowait irq softirq steal guest guest_nice`; idle
    and iowait are not busy; guest time is already counted in user, so it is left out of the total."""
    end = data.find(b"\n")
    first = data[:end] if end >= 0 else data
    ticks = None  # type: Optional[Tuple[int, int]]
    fields = first.split()
    if len(fields) >= 5 and fields[0] == b"cpu":
        try:
            numbers = [int(f) for f in fields[1:9]]
        except ValueError:
            numbers = []
        if len(numbers) >= 4:
            total = sum(numbers)
            idle = numbers[3] + (numbers[4] if len(numbers) > 4 else 0)
            ticks = (total - idle, total)
    cpus = data.count(b"\ncpu")  # the per-CPU lines: cpu0, cpu1, ... (online CPUs only)
    return ticks, cpus or None


def parse_meminfo(data):
    # type: (bytes) -> Dict[str, int]
    """The MEMINFO fields of /proc/meminfo, in bytes (the file says kB, meaning KiB). Each is found
    by its name at a line's start, not by splitting every line: a third of the cost."""
    out = {}  # type: Dict[str, int]
    for key, name in MEMINFO.items():
        at = data.find(b"\n" + key)
        if at < 0:
            if not data.startswith(key):
                continue
            at = 0
        else:
            at += 1
        end = data.find(b"\n", at)
        parts = data[at : end if end >= 0 else len(data)].split()
        try:
            out[name] = int(parts[1]) * (1024 if parts[2:3] == [b"kB"] else 1)
        except (IndexError, ValueError):
            continue
    return out


def _floats(data, n):
    # type: (Optional[bytes], int) -> List[Optional[float]]
    """The first `n` numbers of a one-line /proc file (`/proc/loadavg`, `/proc/uptime`); None for
    each one missing or unreadable."""
    words = data.split(None, n)[:n] if data else []
    out = []  # type: List[Optional[float]]
    for i in range(n):
        try:
            out.append(float(words[i]))
        except (IndexError, ValueError):
            out.append(None)
    return out


def bounded(record):
    # type: (Dict[str, Any]) -> Dict[str, Any]
    """`record` with every value outside wire.HOST_LIMITS (or of the wrong type) made null."""
    out = {}  # type: Dict[str, Any]
    for name, (low, high, kind) in HOST_LIMITS.items():
        value = record.get(name)
        number = not isinstance(value, bool) and isinstance(value, int if kind is int else (int, float))
        # NaN fails the comparison too.
        out[name] = value if number and low <= value <= high else None
    return out


class HostMetrics(object):
    """Reads the host's metrics; keeps the last /proc/stat reading for the next CPU %."""

    def __init__(self, proc=PROC):
        # type: (str) -> None
        self._stat, self._meminfo, self._loadavg, self._uptime = (
            _ProcFile(proc + "/" + name) for name in ("stat", "meminfo", "loadavg", "uptime")
        )
        self._ticks = None  # type: Optional[Tuple[int, int]]
        self._percent = None  # type: Optional[float]
        self.read()  # the first reading: CPU % needs two

    def close(self):
        # type: () -> None
        for f in (self._stat, self._meminfo, self._loadavg, self._uptime):
            f.close()

    def read(self):
        # type: () -> Dict[str, Any]
        cpu_percent = None  # type: Optional[float]
        cpus = None  # type: Optional[int]
        stat = self._stat.read()
        if stat is not None:
            ticks, cpus = parse_stat(stat)
            before = self._ticks
            if ticks is None or before is None or ticks[1] < before[1]:
                self._ticks, self._percent = ticks, None  # the first reading, or the counters went back
            elif ticks[1] > before[1]:
                busy = max(0, ticks[0] - before[0])
                self._ticks = ticks
                self._percent = round(min(100.0, 100.0 * busy / (ticks[1] - before[1])), 1)
            elif self._percent is None and ticks[1] > 0:
                # No tick since the first reading (the first sample comes within 10 ms of the
                # probe's start on a quick host): the average since boot, until the next tick.
                self._percent = round(min(100.0, 100.0 * max(0, ticks[0]) / ticks[1]), 1)
            # else no tick since the last reading (a sample asked for at once): the same figure
            cpu_percent = self._percent
        mem = parse_meminfo(self._meminfo.read() or b"")
        total, available = mem.get("mem_total"), mem.get("mem_available")
        swap_total, swap_free = mem.get("swap_total"), mem.get("swap_free")
        load1, load5, load15 = _floats(self._loadavg.read(), 3)
        return bounded(
            {
                "cpu_percent": cpu_percent,
                "cpus": cpus,
                "load1": load1,
                "load5": load5,
                "load15": load15,
                "memory_total": total,
                "memory_used": total - available
                if total is not None and available is not None and available <= total
                else None,
                "swap_total": swap_total,
                "swap_used": swap_total - swap_free
                if swap_total is not None and swap_free is not None and swap_free <= swap_total
                else None,
                "uptime": _floats(self._uptime.read(), 1)[0],
            }
        )

"""A GPU's last N readings, as a deque(maxlen=N) of them keeps them, in one block of bytes.

A GPU's history (gputui/fleet/session.py GpuHistory) keeps 300 samples of five readings: utilization,
memory, temperature, power and the sample's time. In deques, each reading is a float object of its
own (32 bytes with its slot): 48 KB a GPU, 790 MB for the 16,384 GPUs of 4,096 hosts.
Five arrays, each reading in steps of what it can say, were 3 KB a GPU, but five appends a sample
and fifteen objects for each to touch: at 4,096 hosts each of them is out of the CPU's caches by
the time its next sample comes. So a sample is one row of ten bytes (`ROW`), written in one call,
in one `bytearray` made at its full size:
- utilization: a whole percent (NVML's), 1 byte;
- memory: a hundredth of a percent, 2 bytes;
- temperature: a degree (NVML's), 1 byte; a missing reading is the type's largest number;
- power: a tenth of a watt, 2 bytes; likewise;
- time: seconds from `base` as a 4-byte float (seconds since the epoch, which it cannot hold to the
  second). The base moves to the newest time once one is REBASE seconds away, and every row's offset
  with it, so a time reads back to within a millisecond or so; a ring spanning days (samples an hour
  apart), within a tenth of a second.
A reading out of its range is kept at its edge (and a reading is never kept as a missing one). The
columns are read back oldest first, as lists (the screens read them for the GPUs they show).

The same ring, with rows of its own, keeps a host's CPU and memory (`HostReadings`, 8 bytes a
sample: 2.4 KB a host, 10 MB for 4,096) and a process's GPU memory, SM, CPU and RSS
(`ProcReadings`, 17 bytes a sample). Processes come and go and a host may run hundreds, so their
rings are kept for a bounded number (`ProcHistories`: the `limit` that hold the most GPU memory,
then the busiest on the CPU), and only on the hosts the fleet records processes for
(gputui/fleet/fleet.py says which).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

__all__ = ["REBASE", "ROW", "HostReadings", "ProcHistories", "ProcReadings", "Readings", "Ring"]

ROW = struct.Struct("<BHBHf")  # utilization, memory, temperature, power, time offset: 10 bytes
_U8, _U16, _U32 = 0xFF, 0xFFFF, 0xFFFFFFFF  # the largest number of each; a missing reading is it
_MIB = 1 << 20
REBASE = 4096.0  # seconds a time may be from the base before the base moves
_FAR = 1e38  # a 4-byte float's reach, near enough: an offset moved past it is kept at it


class Ring:
    """The last `size` rows of `ROW` (whose last field is the time's offset from `base`), oldest first."""

    __slots__ = ("_count", "_data", "_start", "base", "size")
    ROW: ClassVar[struct.Struct] = ROW

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("a ring holds at least one sample")
        self.size = size
        self._data = bytearray(size * self.ROW.size)  # at its full size: full within `size` samples
        self._count = 0
        self._start = 0  # the oldest row, once the ring is full
        self.base = 0.0

    def _put(self, time: float, *fields: int | float) -> None:
        """One row: `fields` (each already within its type's range) and the time it was read."""
        if not self._count:
            self.base = time
        offset = time - self.base
        if not -REBASE <= offset <= REBASE:
            self._rebase(time)
            offset = 0.0
        if self._count < self.size:
            at = self._count
            self._count += 1
        else:
            at = self._start
            self._start = (at + 1) % self.size
        self.ROW.pack_into(self._data, at * self.ROW.size, *fields, offset)

    def _rebase(self, time: float) -> None:
        """Move the base to `time`, and every row's offset with it."""
        shift, data, row = time - self.base, self._data, self.ROW
        for at in range(self._count):
            *fields, offset = row.unpack_from(data, at * row.size)
            row.pack_into(data, at * row.size, *fields, max(-_FAR, min(_FAR, offset - shift)))
        self.base = time

    def _rows(self) -> Iterator[tuple[Any, ...]]:
        data, width = self._data, self.ROW.size
        cut = self._start * width
        rows = data[cut : self._count * width] + data[:cut]
        return self.ROW.iter_unpack(rows)

    @property
    def times(self) -> list[float]:
        base = self.base
        return [base + r[-1] for r in self._rows()]

    def clear(self) -> None:
        self._count = self._start = 0

    @property
    def count(self) -> int:
        """How many samples it holds (at most `size`)."""
        return self._count

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._count} of {self.size} samples)"


class Readings(Ring):
    """The last `size` samples' readings of one GPU, oldest first."""

    __slots__ = ()

    def append(
        self, util: float, memory: float, temperature: float | None, power: float | None, time: float
    ) -> None:
        """One sample's readings: utilization and memory in percent, temperature (°C) and power (W)
        or None where the driver gave none, and the sample's time (seconds since the epoch)."""
        # Each the nearest whole number of its steps within its range, written out here rather than
        # by a helper a reading: every GPU takes one row a sample. NaN fails every
        # comparison, so it is looked for first (round() refuses it).
        u = _U8 if util != util else 0 if util <= 0 else _U8 if util >= _U8 else round(util)
        hundredths = memory * 100.0
        m = (
            _U16
            if hundredths != hundredths
            else 0
            if hundredths <= 0
            else _U16
            if hundredths >= _U16
            else round(hundredths)
        )
        if temperature is None or temperature != temperature:
            t = _U8
        else:
            t = 0 if temperature <= 0 else _U8 - 1 if temperature >= _U8 - 1 else round(temperature)
        if power is None or power != power:
            p = _U16
        else:
            tenths = power * 10.0
            p = 0 if tenths <= 0 else _U16 - 1 if tenths >= _U16 - 1 else round(tenths)
        self._put(time, u, m, t, p)

    @property
    def util(self) -> list[float]:
        return [float(r[0]) for r in self._rows()]

    @property
    def memory(self) -> list[float]:
        return [r[1] * 0.01 for r in self._rows()]

    @property
    def temperature(self) -> list[float | None]:
        return [None if r[2] == _U8 else float(r[2]) for r in self._rows()]

    @property
    def power(self) -> list[float | None]:
        return [None if r[3] == _U16 else r[3] * 0.1 for r in self._rows()]


def _scaled(value: float | None, step: float, top: int) -> int:
    """`value` in whole `step`s within 0..top-1; `top` where it is missing (None or NaN)."""
    if value is None or value != value:
        return top
    steps = value / step
    return 0 if steps <= 0 else top - 1 if steps >= top - 1 else round(steps)


class HostReadings(Ring):
    """A host's CPU (busy share of all its CPUs) and memory (used share), in percent, or None where
    the sample gave none: a hundredth of a percent in 2 bytes each, 8 bytes a sample."""

    __slots__ = ()
    ROW: ClassVar[struct.Struct] = struct.Struct("<HHf")

    def append(self, cpu: float | None, memory: float | None, time: float) -> None:
        self._put(time, _scaled(cpu, 0.01, _U16), _scaled(memory, 0.01, _U16))

    @property
    def cpu(self) -> list[float | None]:
        return [None if r[0] == _U16 else r[0] * 0.01 for r in self._rows()]

    @property
    def memory(self) -> list[float | None]:
        return [None if r[1] == _U16 else r[1] * 0.01 for r in self._rows()]


class ProcReadings(Ring):
    """A process's GPU memory (bytes, in MiB steps), SM (percent, its highest over its GPUs), CPU
    (percent of one core) and RSS (bytes, in MiB steps), each None where the sample gave none."""

    __slots__ = ()
    ROW: ClassVar[struct.Struct] = struct.Struct("<IBfIf")  # 17 bytes

    def append(
        self, gpu_memory: int | None, sm: float | None, cpu: float | None, rss: int | None, time: float
    ) -> None:
        cpu_kept = float("nan") if cpu is None or cpu != cpu else max(0.0, min(cpu, 1e9))
        self._put(
            time,
            _scaled(gpu_memory, _MIB, _U32),
            _scaled(sm, 1.0, _U8),
            cpu_kept,
            _scaled(rss, _MIB, _U32),
        )

    @property
    def gpu_memory(self) -> list[float | None]:
        return [None if r[0] == _U32 else float(r[0] * _MIB) for r in self._rows()]

    @property
    def sm(self) -> list[float | None]:
        return [None if r[1] == _U8 else float(r[1]) for r in self._rows()]

    @property
    def cpu(self) -> list[float | None]:
        return [None if r[2] != r[2] else r[2] for r in self._rows()]

    @property
    def rss(self) -> list[float | None]:
        return [None if r[3] == _U32 else float(r[3] * _MIB) for r in self._rows()]


# One process as ProcHistories takes it: its key (PID, start time), GPU memory, SM, CPU and RSS.
ProcReading = tuple[Any, int | None, float | None, float | None, int | None]


class ProcHistories:
    """The rings of at most `limit` processes of one host, `size` samples each.

    Each sample, the `limit` processes that hold the most GPU memory (then the busiest on the CPU)
    are recorded; a process that leaves that set keeps its ring while there is room (its detail can
    still show how it ended), the longest unseen going first. At most `limit` rings: 17 bytes a
    sample each, 5.1 KB at 300 samples."""

    __slots__ = ("_rings", "_seen", "limit", "size")

    def __init__(self, limit: int, size: int) -> None:
        self.limit, self.size = limit, size
        self._rings: dict[Any, ProcReadings] = {}
        self._seen: dict[Any, float] = {}  # the time each was last recorded

    def observe(self, readings: Iterable[ProcReading], time: float) -> None:
        ranked = sorted(readings, key=lambda r: (-(r[1] or 0), -(r[3] or 0.0)))[: self.limit]
        for key, gpu_memory, sm, cpu, rss in ranked:
            ring = self._rings.get(key)
            if ring is None:
                self._make_room()
                ring = self._rings[key] = ProcReadings(self.size)
            ring.append(gpu_memory, sm, cpu, rss, time)
            self._seen[key] = time

    def _make_room(self) -> None:
        while len(self._rings) >= self.limit:
            oldest = min(self._seen, key=self._seen.__getitem__)
            del self._rings[oldest], self._seen[oldest]

    def get(self, key: Any) -> ProcReadings | None:
        return self._rings.get(key)

    def clear(self) -> None:
        self._rings.clear()
        self._seen.clear()

    def __len__(self) -> int:
        return len(self._rings)

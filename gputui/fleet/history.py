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
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

__all__ = ["REBASE", "ROW", "Readings"]

ROW = struct.Struct("<BHBHf")  # utilization, memory, temperature, power, time offset: 10 bytes
_U8, _U16 = 0xFF, 0xFFFF  # the largest number of each; a missing temperature or power is it
REBASE = 4096.0  # seconds a time may be from the base before the base moves
_FAR = 1e38  # a 4-byte float's reach, near enough: an offset moved past it is kept at it


class Readings:
    """The last `size` samples' readings of one GPU, oldest first."""

    __slots__ = ("_count", "_data", "_start", "base", "size")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("a ring holds at least one sample")
        self.size = size
        self._data = bytearray(size * ROW.size)  # at its full size: it is full within `size` samples
        self._count = 0
        self._start = 0  # the oldest row, once the ring is full
        self.base = 0.0

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
        ROW.pack_into(self._data, at * ROW.size, u, m, t, p, offset)

    def _rebase(self, time: float) -> None:
        """Move the base to `time`, and every row's offset with it."""
        shift, data, width = time - self.base, self._data, ROW.size
        for at in range(self._count):
            u, m, t, p, offset = ROW.unpack_from(data, at * width)
            ROW.pack_into(data, at * width, u, m, t, p, max(-_FAR, min(_FAR, offset - shift)))
        self.base = time

    def _rows(self) -> Iterator[tuple[int, int, int, int, float]]:
        data, cut = self._data, self._start * ROW.size
        rows = data[cut : self._count * ROW.size] + data[:cut]
        return ROW.iter_unpack(rows)

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

    @property
    def times(self) -> list[float]:
        base = self.base
        return [base + r[4] for r in self._rows()]

    def clear(self) -> None:
        self._count = self._start = 0

    @property
    def count(self) -> int:
        """How many samples it holds (at most `size`)."""
        return self._count

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._count} of {self.size} samples)"

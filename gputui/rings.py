"""Rings: the last N numbers appended, as a deque(maxlen=N) keeps them, in an array.

A GPU's history (gputui/fleet.py GpuHistory) keeps 300 readings of five kinds. In deques, each
reading is a float object of its own (32 bytes with its slot): 48 KB a GPU, 790 MB for the 16,384
GPUs of 4,096 hosts (issue 21). In an array a reading is 4 bytes (8 for a time): 6 KB a GPU; in
steps of what the reading can say (a whole percent of utilization, a degree, a tenth of a watt),
1 or 2 bytes: 3 KB a GPU.
`Ring` holds numbers; `GapRing` readings that may be missing (a temperature, a power draw), kept
as NaN (in steps: the type's largest number) and read back as None; `TimeRing` times (seconds
since the epoch, which a 4-byte float cannot hold to the second), kept as 4-byte offsets from a
base it moves now and then. A ring in steps (`step`, an integer typecode) keeps each number as the
nearest whole number of steps, within 0 and the type's largest (a reading out of that range is
kept at its edge).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

__all__ = ["GapRing", "Ring", "TimeRing"]


_TOPS = {"B": 0xFF, "H": 0xFFFF}  # the integer typecodes a ring in steps may use: their largest


class _Ring:
    __slots__ = ("_data", "_start", "_step", "_top", "size")
    _gaps = False  # a GapRing: in steps, the top number is a missing reading

    def __init__(self, size: int, typecode: str = "f", step: float | None = None) -> None:
        """Up to `size` numbers, oldest first; appending to a full ring drops the oldest. `typecode`:
        "f" (4 bytes, ~7 significant digits: readings) or "d" (8 bytes: times); with `step`, "B" (1
        byte) or "H" (2 bytes): each number kept as a whole number of steps."""
        if size < 1:
            raise ValueError("a ring holds at least one number")
        if (step is None) != (typecode not in _TOPS) or (step is not None and step <= 0):
            raise ValueError("an integer typecode (B, H) takes a step above 0; f and d take none")
        self._data: array[Any] = array(typecode)
        self._start = 0  # where the oldest number is, once the ring is full
        self._step = step
        self._top = _TOPS.get(typecode, 0)  # in steps: the largest number kept
        self.size = size

    def _put(self, value: float) -> None:
        """Append `value` as the array keeps it (in steps: the nearest whole number of steps, kept
        within 0 and the type's largest; NaN, a GapRing's missing reading, as the largest). Every
        GPU's five rings take one each sample: written out in one method (issue 21)."""
        step = self._step
        if step is not None:
            top = self._top
            if value != value:  # NaN
                value = top
            else:
                most = top - 1 if self._gaps else top  # (a reading is never taken for a missing one)
                steps = value / step
                value = 0 if steps <= 0 else most if steps >= most else round(steps)  # (and the infinities)
        data = self._data
        if len(data) < self.size:
            data.append(value)
        else:
            data[self._start] = value
            self._start = (self._start + 1) % self.size

    def _numbers(self) -> Iterator[float]:
        data, start, step = self._data, self._start, self._step
        if step is None:
            yield from data[start:]
            yield from data[:start]
        else:
            gap = self._top if self._gaps else None
            for part in (data[start:], data[:start]):
                yield from (math.nan if v == gap else v * step for v in part)

    def _at(self, index: int) -> float:
        n = len(self._data)
        if not -n <= index < n:
            raise IndexError("ring index out of range")
        value: float = self._data[(self._start + index) % n]
        if self._step is None:
            return value
        return math.nan if self._gaps and value == self._top else value * self._step

    def clear(self) -> None:
        del self._data[:]
        self._start = 0

    def __len__(self) -> int:
        return len(self._data)


class Ring(_Ring, Sequence[float]):
    """The last `size` numbers appended."""

    __slots__ = ()

    append = _Ring._put  # (one call, not two: every GPU's history takes five readings a sample)

    def extend(self, values: Iterable[float]) -> None:
        for value in values:
            self._put(value)

    def __iter__(self) -> Iterator[float]:
        return self._numbers()

    @overload
    def __getitem__(self, index: int) -> float: ...
    @overload
    def __getitem__(self, index: slice) -> list[float]: ...
    def __getitem__(self, index: int | slice) -> float | list[float]:
        if isinstance(index, slice):
            return list(self)[index]
        return self._at(index)

    def __repr__(self) -> str:
        return f"Ring({list(self)!r}, size={self.size})"


class GapRing(_Ring, Sequence[float | None]):
    """The last `size` readings appended, None for a missing one."""

    __slots__ = ()
    _gaps = True

    def append(self, value: float | None) -> None:
        self._put(math.nan if value is None else value)

    def extend(self, values: Iterable[float | None]) -> None:
        for value in values:
            self.append(value)

    def __iter__(self) -> Iterator[float | None]:
        return (None if math.isnan(v) else v for v in self._numbers())

    @overload
    def __getitem__(self, index: int) -> float | None: ...
    @overload
    def __getitem__(self, index: slice) -> list[float | None]: ...
    def __getitem__(self, index: int | slice) -> float | list[float | None] | None:
        if isinstance(index, slice):
            return list(self)[index]
        value = self._at(index)
        return None if math.isnan(value) else value

    def __repr__(self) -> str:
        return f"GapRing({list(self)!r}, size={self.size})"


class TimeRing(Ring):
    """The last `size` times appended (seconds), each as a 4-byte offset from `base`: 1.2 KB for 300
    where 8-byte floats take 2.4 (16,384 GPUs' histories: 20 MB). The offsets stay small (the base
    moves to the newest time once one is REBASE seconds away, and every offset with it), so a time
    reads back to within a millisecond or so; a ring spanning days (samples an hour apart), within
    a tenth of a second."""

    __slots__ = ("base",)
    REBASE = 4096.0

    def __init__(self, size: int) -> None:
        super().__init__(size, "f")
        self.base = 0.0

    def append(self, value: float) -> None:
        if not self._data:
            self.base = value
        offset = value - self.base
        if abs(offset) > self.REBASE:
            shift = offset
            self._data = array("f", (v - shift for v in self._data))
            self.base = value
            offset = 0.0
        self._put(offset)

    def extend(self, values: Iterable[float]) -> None:
        for value in values:
            self.append(value)

    def _numbers(self) -> Iterator[float]:
        base = self.base
        return (base + v for v in super()._numbers())

    def _at(self, index: int) -> float:
        return self.base + super()._at(index)

    def __repr__(self) -> str:
        return f"TimeRing({list(self)!r}, size={self.size})"

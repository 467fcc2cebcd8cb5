"""Rings: the last N numbers appended, as a deque(maxlen=N) keeps them, in an array.

A GPU's history (gputui/fleet.py GpuHistory) keeps 300 readings of five kinds. In deques, each
reading is a float object of its own (32 bytes with its slot): 48 KB a GPU, 790 MB for the 16,384
GPUs of 4,096 hosts (issue 21). In an array a reading is 4 bytes (8 for a time): 7 KB a GPU.
`Ring` holds numbers; `GapRing` readings that may be missing (a temperature, a power draw), kept
as NaN and read back as None; `TimeRing` times (seconds since the epoch, which a 4-byte float
cannot hold to the second), kept as 4-byte offsets from a base it moves now and then.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

__all__ = ["GapRing", "Ring", "TimeRing"]


class _Ring:
    __slots__ = ("_data", "_start", "size")

    def __init__(self, size: int, typecode: str = "f") -> None:
        """Up to `size` numbers, oldest first; appending to a full ring drops the oldest. `typecode`:
        "f" (4 bytes, ~7 significant digits: readings) or "d" (8 bytes: times)."""
        if size < 1:
            raise ValueError("a ring holds at least one number")
        self._data: array[float] = array(typecode)
        self._start = 0  # where the oldest number is, once the ring is full
        self.size = size

    @property
    def maxlen(self) -> int:
        return self.size

    def _put(self, value: float) -> None:
        data = self._data
        if len(data) < self.size:
            data.append(value)
        else:
            data[self._start] = value
            self._start = (self._start + 1) % self.size

    def _numbers(self) -> Iterator[float]:
        data, start = self._data, self._start
        yield from data[start:]
        yield from data[:start]

    def _at(self, index: int) -> float:
        n = len(self._data)
        if not -n <= index < n:
            raise IndexError("ring index out of range")
        return self._data[(self._start + index) % n]

    def clear(self) -> None:
        del self._data[:]
        self._start = 0

    def __len__(self) -> int:
        return len(self._data)


class Ring(_Ring, Sequence[float]):
    """The last `size` numbers appended."""

    __slots__ = ()

    def append(self, value: float) -> None:
        self._put(value)

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

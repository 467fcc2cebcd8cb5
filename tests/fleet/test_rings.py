"""Rings keep the last N numbers as a deque(maxlen=N) does (GPU histories, issue 21)."""

from __future__ import annotations

import copy
import math
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.rings import GapRing, Ring, TimeRing


@settings(max_examples=200, deadline=None, database=None)
@given(st.integers(1, 12), st.lists(st.one_of(st.none(), st.integers(-300, 300).map(float)), max_size=60))
def test_a_ring_reads_as_a_deque_of_the_same_size(size, values):
    numbers = [0.0 if v is None else v for v in values]
    ring, gaps = Ring(size, "d"), GapRing(size, "d")
    ring.extend(numbers)
    gaps.extend(values)
    assert list(ring) == list(deque(numbers, maxlen=size))
    assert list(gaps) == list(deque(values, maxlen=size))
    assert len(ring) == min(size, len(values)) and bool(ring) == bool(values)
    for i in range(-len(ring), len(ring)):
        assert ring[i] == list(ring)[i] and gaps[i] == list(gaps)[i]
    assert ring[-3:] == list(ring)[-3:]
    frozen = copy.deepcopy(gaps)
    gaps.append(1.5)
    assert list(frozen) == list(deque(values, maxlen=size))  # a copy does not move with the ring
    ring.clear()
    assert not ring and list(ring) == []


def test_out_of_range_and_missing_values():
    ring = Ring(3)
    with pytest.raises(IndexError):
        ring[0]
    ring.extend([1.0, 2.0])
    with pytest.raises(IndexError):
        ring[2]
    gaps = GapRing(2)
    gaps.append(None)
    gaps.append(math.nan)  # a NaN reading is no reading
    assert list(gaps) == [None, None]
    with pytest.raises(ValueError):
        Ring(0)


@settings(max_examples=100, deadline=None, database=None)
@given(st.integers(1, 300), st.floats(1e9, 2e9), st.lists(st.floats(0.0, 3600.0), min_size=1, max_size=700))
def test_times_read_back_to_a_millisecond_as_the_ring_moves_on(size, start, steps):
    ring, times, now = TimeRing(size), deque(maxlen=size), start
    for step in steps:
        now += step
        ring.append(now)
        times.append(now)
    assert len(ring) == len(times)
    # Within a millisecond while the ring spans an hour or so; a day-long span, a tenth of a second.
    span = times[-1] - times[0]
    assert all(abs(a - b) <= max(1e-3, span * 1e-6) for a, b in zip(ring, times, strict=True))
    assert abs(ring[-1] - times[-1]) <= max(1e-3, span * 1e-6)

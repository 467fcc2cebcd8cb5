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


@settings(max_examples=200, deadline=None, database=None)
@given(
    st.integers(1, 12),
    st.sampled_from([("B", 1.0), ("H", 0.01), ("H", 0.1)]),
    st.lists(
        st.one_of(st.none(), st.floats(-50, 7000, allow_nan=False), st.sampled_from([math.inf, -math.inf])),
        max_size=40,
    ),
)
def test_a_ring_in_steps_keeps_each_reading_to_half_a_step_within_its_range(size, kind, values):
    typecode, step = kind
    top = {"B": 255, "H": 65535}[typecode]
    ring, gaps = Ring(size, typecode, step), GapRing(size, typecode, step)
    for v in values:
        ring.append(0.0 if v is None else v)
        gaps.append(v)

    def kept(v: float | None, most: int) -> float | None:
        return None if v is None else min(max(v, 0.0), most * step)

    want_ring = [kept(0.0 if v is None else v, top) for v in deque(values, maxlen=size)]
    want_gaps = [kept(v, top - 1) for v in deque(values, maxlen=size)]
    assert all(abs(a - b) <= step / 2 + 1e-9 for a, b in zip(ring, want_ring, strict=True))
    for got, want in zip(gaps, want_gaps, strict=True):
        assert (got is None) == (want is None)  # a missing reading stays missing, and only it
        assert got is None or abs(got - want) <= step / 2 + 1e-9
    for i in range(-len(gaps), len(gaps)):
        assert gaps[i] == list(gaps)[i] and ring[i] == list(ring)[i]


def test_a_ring_in_steps_takes_an_integer_type_and_a_step_and_nothing_else():
    for typecode, step in (("f", 0.1), ("B", None), ("H", 0.0), ("d", 1.0)):
        with pytest.raises(ValueError):
            Ring(4, typecode, step)


def test_a_gpus_full_history_is_three_kilobytes_of_numbers():
    """What issue 21's 4,096 hosts keep per GPU: 300 readings of utilization (1 byte), memory (2),
    temperature (1), power (2) and time (4)."""
    from gputui.fleet import HISTORY, GpuHistory

    history = GpuHistory()
    for i in range(HISTORY + 8):  # (the last one odd: a temperature)
        history.util.append(93)
        history.memory.append(84.0432)
        history.temperature.append(64 if i % 2 else None)
        history.power.append(635.14)
        history.times.append(1_800_000_000.0 + i)
    rings = (history.util, history.memory, history.temperature, history.power, history.times)
    sizes = [r._data.buffer_info()[1] * r._data.itemsize for r in rings]
    assert sizes == [HISTORY * n for n in (1, 2, 1, 2, 4)]
    assert history.util[-1] == 93 and history.temperature[-1] == 64 and history.temperature[-2] is None
    assert abs(history.memory[-1] - 84.04) < 1e-9 and abs(history.power[-1] - 635.1) < 1e-9

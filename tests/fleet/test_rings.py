"""A GPU's readings ring keeps the last N samples as a deque(maxlen=N) does (GPU histories, issue 21)."""

from __future__ import annotations

import copy
import math
import sys
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.fleet.history import REBASE, ROW, HostReadings, ProcHistories, ProcReadings, Readings

# A reading in range, or beyond it at either end, or missing (temperature and power only).
READING = st.one_of(st.floats(-50, 7000, allow_nan=False), st.sampled_from([math.inf, -math.inf]))
MAYBE = st.one_of(st.none(), st.just(math.nan), READING)
ROWS = st.lists(st.tuples(READING, READING, MAYBE, MAYBE), max_size=40)


def kept(value: float | None, step: float, most: int) -> float | None:
    """What a reading reads back as, to within half a step: None for a missing one, else within range."""
    if value is None or value != value:
        return None
    return min(max(value, 0.0), most * step)


def close(got: float | None, want: float | None, step: float) -> bool:
    return (got is None) == (want is None) and (got is None or abs(got - want) <= step / 2 + 1e-9)  # type: ignore[operator]


@settings(max_examples=200, deadline=None, database=None)
@given(st.integers(1, 12), ROWS)
def test_each_reading_reads_back_as_a_deque_of_the_same_size_keeps_it(size, rows):
    ring = Readings(size)
    for i, (util, memory, temperature, power) in enumerate(rows):
        ring.append(util, memory, temperature, power, 1_800_000_000.0 + i)
    last = deque(rows, maxlen=size)
    assert ring.count == len(last) and len(ring.util) == len(last)
    columns = zip(ring.util, ring.memory, ring.temperature, ring.power, strict=True)
    for got, (util, memory, temperature, power) in zip(columns, last, strict=True):
        assert close(got[0], kept(util, 1.0, 255), 1.0)
        assert close(got[1], kept(memory, 0.01, 65535), 0.01)
        assert close(got[2], kept(temperature, 1.0, 254), 1.0)  # the largest number is "missing"
        assert close(got[3], kept(power, 0.1, 65534), 0.1)
    assert ring.times == [1_800_000_000.0 + i for i in range(len(rows))][-size:]
    frozen, before = copy.deepcopy(ring), ring.util
    ring.append(1.0, 2.0, 3.0, 4.0, 1_800_000_100.0)
    assert frozen.util == before and frozen.count == len(last)  # a copy does not move with the ring
    ring.clear()
    assert ring.count == 0 and ring.util == [] and ring.times == []


def test_missing_readings_and_a_ring_of_nothing():
    ring = Readings(2)
    ring.append(0.0, 0.0, None, None, 10.0)
    ring.append(0.0, 0.0, math.nan, math.nan, 11.0)  # a NaN reading is no reading
    assert ring.temperature == [None, None] and ring.power == [None, None]
    ring.append(math.nan, math.nan, 20.0, 100.0, 12.0)  # (never sent: kept at the top, not refused)
    assert ring.util == [0.0, 255.0] and ring.temperature == [None, 20.0]
    with pytest.raises(ValueError):
        Readings(0)


@settings(max_examples=100, deadline=None, database=None)
@given(st.integers(1, 300), st.floats(1e9, 2e9), st.lists(st.floats(0.0, 3600.0), min_size=1, max_size=700))
def test_times_read_back_to_a_millisecond_as_the_ring_moves_on(size, start, steps):
    ring, times, now = Readings(size), deque(maxlen=size), start
    for step in steps:
        now += step
        ring.append(50, 50.0, 60, 300.0, now)
        times.append(now)
    got = ring.times
    assert len(got) == len(times)
    # Within a millisecond while the ring spans an hour or so; a day-long span, a tenth of a second.
    span = times[-1] - times[0]
    assert all(abs(a - b) <= max(1e-3, span * 1e-6) for a, b in zip(got, times, strict=True))
    assert abs(got[-1] - times[-1]) <= max(1e-3, span * 1e-6)


def test_a_time_far_from_the_others_moves_the_base_and_keeps_them():
    ring = Readings(3)
    ring.append(1, 1.0, 1, 1.0, 1000.0)
    ring.append(2, 2.0, 2, 2.0, 1000.0 + 3 * REBASE)
    ring.append(3, 3.0, 3, 3.0, 1e300)  # a clock gone wrong: the older times are kept as far as they go
    assert ring.util == [1.0, 2.0, 3.0] and ring.times[-1] == 1e300


def test_a_gpus_full_history_is_three_kilobytes_of_numbers():
    """What issue 21's 4,096 hosts keep per GPU: 300 rows of utilization (1 byte), memory (2),
    temperature (1), power (2) and time (4), in one block made at its full size."""
    from gputui.fleet.session import HISTORY, GpuHistory

    history = GpuHistory()
    for i in range(HISTORY + 8):  # (the last one odd: a temperature)
        history.append(93, 84.0432, 64 if i % 2 else None, 635.14, 1_800_000_000.0 + i)
    assert ROW.size == 10 and len(history._data) == HISTORY * 10
    assert sys.getsizeof(history._data) < HISTORY * 10 + 100
    assert history.util[-1] == 93 and history.temperature[-1] == 64 and history.temperature[-2] is None
    assert abs(history.memory[-1] - 84.04) < 1e-9 and abs(history.power[-1] - 635.1) < 1e-9
    assert history.times[0] == 1_800_000_008.0 and history.count == HISTORY


@settings(max_examples=100, deadline=None, database=None)
@given(st.integers(1, 8), st.lists(st.tuples(MAYBE, MAYBE), max_size=30))
def test_a_hosts_cpu_and_memory_read_back_as_a_deque_keeps_them(size, rows):
    ring = HostReadings(size)
    for i, (cpu, memory) in enumerate(rows):
        ring.append(cpu, memory, 1_800_000_000.0 + i)
    last = deque(rows, maxlen=size)
    for got_cpu, got_memory, (cpu, memory) in zip(ring.cpu, ring.memory, last, strict=True):
        assert close(got_cpu, kept(cpu, 0.01, 65534), 0.01)
        assert close(got_memory, kept(memory, 0.01, 65534), 0.01)
    assert len(ring.times) == len(last)


def test_a_process_ring_keeps_its_readings_in_mib_steps_and_missing_ones_as_none():
    ring = ProcReadings(3)
    ring.append(5 * 2**30, 87.0, 250.5, 3 * 2**20 + 7, 100.0)
    ring.append(None, None, None, None, 101.0)
    ring.append(-1, math.nan, -3.0, 2**60, 102.0)  # out of range: kept at its edges
    assert ring.gpu_memory == [5 * 2**30, None, 0.0]
    assert ring.sm == [87.0, None, None]
    assert ring.cpu == [250.5, None, 0.0]
    assert ring.rss == [3 * 2**20, None, (2**32 - 2) * 2**20]
    assert ring.times == [100.0, 101.0, 102.0]


def test_process_histories_keep_the_largest_gpu_holders_and_drop_the_longest_unseen():
    rings = ProcHistories(limit=2, size=10)
    # Three processes: the two with the most GPU memory are recorded, the third is not.
    rings.observe(
        [
            ((1, 1), 2 * 2**30, 50, 1.0, 2**20),
            ((2, 1), None, None, 90.0, 2**20),
            ((3, 1), 4 * 2**30, 10, 0.0, 2**20),
        ],
        1.0,
    )
    assert rings.get((1, 1)) is not None and rings.get((3, 1)) is not None and rings.get((2, 1)) is None
    # (3, 1) exits: its ring stays while there is room; a newcomer takes the longest unseen's place.
    rings.observe([((1, 1), 2 * 2**30, 50, 1.0, 2**20)], 2.0)
    rings.observe([((1, 1), 2 * 2**30, 50, 1.0, 2**20), ((4, 1), 2**30, 0, 0.0, 2**20)], 3.0)
    assert len(rings) == 2 and rings.get((3, 1)) is None
    assert rings.get((1, 1)).count == 3 and rings.get((4, 1)).count == 1  # type: ignore[union-attr]

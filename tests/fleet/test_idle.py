"""The idle-holder tracker (gputui/fleet/idle.py) on synthetic samples: what one sample says of a process,
and how streaks start, last and end."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gputui.fleet.idle import HostIdle, IdleTracker, idle_keys, idle_now, sm_evidence, span
from gputui.model import Sample

GiB = 1 << 30
T0 = 1_800_000_000.0


def gpu(index: int, util: int | None = 0, used: int = 20 * GiB, mig: bool = False) -> dict[str, Any]:
    return {
        "index": index,
        "name": "NVIDIA H200",
        "memory_total": 141 * GiB,
        "memory_used": used,
        "memory_baseline": 0,
        "util_gpu": util,
        "mig_instances": [] if mig else None,
    }


def proc(
    pid: int,
    memory: dict[int, int | None],
    sm: dict[int, int] | None = None,
    kind: str = "user",
    elapsed: float = 3600.0,
    state: str = "S",
) -> dict[str, Any]:
    return {
        "pid": pid,
        "start_time": pid * 10,
        "name": "python",
        "command": ["python", f"job{pid}.py"],
        "user": "alice",
        "state": state,
        "kind": kind,
        "gpus": sorted(memory),
        "gpu_memory": {str(i): b for i, b in memory.items()},
        "gpu_util": None if sm is None else {str(i): {"sm": v, "mem": 0} for i, v in sm.items()},
        "elapsed": elapsed,
    }


def sample(
    t: float,
    gpus: list[dict[str, Any]],
    procs: list[dict[str, Any]],
    util: str = "on",
    age: float | None = 1.0,
) -> Sample:
    return Sample.from_wire(
        {
            "seq": int(t),
            "time": t,
            "gpus": gpus,
            "processes": procs,
            "proc_util": {"state": util, "every": 5.0, "age": age if util == "on" else None},
        }
    )


def key(pid: int) -> tuple[int, int]:
    return (pid, pid * 10)


def test_per_process_figures_decide_where_the_driver_gives_them() -> None:
    # GPU 0 is busy (90 %) with 4100; 4200 shares it and runs nothing: idle all the same.
    s = sample(T0, [gpu(0, util=90)], [proc(4100, {0: 30 * GiB}, {0: 90}), proc(4200, {0: 8 * GiB}, {0: 0})])
    busy, notebook = s.processes
    assert sm_evidence(s, busy, 0) == 90
    assert sm_evidence(s, notebook, 0) == 0
    assert idle_now(s, busy) is False
    assert idle_now(s, notebook) is True


def test_a_process_absent_from_the_drivers_figures_ran_nothing() -> None:
    # NVML lists only the processes that ran in its window: figures for GPU 0 came, none for 4200.
    s = sample(T0, [gpu(0, util=90)], [proc(4100, {0: 30 * GiB}, {0: 90}), proc(4200, {0: 8 * GiB})])
    assert idle_now(s, s.processes[1]) is True
    # ... unless it started after the reading: not read yet, and the GPU is busy: not idle.
    young = sample(
        T0, [gpu(0, util=90)], [proc(4100, {0: 30 * GiB}, {0: 90}), proc(4200, {0: GiB}, elapsed=0.5)]
    )
    assert idle_now(young, young.processes[1]) is False


def test_without_per_process_figures_the_gpus_utilization_decides() -> None:
    for state in ("off", "unsupported"):
        quiet = sample(T0, [gpu(0, util=0)], [proc(4200, {0: 8 * GiB})], util=state)
        assert idle_now(quiet, quiet.processes[0]) is True
        loud = sample(T0, [gpu(0, util=3)], [proc(4200, {0: 8 * GiB})], util=state)
        assert idle_now(loud, loud.processes[0]) is False


def test_every_gpu_it_holds_must_be_idle_and_unknown_is_not_idle() -> None:
    two = sample(T0, [gpu(0, util=0), gpu(1, util=50)], [proc(4200, {0: GiB, 1: GiB})], util="off")
    assert idle_now(two, two.processes[0]) is False
    # A GPU in MIG mode gives no utilization: nothing can be said.
    mig = sample(T0, [gpu(0, util=None, mig=True)], [proc(4200, {0: GiB})], util="off")
    assert idle_now(mig, mig.processes[0]) is None


def test_only_live_processes_listed_with_memory_are_holders() -> None:
    procs = [
        proc(1, {0: 8 * GiB}, kind="ghost"),
        proc(2, {}, kind="hidden"),
        proc(3, {}, kind="monitor"),
        proc(4, {0: 8 * GiB}, state="Z"),
        proc(5, {0: 0}),
        proc(6, {0: None}),  # listed, the driver gives no figure: it holds a context
    ]
    s = sample(T0, [gpu(0, util=0)], procs, util="off")
    assert [idle_now(s, p) for p in s.processes] == [None, None, None, None, None, True]


def test_a_streak_starts_at_the_first_idle_sample_and_lasts() -> None:
    idle = HostIdle()
    for minute in range(13):
        idle.observe(sample(T0 + 60 * minute, [gpu(0)], [proc(4200, {0: 8 * GiB}, {0: 0})]))
    assert idle.since(key(4200)) == T0
    assert idle.seconds(key(4200)) == 12 * 60
    assert idle.durations(at_least=600) == {key(4200): 720.0}
    assert idle.durations(at_least=800) == {}
    holders = idle.holders(
        "gpu001", idle_sample := sample(T0 + 720, [gpu(0)], [proc(4200, {0: 8 * GiB}, {0: 0})]), 600
    )
    assert [(h.host, h.proc.pid, h.seconds, h.memory) for h in holders] == [("gpu001", 4200, 720.0, 8 * GiB)]
    assert idle_sample.processes[0].key == key(4200)


def test_one_busy_or_unknown_sample_ends_a_streak() -> None:
    for interruption in ({0: 5}, None):
        idle = HostIdle()
        idle.observe(sample(T0, [gpu(0)], [proc(4200, {0: GiB}, {0: 0})]))
        util = "on" if interruption is not None else "off"
        gpus = [gpu(0, util=None if interruption is None else 5)]
        idle.observe(sample(T0 + 60, gpus, [proc(4200, {0: GiB}, interruption)], util=util))
        assert idle.since(key(4200)) is None
        idle.observe(sample(T0 + 120, [gpu(0)], [proc(4200, {0: GiB}, {0: 0})]))
        assert idle.since(key(4200)) == T0 + 120


def test_a_gap_in_the_samples_starts_every_streak_again() -> None:
    idle = HostIdle(max_gap=300)
    idle.observe(sample(T0, [gpu(0)], [proc(4200, {0: GiB}, {0: 0})]))
    idle.observe(sample(T0 + 299, [gpu(0)], [proc(4200, {0: GiB}, {0: 0})]))
    assert idle.since(key(4200)) == T0
    idle.observe(sample(T0 + 299 + 301, [gpu(0)], [proc(4200, {0: GiB}, {0: 0})]))
    assert idle.since(key(4200)) == T0 + 600
    # A host sampled every 10 minutes is not in a gap between two of its samples.
    slow = HostIdle(max_gap=300)
    for n in range(3):
        slow.observe(sample(T0 + 600 * n, [gpu(0)], [proc(4200, {0: GiB}, {0: 0})]), interval=600)
    assert slow.seconds(key(4200)) == 1200
    # The clock going back is a gap too.
    idle.observe(sample(T0, [gpu(0)], [proc(4200, {0: GiB}, {0: 0})]))
    assert idle.since(key(4200)) == T0


def test_a_reused_pid_is_another_process() -> None:
    idle = HostIdle()
    idle.observe(sample(T0, [gpu(0)], [proc(4200, {0: GiB}, {0: 0})]))
    other = proc(4200, {0: GiB}, {0: 0})
    other["start_time"] = 99999
    idle.observe(sample(T0 + 60, [gpu(0)], [other]))
    assert idle.since(key(4200)) is None
    assert idle.since((4200, 99999)) == T0 + 60


def test_the_fleet_tracker_keeps_hosts_apart_and_copies_stand_still() -> None:
    tracker = IdleTracker()
    a0 = sample(T0, [gpu(0)], [proc(4200, {0: GiB}, {0: 0})])
    b0 = sample(T0, [gpu(0, util=80)], [proc(4200, {0: GiB}, {0: 80})])
    tracker.observe("a", a0)
    tracker.observe("b", b0)
    a1 = sample(T0 + 600, [gpu(0)], [proc(4200, {0: GiB}, {0: 0})])
    frozen = tracker.host("a").copy()
    tracker.observe("a", sample(T0 + 300, [gpu(0)], [proc(4200, {0: GiB}, {0: 0})]))
    tracker.observe("a", a1)
    assert tracker.since("a", key(4200)) == T0
    assert tracker.since("b", key(4200)) is None
    assert [(h.host, h.seconds) for h in tracker.holders({"a": a1, "b": b0}, 600)] == [("a", 600.0)]
    assert frozen.seconds(key(4200)) == 0.0


def test_span_words() -> None:
    assert [span(s) for s in (0, 59.9, 60, 719, 3600 + 300, 86400 * 3 + 3600 * 4)] == [
        "0s",
        "59s",
        "1m",
        "11m",
        "1h05m",
        "3d04h",
    ]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["idle", "busy", "unknown", "gone", "gap"]), min_size=1, max_size=40))
def test_a_streak_is_exactly_the_run_of_idle_samples_since_the_last_interruption(steps: list[str]) -> None:
    """Property: after any sequence of samples, the streak began at the first idle sample after the
    last one that was not idle (busy, unknown, the process gone, or a gap before it)."""
    idle = HostIdle(max_gap=100)
    t = T0
    start: float | None = None
    for step in steps:
        t += 500 if step == "gap" else 10
        if step in ("idle", "gap"):
            s = sample(t, [gpu(0)], [proc(4200, {0: GiB}, {0: 0})])
            start = t if step == "gap" or start is None else start
        elif step == "busy":
            s = sample(t, [gpu(0, util=40)], [proc(4200, {0: GiB}, {0: 40})])
            start = None
        elif step == "unknown":
            s = sample(t, [gpu(0, util=None)], [proc(4200, {0: GiB})], util="off")
            start = None
        else:
            s = sample(t, [gpu(0)], [])
            start = None
        idle.observe(s)
        assert idle.since(key(4200)) == start
        assert idle.seconds(key(4200)) == (None if start is None else t - start)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["idle", "busy", "young", "none", "same", "aged", "vitals", "other"]),
            st.sampled_from([1, 10, 500]),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_a_sample_that_brings_the_same_records_goes_on_as_working_it_out_again(
    steps: list[tuple[str, int]],
) -> None:
    """Property: HostIdle skips the work for a sample whose processes, GPUs and per-process reading
    are the objects the last one had (deltas keep unchanged records); the streaks it keeps are
    those of working every sample out afresh, through gaps too."""
    kept, afresh = HostIdle(max_gap=100), HostIdle(max_gap=100)
    t = T0
    last: Sample | None = None
    for step, dt in steps:
        t += dt
        if step == "same" and last is not None:
            s = dataclasses.replace(last, time=t, seq=last.seq + 1)
        elif step == "aged" and last is not None:  # the same GPUs and reading, every age moved (a
            # young one past the reading's age, or not)
            aged = tuple(dataclasses.replace(p, elapsed=(p.elapsed or 0.0) + dt / 4) for p in last.processes)
            s = dataclasses.replace(last, time=t, seq=last.seq + 1, processes=aged)
        elif step == "other" and last is not None and last.processes:  # what they read, changed
            first, *rest = last.processes
            changed = dataclasses.replace(first, kind="hidden" if first.kind == "user" else "user")
            s = dataclasses.replace(last, time=t, seq=last.seq + 1, processes=(changed, *rest))
        elif step == "vitals" and last is not None:  # what the rules do not read
            moved = tuple(dataclasses.replace(p, cpu_percent=dt, rss=dt << 20) for p in last.processes)
            s = dataclasses.replace(last, time=t, seq=last.seq + 1, processes=moved)
        elif step == "busy":
            s = sample(t, [gpu(0, util=40)], [proc(4200, {0: GiB}, {0: 40}), proc(4300, {0: GiB})])
        elif step == "young":  # younger than the per-process reading: not known to be idle yet
            s = sample(
                t,
                [gpu(0, util=40)],
                [proc(4200, {0: GiB}, elapsed=0.5), proc(4300, {0: GiB}, {0: 0})],
                age=2.0,
            )
        elif step == "none":
            s = sample(t, [gpu(0)], [])
        else:
            s = sample(t, [gpu(0)], [proc(4200, {0: GiB}, {0: 0}), proc(4300, {0: GiB})])
        kept.observe(s)
        afresh._read = None  # no record of what it read last: every sample worked out again
        afresh.observe(s)
        assert kept.durations() == afresh.durations()
        assert [kept.since(key(p)) for p in (4200, 4300)] == [afresh.since(key(p)) for p in (4200, 4300)]
        last = s


def test_the_same_records_again_are_not_worked_out_again() -> None:
    """The skip itself: a sample with the same records reads none of them (the rule above would
    hold with no skip at all)."""
    idle = HostIdle()
    first = sample(T0, [gpu(0)], [proc(4200, {0: GiB}, {0: 0})])
    idle.observe(first)
    looked: list[int] = []

    class Counted(tuple):  # type: ignore[type-arg]
        def __iter__(self):  # type: ignore[no-untyped-def]
            looked.append(1)
            return super().__iter__()

    idle.observe(dataclasses.replace(first, time=T0 + 5))
    assert idle.seconds(key(4200)) == 5
    other = dataclasses.replace(first, time=T0 + 6, processes=Counted(first.processes))
    idle.observe(other)
    reads = len(looked)
    assert reads > 0  # a different tuple (even an equal one): read
    idle.observe(dataclasses.replace(other, time=T0 + 7))
    assert len(looked) == reads  # the same tuple again: not read
    assert idle.seconds(key(4200)) == 7


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.sampled_from([None, 0, 30, "error"]), min_size=1, max_size=2),  # each GPU's reading
    st.sampled_from(["on", "off"]),
    st.sampled_from([None, 1.0, 50.0]),  # the per-process reading's age
    st.lists(
        st.tuples(
            st.dictionaries(st.integers(0, 2), st.sampled_from([None, 0, GiB]), max_size=2),  # memory
            st.one_of(st.none(), st.dictionaries(st.integers(0, 2), st.sampled_from([0, 5]), max_size=2)),
            st.sampled_from(["user", "user", "monitor"]),
            st.sampled_from(["S", "S", "Z"]),
            st.sampled_from([0.5, 10.0, 3600.0]),  # elapsed: younger or older than the reading
        ),
        max_size=4,
    ),
)
# A process younger than the reading, on a GPU the reading covers: the GPU's utilization decides.
@example([30], "on", 1.0, [({0: GiB}, None, "user", "S", 0.5), ({0: GiB}, {0: 5}, "user", "S", 3600.0)])
def test_idle_keys_says_what_idle_now_says_of_each_process(
    readings: list[int | str | None], util: str, age: float | None, procs: list[Any]
) -> None:
    gpus = [
        dict(gpu(i, None), error="Unknown Error") if r == "error" else gpu(i, r)  # type: ignore[arg-type]
        for i, r in enumerate(readings)
    ]
    records = [
        proc(100 + n, memory, sm, kind=kind, elapsed=elapsed, state=state)
        for n, (memory, sm, kind, state, elapsed) in enumerate(procs)
    ]
    s = sample(T0, gpus, records, util=util, age=age)
    assert idle_keys(s) == [p.key for p in s.processes if idle_now(s, p) is True]

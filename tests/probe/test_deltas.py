"""Delta samples (issue 21, docs/PROTOCOL.md "Delta samples"): the probe sends what changed, the app
merges it and parses only that, and what it holds is what the whole sample would have given.

The probe's side runs on real sim processes (tests/simprobe.py) and over the real wire (a local probe
through the bootstrap); the hostile side through tests/hostile_probe.py's `deltas` mode.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import json
import random
import signal
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.config.file import HostSpec
from gputui.fleet.deltas import ALONE, DELTAS_EVERY, DeltaError, SampleIntake, _elapsed
from gputui.fleet.fleet import Fleet
from gputui.fleet.session import LIVE, ErrorArrived, FleetEvent, HostView, SampleArrived
from gputui.model import Gpu, Proc, Sample
from gputui.probe.delta import SampleEncoder, apply, diff, elapsed_moved
from gputui.probe.main import Loop
from gputui.probe.wire import PROBE_TYPES, decode
from gputui.recording.player import ReplayLink, load_recording
from gputui.transport.local import LocalLink
from tests.support.hostile import hostile_fleet
from tests.support.hostile_probe import BAD_SEQ, DELTA_SEQ, HIDDEN_PID, USER_PID, WHOLE_SEQ, bad_deltas
from tests.support.paths import FIXTURES
from tests.support.simprobe import wait_gone
from tests.support.waiting import eventually

DEMO = load_recording(FIXTURES / "demo-a.jsonl")
HELLO = next(r for r in DEMO if r["type"] == "hello")
SAMPLES = [r for r in DEMO if r["type"] == "sample"]


def every_field(sample: Sample) -> tuple[Any, ...]:
    """All of a sample, the fields dataclass equality leaves out included (gpu_memory, accounting...)."""

    def deep(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return (type(value).__name__, *(deep(getattr(value, f.name)) for f in dataclasses.fields(value)))
        if isinstance(value, (tuple, list)):
            return tuple(deep(v) for v in value)
        if isinstance(value, dict):
            return tuple(sorted((str(k), deep(v)) for k, v in value.items()))
        return value

    return deep(sample)  # type: ignore[no-any-return]


def wire(line: bytes) -> dict[str, Any]:
    record, problem = decode(line, PROBE_TYPES)
    assert problem is None, problem
    assert record is not None
    return record


def within_age(held: Sample, truth: Sample, readings: dict[int, Any]) -> None:
    """`held` says what `truth` says, but for the processes' ages, which may lag by a step, and the
    GPUs' preflight readings where `truth` carries none: the last one (`readings`, by GPU: kept up
    to date here, from `truth`) or none (after a whole sample without one)."""
    assert [dataclasses.replace(g, preflight=None) for g in held.gpus] == [
        dataclasses.replace(g, preflight=None) for g in truth.gpus
    ]
    for mine, theirs in zip(held.gpus, truth.gpus, strict=True):
        if theirs.preflight is not None:
            assert mine.preflight == theirs.preflight
        else:
            assert mine.preflight in (None, readings.get(theirs.index))
    assert every_field(dataclasses.replace(held, processes=(), gpus=())) == every_field(
        dataclasses.replace(truth, processes=(), gpus=())
    )
    ages = {p.key: p.elapsed for p in truth.processes}
    assert sorted(p.key for p in held.processes) == sorted(ages)
    for proc in held.processes:
        truth_proc = next(p for p in truth.processes if p.key == proc.key)
        assert every_field(dataclasses.replace(proc, elapsed=None)) == every_field(
            dataclasses.replace(truth_proc, elapsed=None)
        )
        assert not elapsed_moved(proc.elapsed, ages[proc.key]), (proc.key, proc.elapsed, ages[proc.key])
    readings.update((g.index, g.preflight) for g in truth.gpus if g.preflight is not None)


# -- the probe's sample stream as the app takes it --------------------------------------------------


def mutate(sample: dict[str, Any], rng: random.Random, seq: int) -> dict[str, Any]:
    """The next sample of a host: a few readings changed, a process come or gone, ages moved."""
    new = copy.deepcopy(sample)
    new["seq"], new["time"] = seq, sample["time"] + 1.0
    for proc in new["processes"]:
        proc["elapsed"] = round(proc["elapsed"] + 1.0, 1) if isinstance(proc.get("elapsed"), float) else None
    roll = rng.random()
    if roll < 0.3 and new["gpus"]:
        gpu = rng.choice(new["gpus"])
        gpu.update(util_gpu=rng.randrange(101), temperature=rng.randrange(30, 90))
    elif roll < 0.45 and new["processes"]:
        new["processes"].pop(rng.randrange(len(new["processes"])))
    elif roll < 0.6:
        proc = copy.deepcopy(rng.choice(SAMPLES[0]["processes"]))
        proc.update(pid=rng.randrange(10_000, 20_000), start_time=rng.randrange(1 << 30), elapsed=0.0)
        new["processes"].append(proc)
    elif roll < 0.7 and new["processes"]:
        rng.choice(new["processes"]).update(cpu_percent=round(rng.uniform(0, 100), 1), kind="hidden")
    elif roll < 0.8:
        new["host"] = dict(new["host"], cpu_percent=round(rng.uniform(0, 100), 1))
    elif roll < 0.85:
        new["scan"] = dict(new["scan"], full=not new["scan"]["full"])
    elif roll < 0.9 and new["gpus"]:
        new["gpus"][0]["preflight"] = SAMPLES[0]["gpus"][0].get("preflight") if rng.random() < 0.5 else None
    elif roll < 0.93:
        new["gpus"] = new["gpus"][:-1]  # a GPU gone (a reset, a fallen-off-the-bus)
    return new


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32), st.integers(2, 12))
def test_a_stream_of_deltas_gives_the_app_what_the_whole_samples_say(seed, every):
    """Whatever changes from one sample to the next, the app's sample after the delta is the whole
    sample's (the ages within a step), and exactly what Sample.from_wire makes of its merged record."""
    rng = random.Random(seed)
    encoder, intake, plain = SampleEncoder(deltas=every), SampleIntake(), SampleIntake()
    state = copy.deepcopy(SAMPLES[0])
    readings: dict[int, Any] = {}  # each GPU's last preflight reading
    for seq in range(1, 30):
        state = mutate(state, rng, seq) if seq > 1 else state
        held = intake.take(wire(encoder.line(state)))
        assert every_field(held) == every_field(Sample.from_wire(intake.raw)), seq
        assert dict(intake.raw) == encoder.base  # the app holds what the probe's base says
        within_age(held, Sample.from_wire(state), readings)
        # And an older probe's whole samples, through the same reuse of what did not change.
        assert every_field(plain.take(copy.deepcopy(state))) == every_field(Sample.from_wire(state))
    assert intake.deltas > 0


def test_unchanged_hosts_send_little_and_reuse_what_was_parsed():
    """A host whose readings did not change sends a short delta, and the app keeps its objects."""
    encoder, intake = SampleEncoder(deltas=DELTAS_EVERY), SampleIntake()
    first = copy.deepcopy(SAMPLES[0])
    for proc in first["processes"]:
        proc["elapsed"] = 7200.0  # running for hours: its age moves less than a hundredth a second
    whole = encoder.line(first)
    held = intake.take(wire(whole))
    second = dict(copy.deepcopy(first), seq=first["seq"] + 1, time=first["time"] + 1.0)
    for proc in second["processes"]:
        proc["elapsed"] += 1.0
    line = encoder.line(second)
    assert len(line) < len(whole) // 10, line
    again = intake.take(wire(line))
    assert again.gpus == held.gpus and all(a is b for a, b in zip(again.gpus, held.gpus, strict=True))
    assert all(a is b for a, b in zip(again.processes, held.processes, strict=True))
    assert again.seq == second["seq"]


def test_what_deltas_changed_is_held_as_plain_values_the_collector_never_walks():
    """Between two whole samples a GPU's changed fields are held beside its record's text; a changed
    preflight reading (an object of lists and objects) as its JSON text, so nothing a host holds of
    them is a container the garbage collector walks (issue 21). Its record is what the probe says;
    a sample without a reading, or with the same one again, changes nothing held (the same pair)."""
    encoder, intake = SampleEncoder(deltas=DELTAS_EVERY), SampleIntake()
    state = copy.deepcopy(SAMPLES[0])
    reading = next(g["preflight"] for g in state["gpus"] if g.get("preflight"))
    state["gpus"][0]["preflight"] = copy.deepcopy(reading)
    other = dict(copy.deepcopy(reading), sm_clock=reading["sm_clock"] - 15)
    intake.take(wire(encoder.line(state)))
    pairs = []
    for seq, (preflight, util) in enumerate([(None, 5), (other, 7), (other, 9), (None, 3), (reading, 4)], 2):
        state = copy.deepcopy(state)
        state["seq"], state["time"] = seq, state["time"] + 1.0
        state["gpus"][0].update(preflight=copy.deepcopy(preflight), util_gpu=util)
        line = encoder.line(state)
        delta = json.loads(line)
        assert "delta" in delta
        sent = [g for g in delta.get("gpus", []) if "preflight" in g]
        assert bool(sent) == (seq in (3, 6))  # a reading that differs from the held one, only
        intake.take(wire(line))
        held = intake.gpus[0]
        assert held.changed is not None and held.changed["util_gpu"] == util
        assert held.nested is None if seq == 2 else set(held.nested or ()) == {"preflight"}
        for plain in (held.changed, held.nested):
            assert plain is None or not gc.is_tracked(plain)
        assert dict(intake.raw or {}) == encoder.base
        assert intake.sample is not None and intake.sample.gpus[0].preflight is not None  # the held one
        pairs.append(intake._readings.get(held.key))
    assert pairs[1] is pairs[2] is pairs[3] is not None  # the same reading held: the same pair
    assert pairs[4] is not None and pairs[4] is not pairs[3]


def test_a_whole_sample_every_so_often_and_whenever_asked():
    encoder = SampleEncoder(deltas=3)
    state = copy.deepcopy(SAMPLES[0])
    kinds = []
    for seq in range(1, 8):
        state = dict(state, seq=seq, time=state["time"] + 1)
        kinds.append("delta" in json.loads(encoder.line(state, whole=seq == 6)))
    assert kinds == [False, True, True, False, True, False, True]
    assert "delta" not in json.loads(SampleEncoder(deltas=0).line(state))  # not asked: every one whole


def test_a_probe_asked_for_deltas_sends_its_whole_samples_at_a_place_of_its_own():
    """A fleet connected together must not send its whole samples in the same second: the next whole
    one comes `head_start` samples early, once (asked before the first sample, or in the middle)."""

    def kinds(encoder: SampleEncoder, count: int) -> list[bool]:
        state = copy.deepcopy(SAMPLES[0])
        out = []
        for seq in range(1, count + 1):
            state = dict(state, seq=seq, time=state["time"] + 1)
            out.append("delta" in json.loads(encoder.line(state)))
        return out

    early = SampleEncoder()
    early.ask(4, 3)
    assert kinds(early, 9) == [False, False, True, True, True, False, True, True, True]
    none = SampleEncoder()
    none.ask(4, 0)
    assert kinds(none, 6) == [False, True, True, True, False, True]
    late = SampleEncoder(deltas=4)
    kinds(late, 2)  # a whole one, a delta
    late.ask(4, 1)
    assert kinds(late, 4) == [True, False, True, True]
    out_of_range = SampleEncoder()
    out_of_range.ask(3, 99)  # taken as at most deltas - 1
    assert kinds(out_of_range, 5) == [False, False, True, True, False]


def test_the_probes_head_start_is_its_own(sim_probe):
    """The probe picks where its first whole sample comes after `configure deltas`: not all at the
    same place (here 40 configures of the real loop, deltas 60)."""
    probe, _reader = sim_probe(gpus=1)
    starts = set()
    for _ in range(40):
        loop = Loop(probe, lambda record: None, 1.0)  # type: ignore[arg-type]
        loop.configure({"type": "configure", "v": 1, "deltas": 60})
        assert loop.samples.deltas == 60 and 0 <= loop.samples._head < 60
        starts.add(loop.samples._head)
    assert len(starts) > 5


def test_each_field_of_a_gpu_and_a_process_comes_from_its_own_record_field_alone():
    """What the app's reuse relies on: changing a record field changes the same-named field of the
    parsed object and nothing else; the sample's fields of ALONE likewise."""
    sample = SAMPLES[2]
    values = [None, 0, 1, 5, 3.5, "x", [1], [0, 1], {"0": 5}, True, -1]
    for record, parse, fields in (
        (sample["gpus"][0], Gpu.from_wire, dataclasses.fields(Gpu)),
        (sample["processes"][0], Proc.from_wire, dataclasses.fields(Proc)),
    ):
        base = parse(record)
        for field in fields:
            if field.name in ("index", "pid"):
                continue
            for value in [*values, record.get(field.name)]:
                made = parse(dict(record, **{field.name: value}))
                expected = dataclasses.replace(base, **{field.name: getattr(made, field.name)})
                assert every_field(made) == every_field(expected), (field.name, value)
    base_sample = Sample.from_wire(sample)
    odd = [
        *values,
        float("nan"),
        float("inf"),
        -0.5,
        10**400,
        1 << 61,
        {"full": True, "age": 2.0, "unreadable": 3},
    ]
    odd += [{"age": "x", "unreadable": -1, "full": 1}, {"a": 1.5, "b": None, "c": float("nan"), "d": True}]
    odd += [[{"pid": 5, "start_time": 1, "name": "sh"}, 3, {"pid": 0}], [{"pid": 7}] * 300]
    for key, make in ALONE.items():
        for value in [*odd, sample.get(key)]:
            made = Sample.from_wire(dict(sample, **{key: value}))
            expected = dataclasses.replace(base_sample, **make(value))
            assert every_field(made) == every_field(expected), (key, value)


@pytest.mark.parametrize(
    "value", [0, 1, 2.5, -1.0, float("nan"), float("inf"), 10**400, True, "3", None, 1e308]
)
def test_an_age_taken_without_parsing_is_what_parsing_gives(value):
    record = dict(SAMPLES[0]["processes"][0], elapsed=value)
    assert _elapsed(value) == Proc.from_wire(record).elapsed or (
        _elapsed(value) is None and Proc.from_wire(record).elapsed is None
    )


def test_ages_move_in_deltas_by_a_second_and_a_hundredth():
    assert elapsed_moved(10.0, 11.0) and not elapsed_moved(10.0, 10.5)
    assert not elapsed_moved(3600.0, 3630.0) and elapsed_moved(3600.0, 3640.0)
    assert elapsed_moved(None, 1.0) and elapsed_moved(1.0, None) and not elapsed_moved(None, None)


# -- refused deltas -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        {"delta": 7},  # another sample's
        {"delta": "1"},
        {"delta": None},
        {"gpus": {"0": {}}},
        {"gpus": [{"util_gpu": 3}]},
        {"gpus": [{"index": 0}, {"index": 0}]},
        {"processes": [{"pid": 1}, {"pid": 1}]},
        {"processes": [{"pid": True, "start_time": 1}]},
        {"gone": []},
        {"gone": {"gpus": "0"}},
        {"gone": {"processes": [[1, 2, 3]]}},
        {"gone": {"processes": [["1", 2]]}},
    ],
)
def test_a_malformed_delta_is_refused_whole_and_nothing_held_changes(bad):
    intake = SampleIntake()
    first = intake.take(copy.deepcopy(SAMPLES[0]))
    raw = copy.deepcopy(intake.raw)
    delta = {"type": "sample", "v": 1, "seq": 2, "time": 1.0, "delta": SAMPLES[0]["seq"], "gone": {}}
    delta.update(bad)
    delta["gone"] = delta["gone"] if "gone" in bad else {"gpus": [0]}  # taken, it would drop GPU 0
    with pytest.raises(DeltaError):
        intake.take(delta)
    assert intake.sample is first and intake.raw == raw


def test_no_delta_before_a_whole_sample_or_after_a_sample_without_keys():
    with pytest.raises(DeltaError):
        SampleIntake().take({"type": "sample", "v": 1, "seq": 2, "delta": 1})
    intake = SampleIntake()
    unkeyed = dict(copy.deepcopy(SAMPLES[0]), gpus=[{"index": 0}, {"index": 0}])  # refused GPUs
    assert intake.take(unkeyed).gpus_refused == 2
    with pytest.raises(DeltaError):
        intake.take({"type": "sample", "v": 1, "seq": SAMPLES[0]["seq"] + 1, "delta": SAMPLES[0]["seq"]})


def test_apply_never_changes_the_base():
    base = copy.deepcopy(SAMPLES[0])
    kept = copy.deepcopy(base)
    new = mutate(mutate(base, random.Random(1), 2), random.Random(2), 3)
    apply(base, diff(base, new))
    assert base == kept


# -- the probe -------------------------------------------------------------------------------------


def test_a_process_that_comes_and_one_that_leaves_on_a_real_sim(sim_probe):
    """Real processes on the sim's GPUs: the one that starts comes in a delta whole, the one that
    ends is `gone`, and the app's sample says so (and what the probe's whole sample says)."""
    probe, reader = sim_probe(gpus=2)
    encoder, intake, readings = SampleEncoder(deltas=DELTAS_EVERY), SampleIntake(), {}
    first = probe.sample()
    within_age(intake.take(wire(encoder.line(first))), Sample.from_wire(first), readings)
    job = reader.spawn("busy", gpu=1, memory=2 << 30)
    record = probe.sample()
    line = json.loads(encoder.line(record))
    assert "delta" in line and any(p.get("pid") == job.pid for p in line.get("processes", []))
    held = intake.take(line)
    within_age(held, Sample.from_wire(record), readings)
    assert any(p.pid == job.pid and 1 in p.gpus for p in held.processes)
    assert job.signal(signal.SIGKILL)
    assert wait_gone(job.pid, job.start_time, 10)
    deadline, gone = time.monotonic() + 10, []
    while time.monotonic() < deadline:
        record = probe.sample()
        line = json.loads(encoder.line(record))
        gone += line.get("gone", {}).get("processes", [])
        held = intake.take(line)
        within_age(held, Sample.from_wire(record), readings)
        if not any(p.pid == job.pid for p in held.processes):
            break
    assert not any(p.pid == job.pid for p in held.processes)
    # (On its way out the driver may list it a moment longer, its /proc entry gone: start time null.)
    assert [job.pid, job.start_time] in gone


def test_the_probe_sends_deltas_once_asked_and_a_whole_sample_when_asked(sim_probe):
    probe, _reader = sim_probe(gpus=1)
    lines: list[bytes] = []

    class Out:
        def __call__(self, record: dict[str, Any]) -> None:
            lines.append(json.dumps(record).encode())

        def line(self, data: bytes) -> None:
            lines.append(data)

    loop = Loop(probe, Out(), 1.0)  # type: ignore[arg-type]
    ask = [b'{"type":"sample","v":1}', b'{"type":"configure","v":1,"deltas":5}', b'{"type":"sample","v":1}']
    ask += [b'{"type":"sample","v":1,"whole":true}', b'{"type":"configure","v":1,"deltas":-1}']
    ask += [b'{"type":"configure","v":1,"deltas":true}']
    for data in ask:
        loop.handle(data)
    records = [json.loads(x) for x in lines]
    assert [("delta" in r, r["type"]) for r in records] == [
        (False, "sample"),
        (True, "sample"),
        (False, "sample"),
        (False, "error"),
        (False, "error"),
    ]
    assert all(r["code"] == "bad-message" and "deltas" in r["message"] for r in records[3:])
    assert "delta" in probe.start()["capabilities"]


# -- the fleet ------------------------------------------------------------------------------------


async def test_a_real_probe_over_the_wire_is_asked_for_deltas_and_sends_them():
    fleet = Fleet()
    spec = HostSpec(name="sim", reader="sim", sim_scenario="demo")
    view = fleet.add("sim", lambda: LocalLink(spec, interval=0.2), interval=0.2)
    fleet.start()
    try:
        session = fleet.sessions["sim"]
        assert await eventually(lambda: view.status == LIVE and session.intake.deltas >= 5, 60)
        held = view.sample
        assert held is not None and held.processes and held.gpus
        assert held == Sample.from_wire(view.raw_sample)
        assert dict(view.raw_sample) == dict(session.intake.raw)
    finally:
        await fleet.stop()


async def test_an_older_probe_is_not_asked_for_deltas_and_its_whole_samples_work():
    # The recording's hello as a probe from before deltas would say it: no "delta" capability.
    old = {**HELLO, "capabilities": [c for c in HELLO["capabilities"] if c != "delta"]}
    link = ReplayLink([old if r is HELLO else r for r in DEMO], loop=True, rate=20.0)
    fleet = Fleet()
    view: HostView = fleet.add("old", lambda: link, interval=0.2)
    fleet.start()
    try:
        assert await eventually(lambda: view.sample is not None and view.sample.seq > 5, 60)
        assert not any(m.get("type") == "configure" and "deltas" in m for m in link.sent)
        assert fleet.sessions["old"].intake.deltas == 0
        assert every_field(view.sample) == every_field(Sample.from_wire(view.raw_sample))
    finally:
        await fleet.stop()


async def test_garbled_deltas_are_refused_and_a_whole_sample_resyncs_the_host():
    """A hostile probe's garbled deltas (a lost line's, malformed ones) are refused like any bad
    record: said, never shown, the GPU user kept; the app asks for a whole sample, takes it, and
    takes good deltas after it (the process that leaves is gone)."""
    fleet, view, links = hostile_fleet("deltas", "hostile", interval=0.2)
    seen: list[tuple[int, bool, bool, int | None]] = []
    errors: list[str] = []

    def on(e: FleetEvent) -> None:
        if isinstance(e, SampleArrived):
            pids = {p.pid for p in e.sample.processes}
            seen.append((e.sample.seq, USER_PID in pids, HIDDEN_PID in pids, e.sample.gpus[0].util_gpu))
        elif isinstance(e, ErrorArrived) and e.record.get("code") == "bad-delta":
            errors.append(e.record.get("message", ""))

    fleet.listen(on)
    fleet.start()
    try:
        assert await eventually(lambda: any(seq >= DELTA_SEQ for seq, *_ in seen), 60)
        assert all(seq < BAD_SEQ for seq, *_ in seen), seen
        assert all(user for _, user, _, _ in seen), seen  # no refused delta dropped the GPU user
        assert any(seq == WHOLE_SEQ for seq, *_ in seen)  # the app asked for a whole sample
        after = [(hidden, util) for seq, _, hidden, util in seen if seq >= DELTA_SEQ]
        assert after and all(not hidden and util == 77 for hidden, util in after), seen
        assert len(errors) >= len(bad_deltas(1)), errors  # each garbled kind refused
        assert any("last one held" in e for e in errors), errors  # the lost line's
        assert view.status == LIVE
    finally:
        await fleet.stop()
    assert links

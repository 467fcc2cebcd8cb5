"""The probe end to end on simulated GPUs owned by real processes: every kind, attribution, release."""

import os
import signal
import time

GIB = 1 << 30


def by_pid(sample):
    return {p["pid"]: p for p in sample["processes"]}


def test_every_kind_in_one_sample(sim_probe):
    probe, reader = sim_probe(scenario="demo")
    sample = probe.sample(full=True)
    kinds = {p["kind"] for p in sample["processes"]}
    assert kinds == {"user", "ghost", "hidden", "monitor", "zombie"}
    procs = by_pid(sample)
    assert procs[os.getpid()]["kind"] == "monitor" and procs[os.getpid()]["protected"] == "probe"
    for p in sample["processes"]:
        if p["kind"] != "zombie" and p["kind"] != "ghost":
            # Every holder holds every simulated device file (GPU_FACTS: CUDA opens them all).
            assert set(reader.device_paths) <= set(p["holds"]), p


def test_ghost_is_tied_to_its_hidden_holder_and_memory_returns_when_it_dies(sim_probe):
    probe, reader = sim_probe()
    job = reader.spawn("ghost", gpu=2, memory=9 * GIB)
    procs = by_pid(probe.sample(full=True))
    ghost, child = procs[job.pid], procs[job.child_pid]
    assert (ghost["kind"], ghost["reason"], ghost["gpus"], ghost["start_time"]) == (
        "ghost",
        "dead",
        [2],
        None,
    )
    assert ghost["gpu_memory"] == {"2": 9 * GIB} and ghost["links"] == [job.child_pid]
    assert (child["kind"], child["reason"], child["gpus"], child["links"]) == (
        "hidden",
        "pgid",
        [2],
        [job.pid],
    )
    assert probe.read_gpus()[0][2]["memory_used"] == 9 * GIB
    job.signal(signal.SIGKILL, child=True)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        gpus, listed = probe.read_gpus()
        if job.pid not in listed and gpus[2]["memory_used"] == 0:
            break
        time.sleep(0.01)
    assert job.pid not in listed and gpus[2]["memory_used"] == 0
    assert job.pid not in by_pid(probe.sample(full=True))


def test_zombie_names_its_parent_and_holds_nothing(sim_probe):
    probe, reader = sim_probe()
    job = reader.spawn("zombie", gpu=1, memory=2 * GIB)
    procs = by_pid(probe.sample(full=True))
    zombie = procs[job.child_pid]
    assert (zombie["kind"], zombie["state"], zombie["holds"], zombie["gpus"]) == ("zombie", "Z", [], [])
    assert zombie["links"] == [job.pid] and zombie["reason"] == f"parent {job.pid}"
    assert procs[job.pid]["kind"] == "user"  # the parent is a live GPU job


def test_unattributed_hidden_holder_and_monitor(sim_probe):
    probe, reader = sim_probe()
    hidden = reader.spawn("hidden")
    monitor = reader.spawn("monitor")
    procs = by_pid(probe.sample(full=True))
    assert (procs[hidden.pid]["kind"], procs[hidden.pid]["reason"], procs[hidden.pid]["gpus"]) == (
        "hidden",
        "unattributed",
        [],
    )
    assert procs[monitor.pid]["kind"] == "monitor" and procs[monitor.pid]["protected"] == "monitor"
    assert procs[monitor.pid]["name"] == "nv-hostengine"


def test_sample_cost_fields(sim_probe):
    probe, _ = sim_probe(scenario="demo")
    probe.sample(full=True)
    sample = probe.sample()
    assert sample["scan"]["full"] is False and sample["scan"]["age"] > 0
    assert sample["scan"]["worst_age"] >= sample["scan"]["age"]
    assert set(sample["cost_ms"]) >= {"reader", "holders", "total", "cpu"}


def test_per_process_utilization_every_few_samples_and_switched_off(sim_probe):
    probe, reader = sim_probe()
    probe.interval = 1.0
    job = reader.spawn("busy", gpu=[0, 1], memory=GIB, util=60)
    hidden = reader.spawn("hidden")
    first = probe.sample(full=True)  # sample 0 reads it (then every PROC_UTIL_S samples at 1 s)
    assert first["proc_util"]["state"] == "on" and first["proc_util"]["every"] == 5.0
    procs = by_pid(first)
    assert procs[job.pid]["gpu_util"] == {
        "0": {"sm": 60, "mem": 36, "enc": 0, "dec": 0},
        "1": {"sm": 60, "mem": 36, "enc": 0, "dec": 0},
    }
    assert procs[hidden.pid]["gpu_util"] is None  # holds the device files, runs nothing
    assert first["cost_ms"]["proc_util"] is not None
    second = probe.sample()
    assert second["cost_ms"]["proc_util"] is None  # not due: the last reading is carried
    assert by_pid(second)[job.pid]["gpu_util"]["0"]["sm"] == 60
    probe.proc_util_every = 0
    off = probe.sample()
    assert off["proc_util"] == {"state": "off", "every": None, "age": None}
    assert by_pid(off)[job.pid]["gpu_util"] is None  # no stale figures once it is off

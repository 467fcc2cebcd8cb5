"""Ready for the next run: memory accounting, preflight and `gputui wait`, end to end on sim probes.

The "preflight" sim scenario has four GPUs each unready in its own way (gputui/probe/readers/scenarios.py
preflight_state): GPU 0 ready; GPU 1 with 2.1 GiB orphaned; GPU 2 hot (78 °C, cooling slowly) and
throttling; GPU 3 with persistence off and ECC errors. The demo host adds a ghost. A test changes the
sim's driver state as the driver would (a GPU cooling faster, a throttle ending) through a second
SimReader attached to the probe's sim directory. Every process belongs to the probes' own sims.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from gputui.fleet.session import GpuHistory
from gputui.model import Gpu, Parent, Preflight, Proc, Sample
from gputui.model.textsafe import cells, output_ellipsis
from gputui.probe.readers.sim import GiB, SimReader
from gputui.views.readiness import Conditions, preflight_flags, unready
from tests.support.commands import clean, fleet_of, wait
from tests.support.hostile import HostileLink
from tests.support.hosts import PREFLIGHT_HOST, preflight_spec

HOST = PREFLIGHT_HOST


async def test_every_byte_is_accounted_for_ghost_and_orphaned_alike():
    fleet = fleet_of([preflight_spec(), preflight_spec("demo", "d")], interval=0.25)
    fleet.start()
    try:
        await fleet.wait_first_samples(60)
        gpus = {g.index: g for g in fleet.view(HOST).sample.gpus}
        assert gpus[0].accounting is not None and gpus[0].accounting.unaccounted == 0
        orphaned = gpus[1].accounting
        assert (
            orphaned is not None
            and orphaned.orphaned == int(2.1 * GiB)
            and orphaned.unaccounted == orphaned.orphaned
        )
        demo = fleet.view("d").sample
        [ghost] = [p for p in demo.processes if p.kind == "ghost"]
        [holder] = [p for p in demo.processes if p.kind == "hidden" and ghost.pid in p.links]
        books = next(g for g in demo.gpus if g.index == ghost.gpus[0]).accounting
        assert books is not None and books.ghost == 41 * GiB and books.ghosts == (ghost.pid,)
        assert books.suspects == (holder.pid,) and books.orphaned == 0
        assert books.processes > 0  # the notebook beside it: listed, alive
        # Preflight: read with the first sample, then now and then.
        pre = fleet.view(HOST).preflight
        assert pre[2].throttle == ("hw-thermal",) and pre[3].persistence is False
        assert pre[3].ecc_uncorrected == 1 and pre[3].remap_pending is True and pre[0].throttle == ()
        assert pre[0].fan is None  # unsupported fields are null, never an error
    finally:
        await fleet.stop()


async def test_wait_returns_for_a_ready_gpu_and_honours_the_settle_period():
    code, doc, text, _took = await wait(f"{HOST}", "--gpu", f"{HOST}:0", "--json", "--timeout", "30")
    assert code == 0 and doc is not None and doc["ready"] is True, text
    code, doc, text, _took = await wait(f"{HOST}", "--gpu", f"{HOST}:0", "--json", "--settle", "1.5")
    assert code == 0 and doc is not None
    assert doc["hosts"][0]["gpus"]["0"]["ready_for_s"] >= 1.5 and doc["waited_s"] >= 1.5


async def test_wait_times_out_saying_which_condition_failed_and_by_how_much():
    code, doc, text, _ = await wait(
        f"{HOST}", "--gpu", f"{HOST}:1", "--gpu", f"{HOST}:3", "--timeout", "1.5", "--persistence", "--json"
    )
    assert code == 1 and doc is not None and doc["ready"] is False
    gpus = doc["hosts"][0]["gpus"]
    reasons = {u["condition"]: u for u in gpus["1"]["unready"]}
    assert "unaccounted" in reasons and "2.1 GiB orphaned" in reasons["unaccounted"]["words"]
    assert reasons["unaccounted"]["excess"] == int(2.1 * GiB)
    assert "memory" in reasons  # 2.1 GiB above idle too
    assert {u["condition"] for u in gpus["3"]["unready"]} == {"persistence", "ecc"}  # ECC: never ready
    code, _, text, _ = await wait(f"{HOST}", "--gpu", f"{HOST}:2", "--timeout", "1.5", "--no-throttle")
    assert code == 1 and "throttle: throttling: hw-thermal" in text
    code, _, text, _ = await wait(f"{HOST}", "--gpu", f"{HOST}:1", "--timeout", "1")
    assert code == 1 and "GPU 1: unaccounted: 2.1 GiB orphaned" in text  # each word once


async def test_wait_for_a_cooling_gpu_returns_once_it_is_below_the_temperature():
    fleet = fleet_of([preflight_spec()], interval=0.25)
    fleet.start()
    await fleet.wait_first_samples(60)
    facts = fleet.view(HOST).facts
    assert facts is not None and fleet.view(HOST).raw_hello is not None
    prefix = fleet.view(HOST).raw_hello["host"]["device_prefix"]
    driver = SimReader(attach=True, base_dir=prefix[: -len("/dev/nvidia")])
    driver.open()
    try:
        hot = next(g for g in fleet.view(HOST).sample.gpus if g.index == 2).temperature
        assert hot is not None and hot >= 70
        # The driver: cooling at 8 °C a second from 74 °C; below 60 after about two seconds.
        driver.set_state(2, cooling={"from": 74.0, "rate": 8.0, "since": time.time()})
        waited = asyncio.create_task(
            wait(f"{HOST}", "--gpu", f"{HOST}:2", "--temp-below", "60", "--json", fleet=fleet)
        )
        code, _doc, text, took = await asyncio.wait_for(waited, 60)
        assert code == 0, text
        # It waited for the cooling (74 -> 60 °C at 8 °C/s: 1.75 s), and came back once the GPU
        # was below 60 (a lower bound: load only lengthens the wait).
        assert took > 1.0
        cooled = next(g for g in fleet.view(HOST).sample.gpus if g.index == 2).temperature
        assert cooled is not None and cooled < 60
    finally:
        driver.close()


async def test_clean_on_orphaned_memory_says_a_reset_would_free_it(tmp_path):
    code, out, _err = await clean(
        f"{HOST}:1",
        "--yes",
        "--verify-timeout",
        "0.5",
        "--log",
        str(tmp_path / "a"),
        fleet=fleet_of([preflight_spec()]),
    )
    assert code == 1
    assert "orphaned" in out and "2.1 GiB orphaned, no process holds it; a reset would free it" in out


def test_preflight_flags_name_what_is_off_and_what_differs_from_the_siblings():
    same = Preflight(persistence=True, compute_mode="Default", mig=False, power_limit=700.0,
                     power_default=700.0, sm_app_clock=1980, sm_app_clock_default=1980,
                     pcie_width=16, pcie_width_max=16, throttle=())  # fmt: skip
    odd = replace(same, persistence=False, power_limit=500.0, sm_app_clock=1500, pcie_width=8)
    hot = replace(same, throttle=("hw-thermal",), ecc_uncorrected=2, remap_pending=True)
    flags = preflight_flags({0: same, 1: same, 2: odd, 3: hot})
    assert set(flags) == {2, 3}
    assert flags[2] == (
        "persistence off",
        "clocks set: SM 1500 MHz, memory ? MHz",
        "power limit 500 W (default 700 W)",
        "PCIe x8 of x16",
    )
    assert flags[3] == (
        "throttling: hw-thermal",
        "2 uncorrected ECC errors",
        "row remap pending (a reset applies it)",
    )
    # Settings differ from nothing on a GPU alone, or where there is no majority; unknowns are no vote.
    assert preflight_flags({0: odd}) == {}
    assert preflight_flags({0: same, 1: odd}) == {}
    assert preflight_flags({0: Preflight(), 1: Preflight(), 2: odd}) == {}
    assert preflight_flags({0: hot}) == {0: flags[3]}


def test_temperature_slope_is_a_fitted_line_over_the_last_half_minute():
    h = GpuHistory()
    assert h.temperature_slope() is None
    for second in range(60):  # cooling 0.5 °C/s, with one odd reading and one missing
        celsius = None if second == 50 else 80.0 - 0.5 * second + (9.0 if second == 55 else 0.0)
        h.append(50, 10.0, celsius, 300.0, 1000.0 + second)
    slope = h.temperature_slope()
    assert slope is not None and -33 < slope < -27  # °C per minute (-30 without the odd reading)
    h.clear()
    h.append(50, 10.0, 50.0, 300.0, 0.0), h.append(50, 10.0, 51.0, 300.0, 1.0)
    assert h.temperature_slope() is None  # two readings are no trend


async def test_a_host_with_no_sample_yet_is_waited_for_never_left_out():
    # `--gpu 0` names GPU 0 of every host: the sim's is ready, the silent host has sent its hello
    # and no sample. Ready would be a lie while one named host has said nothing of its GPUs.
    fleet = fleet_of([preflight_spec()], interval=0.25)
    fleet.add("quiet", lambda: HostileLink("silence", "quiet"), interval=0.25)
    code, doc, text, _ = await wait("--gpu", "0", "--timeout", "2", "--json", fleet=fleet)
    assert code == 1 and doc is not None and doc["ready"] is False, text
    by_host = {h["host"]: h for h in doc["hosts"]}
    assert by_host[HOST]["gpus"]["0"]["ready"] is True
    assert by_host["quiet"]["gpus"] == {} and by_host["quiet"]["no_sample"].startswith("no sample yet")
    fleet = fleet_of([preflight_spec()], interval=0.25)
    fleet.add("quiet", lambda: HostileLink("silence", "quiet"), interval=0.25)
    code, _, text, _ = await wait("--gpu", "0", "--timeout", "2", fleet=fleet)
    assert code == 1 and "  quiet: no sample yet (" in text, text
    # A GPU spec that names its host leaves the others out, silent or not.
    fleet = fleet_of([preflight_spec()], interval=0.25)
    fleet.add("quiet", lambda: HostileLink("silence", "quiet"), interval=0.25)
    code, _, text, _ = await wait("--gpu", f"{HOST}:0", "--timeout", "10", fleet=fleet)
    assert code == 0, text


def with_gpuless(variant: int, name: str = "bare") -> Any:
    """The sim's all-idle host "e" and a hostile host whose samples list no usable GPU (`gpus` mode)."""
    fleet = fleet_of([preflight_spec("empty", "e")], interval=0.25)
    fleet.add(name, lambda: HostileLink("gpus", name, variant=variant), interval=0.25)
    return fleet


async def test_a_host_whose_samples_list_no_gpu_is_not_ready_never_left_out():
    """It was left out, and `wait` said "ready" for the other hosts (exit 0)."""
    for variant, words in ((0, "lists no GPU"), (1, "2 GPU records refused")):
        code, doc, text, _ = await wait("--timeout", "2", "--json", fleet=with_gpuless(variant))
        assert code == 1 and doc is not None and doc["ready"] is False, (variant, text)
        by_host = {h["host"]: h for h in doc["hosts"]}
        assert all(g["ready"] for g in by_host["e"]["gpus"].values()) and by_host["e"]["gpus"]
        assert by_host["bare"]["gpus"] == {} and words in by_host["bare"]["not_judged"], by_host["bare"]
        code, _, text, _ = await wait("--timeout", "2", fleet=with_gpuless(variant))
        assert code == 1 and words in text, text
        assert "  bare: cannot be judged: its sample lists no GPU" in text, text
    # A GPU named on every host (`--gpu 0`): not a usage error (exit 2) where the host's GPU list
    # could not be read; not ready, with the reason.
    code, doc, text, _ = await wait("--gpu", "0", "--timeout", "2", "--json", fleet=with_gpuless(1))
    assert code == 1 and doc is not None, text
    assert "refused" in {h["host"]: h for h in doc["hosts"]}["bare"]["not_judged"]


async def test_every_gpu_of_a_host_with_a_refused_gpu_record_cannot_be_judged():
    # GPU 0 and a record without an index: every GPU is one GPU short; GPU 0 alone can be judged.
    code, doc, text, _ = await wait("--timeout", "2", "--json", fleet=with_gpuless(2))
    assert code == 1 and doc is not None, text
    by_host = {h["host"]: h for h in doc["hosts"]}
    assert "1 GPU record refused" in by_host["bare"]["not_judged"], by_host["bare"]
    code, doc, text, _ = await wait("--gpu", "bare:0", "--timeout", "2", "--json", fleet=with_gpuless(2))
    assert code == 1 and doc is not None, text
    [bare] = doc["hosts"]
    assert {u["condition"] for u in bare["gpus"]["0"]["unready"]} >= {"processes", "utilization"}


def test_each_condition_says_what_fails_and_by_how_much():
    """The words and excess of each condition a quiet GPU can still fail, one at a time."""
    gpu = Gpu(index=0, memory_used=2 * GiB, memory_baseline=GiB // 2, util_gpu=3, temperature=71)
    sample = Sample(seq=1, time=1.0, gpus=(gpu,), processes=())
    asked = Conditions(temp_below=70, memory_below=GiB, no_throttle=True, persistence=True)

    def failed(g: Gpu = gpu, preflight: Preflight | None = None, conditions: Conditions = asked):
        return [(u.condition, u.words, u.excess) for u in unready(g, sample, conditions, preflight)]

    assert failed(preflight=Preflight(throttle=("hw-slowdown", "sw-thermal"), persistence=False)) == [
        ("memory", "1.5 GiB above idle (idle 512 MiB, slack 32.0 MiB)", 1.5 * GiB),
        ("memory-below", "2.0 GiB used, not below 1.0 GiB", 2.0 * GiB),
        ("utilization", "3% (below 1% wanted)", 3.0),
        ("temperature", "71°C (below 70°C wanted)", 2.0),
        ("throttle", "throttling: hw-slowdown, sw-thermal", 2.0),
        ("persistence", "persistence mode is off", None),
    ]
    blank = replace(gpu, memory_used=None, util_gpu=None, temperature=None)
    assert failed(blank, Preflight()) == [
        ("memory", "no memory figure from the driver", None),
        ("utilization", "no utilization figure from the driver", None),
        ("temperature", "no temperature figure from the driver", None),
        ("throttle", "the driver does not report clock-event reasons", None),
        ("persistence", "persistence mode unknown", None),
    ]
    assert failed(blank)[-1] == ("preflight", "no preflight reading yet", None)
    assert failed(blank, conditions=Conditions())[-1][0] == "utilization"  # no preflight asked for
    assert failed(replace(gpu, error="gpu-lost")) == [("error", "the GPU reports an error: gpu-lost", None)]


def test_a_new_processs_long_parent_command_is_cut_with_a_mark():
    """`wait` names the parent of a new GPU process ("started by 4242 `python supervisor.py ...`"):
    a parent's command over 80 characters was sliced there with no mark, as if it were whole."""
    long = ("python", "supervisor.py", *(f"--option-{i}=value-{i}" for i in range(12)))
    worker = Proc(pid=5151, start_time=2, kind="user", ppid=4242, command=("python", "w.py"), gpus=(2,))
    sample = Sample(
        seq=1,
        time=0.0,
        gpus=(Gpu(index=2, memory_used=8 * GiB, memory_total=80 * GiB),),
        processes=(worker,),
        parents=(Parent(pid=4242, start_time=1, command=long),),
    )
    (found,) = [
        u for u in unready(sample.gpus[0], sample, Conditions(), known=set()) if u.condition == "processes"
    ]
    assert "started by 4242 `python supervisor.py --option-0=value-0" in found.words, found.words
    quoted = found.words.partition("`")[2].partition("`")[0]
    assert quoted.endswith(output_ellipsis()) and cells(quoted) == 80, quoted

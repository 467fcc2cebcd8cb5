"""gputui.views.metrics: the fleet's state as Prometheus families (docs/MONITORING.md), read back the way
Prometheus reads them: the text prometheus_client writes, parsed by its own parser.

Host views are built as the fleet builds them (tests/support/metricsfleet.py), from a recorded demo
host and from records written for the cases a demo does not show (a GPU that throttles, ECC errors, a
Slurm job, a host down, no driver, hostile text).
"""

from __future__ import annotations

import json
import re

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gputui import __version__
from gputui.fleet.session import CONNECTING, DOWN, LIVE, HostView
from gputui.model import HostFacts, Sample
from gputui.views.metrics import FleetCollector, all_heard, families, idle_holders_now, registry
from gputui.views.metrics.scrape import collector
from tests.support.hostile import NAME, hostile_fleet, stop_fleet
from tests.support.metricsfleet import FIXTURES, GiB, a_fleet_of_every_kind, gpu, hello, proc, view
from tests.support.wording import RAW

CATEGORIES = {"ghost", "container", "unreported", "hidden", "orphaned", "outside", "unknown"}


def scrape(views: list[HostView]) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The exposition as Prometheus would read it: sample name -> [(labels, value)]."""
    text = generate_latest(registry(FleetCollector(lambda: views))).decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def values(metrics, name: str, **match: str) -> list[float]:
    return [v for labels, v in metrics.get(name, []) if all(labels.get(k) == m for k, m in match.items())]


def recorded_demo_host() -> HostView:
    records = [json.loads(line) for line in (FIXTURES / "demo-a.jsonl").read_text().splitlines() if line]
    v = HostView(name="demo-a")
    v.facts = HostFacts.from_hello(records[0])
    v.record(Sample.from_wire([r for r in records if r["type"] == "sample"][-1]))
    v.status = LIVE
    return v


def test_a_recorded_demo_host_reads_back_with_every_gpu_and_memory_category():
    v = recorded_demo_host()
    m = scrape([v])
    assert values(m, "gputui_host_up", host="demo-a") == [1.0]
    assert values(m, "gputui_host_state", host="demo-a", state="live") == [1.0]
    assert sum(values(m, "gputui_host_state", host="demo-a")) == 1.0
    assert v.sample is not None
    for g in v.sample.gpus:
        labels = {"host": "demo-a", "gpu": str(g.index)}
        assert values(m, "gputui_gpu_memory_used_bytes", **labels) == [float(g.memory_used or 0)]
        assert values(m, "gputui_gpu_memory_total_bytes", **labels) == [float(g.memory_total or 0)]
        assert values(m, "gputui_gpu_utilization_ratio", **labels) == [(g.util_gpu or 0) / 100]
        categories = {
            lab["category"]
            for lab, _ in m["gputui_gpu_memory_unaccounted_bytes"]
            if lab["gpu"] == str(g.index)
        }
        assert categories == CATEGORIES
    # The recorded GPU 2: 41 GiB listed for a dead PID (ghost), a notebook holding 12 GiB at 0 %.
    assert values(m, "gputui_gpu_memory_unaccounted_bytes", gpu="2", category="ghost") == [44023414784.0]
    assert values(m, "gputui_gpu_memory_unaccounted_bytes", gpu="2", category="orphaned") == [0.0]
    assert values(m, "gputui_gpu_idle_holders", gpu="2") == [1.0]
    assert values(m, "gputui_gpu_ready", gpu="2") == [0.0]
    holders = {(lab["gpu"], lab["pid"], lab["kind"]) for lab, _ in m["gputui_gpu_holder_info"]}
    # PIDs as recorded (a new recording has new ones): found by what each process runs.
    notebook, ghost = pid_of(v, "notebook_kernel.py", "user"), pid_of(v, None, "ghost")
    assert {
        ("2", notebook, "user"),
        ("2", ghost, "ghost"),
        ("2", pid_of(v, "train.py", "hidden"), "hidden"),
    } <= holders
    vllm = pid_of(v, "vllm_serve.py", "user")
    assert ("0", vllm, "user") in holders and ("1", vllm, "user") in holders
    # Processes on no GPU (a monitor, an unattributed holder, a zombie) are no GPU's holders.
    idle = {pid_of(v, "gputui-probe", "monitor"), pid_of(v, "probe_cuda.py", "hidden")}
    idle |= {pid_of(v, "nv_hostengine.py", "monitor"), pid_of(v, None, "zombie")}
    assert not {pid for _, pid, _ in holders} & idle
    served = next(p for p in v.sample.processes if str(p.pid) == vllm).gpu_memory[1]
    assert served and values(m, "gputui_process_gpu_memory_bytes", gpu="1", pid=vllm) == [float(served)]


def pid_of(v: HostView, script: str | None, kind: str) -> str:
    """The PID of the one process of `kind` in the host's sample whose command names `script`."""
    assert v.sample is not None
    found = [
        p.pid
        for p in v.sample.processes
        if p.kind == kind and (script is None or any(script in arg for arg in p.command))
    ]
    assert len(found) == 1, (script, kind, found)
    return str(found[0])


def test_holders_carry_who_they_are_once_and_join_the_gpu_series_by_uuid():
    sample = {
        "gpus": [gpu(0, util=80, used=20 * GiB, accounting={"baseline": 0, "processes": 20 * GiB})],
        "processes": [
            proc(4242, "user", {0: 20 * GiB}, job="4200", container="docker/abc",
                 gpu_util={"0": {"sm": 75, "mem": 10}}),
        ],
        "jobs": [{"id": "4200", "root": 4200, "members": [4242], "gpus": [0], "slurm_job": "771"}],
    }  # fmt: skip
    m = scrape([view("n1", sample)])
    ((labels, value),) = m["gputui_gpu_holder_info"]
    assert value == 1.0
    assert labels == {
        "host": "n1", "gpu": "0", "uuid": "GPU-0000", "pci_bus_id": "00000000:18:00.0", "pid": "4242",
        "user": "alice", "kind": "user", "name": "python", "job": "4200", "slurm_job": "771",
        "container": "docker/abc",
    }  # fmt: skip
    (mem_labels, mem), = m["gputui_process_gpu_memory_bytes"]  # fmt: skip
    assert mem == 20 * GiB and mem_labels["uuid"] == "GPU-0000" and mem_labels["pid"] == "4242"
    assert "user" not in mem_labels and "job" not in mem_labels  # who it is: in the info series only
    assert values(m, "gputui_process_gpu_utilization_ratio", pid="4242") == [0.75]
    # Not a job label on every GPU series (dcgm-exporter#585): four labels, the same on each.
    for name in ("gputui_gpu_memory_used_bytes", "gputui_gpu_ready", "gputui_gpu_idle_holders"):
        ((gpu_labels, _),) = m[name]
        assert set(gpu_labels) == {"host", "gpu", "uuid", "pci_bus_id"}, name


def test_idle_holders_are_live_processes_with_memory_on_a_gpu_that_reads_0():
    sample = {
        "gpus": [gpu(0, util=0, used=30 * GiB), gpu(1, util=55, used=8 * GiB), gpu(2, util=None, used=GiB)],
        "processes": [
            proc(10, "user", {0: 10 * GiB}),
            proc(11, "user", {0: 12 * GiB}),
            proc(12, "ghost", {0: 8 * GiB}),  # dead: its memory is the ghost category, not a holder
            proc(13, "hidden", {}, gpus=[0]),  # holds the device file, no memory of its own listed
            proc(14, "monitor", {}, gpus=[0]),
            proc(15, "user", {1: 8 * GiB}),
            proc(16, "user", {2: GiB}),
        ],
    }
    v = view("n1", sample)
    m = scrape([v])
    assert values(m, "gputui_gpu_idle_holders", gpu="0") == [2.0]
    assert values(m, "gputui_gpu_idle_holders", gpu="1") == [0.0]  # busy: nobody is idle on it
    assert values(m, "gputui_gpu_idle_holders", gpu="2") == []  # no utilization figure (MIG): unknown
    assert v.sample is not None
    assert [idle_holders_now(v, v.sample, g) for g in v.sample.gpus] == [2, 0, None]


def test_the_idle_count_is_a_hook_another_tracker_can_take():
    v = view("n1", {"gpus": [gpu(0, util=90, used=GiB)], "processes": [proc(10, "user", {0: GiB})]})
    names = {f.name: f for f in families([v], idle=lambda view, sample, g: 7)}
    assert [s.value for s in names["gputui_gpu_idle_holders"].samples] == [7.0]


def test_preflight_gives_throttle_reasons_ecc_counts_and_pending_remaps():
    preflight = {
        "throttle": ["hw-slowdown", "sw-thermal"],
        "ecc_corrected": 12,
        "ecc_uncorrected": 3,
        "remap_pending": True,
        "remap_failed": False,
        "retired_pending": False,
    }
    sample = {"gpus": [gpu(0, preflight=preflight), gpu(1)], "processes": []}
    m = scrape([view("n1", sample)])
    assert values(m, "gputui_gpu_throttled", gpu="0") == [1.0]
    reasons = {lab["reason"] for lab, v in m["gputui_gpu_throttle_reason"] if lab["gpu"] == "0" and v == 1}
    assert reasons == {"hw-slowdown", "sw-thermal"}
    assert values(m, "gputui_gpu_ecc_errors_total", gpu="0", type="uncorrected") == [3.0]
    assert values(m, "gputui_gpu_ecc_errors_total", gpu="0", type="corrected") == [12.0]
    assert values(m, "gputui_gpu_remap_pending", gpu="0") == [1.0]
    assert values(m, "gputui_gpu_remap_failed", gpu="0") == [0.0]
    # GPU 1 has had no preflight reading: its throttle and ECC state is unknown, so absent (not 0).
    for name in ("gputui_gpu_throttled", "gputui_gpu_ecc_errors_total", "gputui_gpu_remap_pending"):
        assert values(m, name, gpu="1") == [], name


def test_a_figure_the_driver_did_not_give_is_absent_not_zero():
    sample = {"gpus": [gpu(0, temperature=None, power_draw=None)], "processes": []}
    m = scrape([view("n1", sample)])
    assert values(m, "gputui_gpu_temperature_celsius", gpu="0") == []
    assert values(m, "gputui_gpu_power_watts", gpu="0") == []
    assert values(m, "gputui_gpu_memory_used_bytes", gpu="0") == [0.0]


def test_ready_is_gputui_waits_judgement():
    sample = {
        "gpus": [gpu(0, util=0, used=0), gpu(1, util=0, used=0), gpu(2, util=3, used=0)],
        "processes": [proc(10, "user", {1: 0}, gpus=[1])],  # a process on GPU 1, even without memory
    }
    m = scrape([view("n1", sample)])
    assert values(m, "gputui_gpu_ready", gpu="0") == [1.0]
    assert values(m, "gputui_gpu_ready", gpu="1") == [0.0]
    assert values(m, "gputui_gpu_ready", gpu="2") == [0.0]


def test_a_host_down_or_without_a_driver_is_up_0_and_lists_no_gpu():
    sample = {"gpus": [gpu(0, used=GiB)], "processes": [proc(10, "user", {0: GiB})]}
    down = view("gone", sample, status=DOWN)  # its last sample is kept by the fleet: not today's state
    nodriver = view("bare", None, status=DOWN)
    nodriver.facts = HostFacts.from_hello({**hello(), "error": {"code": "no-driver", "message": "x"}})
    waiting = view("new", None, status=CONNECTING)
    m = scrape([down, nodriver, waiting])
    assert values(m, "gputui_host_up") == [0.0, 0.0, 0.0]
    assert values(m, "gputui_host_state", host="gone", state="down") == [1.0]
    assert values(m, "gputui_host_state", host="bare", state="no-gpu") == [1.0]
    assert values(m, "gputui_host_state", host="new", state="connecting") == [1.0]
    for name in ("gputui_gpu_memory_used_bytes", "gputui_gpu_holder_info", "gputui_host_sample_age_seconds"):
        assert name not in m, name


def test_a_down_host_trying_again_stays_down_so_an_alert_on_it_is_not_reset():
    retrying = view("gone", None, status=CONNECTING)  # between two attempts, as its session sets it
    retrying.last_down = "unreachable"
    m = scrape([retrying])
    assert values(m, "gputui_host_state", host="gone", state="down") == [1.0]
    assert values(m, "gputui_host_state", host="gone", state="connecting") == [0.0]
    assert values(m, "gputui_host_up") == [0.0]
    assert all_heard([retrying])  # judged down: readiness does not wait for its next attempt


def test_all_heard_once_every_host_has_a_sample_or_is_judged_down():
    live = view("a", {"gpus": [gpu(0)], "processes": []})
    assert all_heard([live, view("b", None, status=DOWN)])
    assert not all_heard([live, view("c", None, status=CONNECTING)])
    assert all_heard([])


def test_hostile_text_stays_one_bounded_label_value():
    evil = 'mal"lory\\\n' + "x" * 1000
    sample = {"gpus": [gpu(0, used=GiB)], "processes": [proc(10, "user", {0: GiB}, user=evil)]}
    v = view('host"\n', sample)
    m = scrape([v])
    ((labels, _),) = m["gputui_gpu_holder_info"]
    assert len(labels["user"]) <= 128 and labels["user"].startswith('mal"lory')
    assert "\n" not in labels["user"]  # made printable by the model before it is a label
    assert values(m, "gputui_host_up") == [1.0]


async def test_a_hostile_probes_escape_sequences_never_reach_the_exposition_raw():
    """The hostile probe puts ESC sequences, C1 controls, bidi and zero-width characters into every
    string it sends (tests/hostile_probe.py `escapes`): the exposition, served to Prometheus and
    read by people in Grafana, holds none of them raw, and still parses."""
    fleet, view, links = hostile_fleet("escapes", NAME)
    fleet.start()
    try:
        await fleet.wait_first_samples(20)
        assert view.sample is not None and view.sample.processes
        text = generate_latest(registry(FleetCollector(lambda: fleet.hosts))).decode()
    finally:
        await stop_fleet(fleet, links)
    assert not RAW.search(text), RAW.findall(text)[:5]
    info = [
        s.labels
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "gputui_host_info"
    ]
    assert info and "\\e" in info[0]["hostname"]  # there, escaped


# -- the exposition, byte for byte ------------------------------------------------------------------

EXPOSITION = FIXTURES / "metrics-exposition.prom"
AGE = re.compile(r"^(gputui_host_sample_age_seconds\{[^\n]*\}) \S+$", re.MULTILINE)


def exposition(views: list[HostView]) -> str:
    """The text a scrape gets, the version and each sample's age (a clock's reading) made constant."""
    text = generate_latest(registry(FleetCollector(lambda: views))).decode()
    return AGE.sub(
        r"\1 1.0", text.replace(f'build_info{{version="{__version__}"}}', 'build_info{version="VERSION"}')
    )


def test_the_exposition_of_a_fleet_of_every_kind_is_the_same_byte_for_byte():
    """The families, their order, their samples' order and every value, as the file written when the
    exposition was last meant to change: a refactoring of the collectors keeps it byte for byte."""
    assert exposition(a_fleet_of_every_kind()) == EXPOSITION.read_text(encoding="utf-8")


def test_a_collector_registers_only_under_a_group_with_a_place_in_the_exposition():
    with pytest.raises(ValueError, match="no place in the exposition"):
        collector("nvlink")

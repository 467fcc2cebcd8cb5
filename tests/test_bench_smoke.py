"""The fleet-scale and memory-soak benchmarks still run (tiny versions; nothing is timed here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.sshd import have_sshd

ROOT = Path(__file__).resolve().parents[1]


def bench(script: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.ssh
def test_fleet_scale_runs_with_two_hosts(tmp_path):
    if not have_sshd():
        pytest.skip("OpenSSH sshd is not installed (.ci/run installs it)")
    run = bench("fleet_scale.py", "--hosts", "2", "--seconds", "3", "--warmup", "1", "--name", "smoke",
                "--out-dir", str(tmp_path))  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "| hosts | app CPU % of a core |" in run.stdout
    assert "\n| 2 | " in run.stdout
    assert "left behind 0, sim dirs left 0" in run.stdout  # every remote probe ended by itself
    raw = json.loads((tmp_path / "fleet_scale_smoke.raw.json").read_text())
    assert raw["runs"][0]["hosts"] == 2 and raw["runs"][0]["samples"] > 0
    assert (tmp_path / "fleet_scale_smoke.txt").read_text().strip() in run.stdout


def test_fleet_scale_through_the_decode_path_runs_with_eight_hosts(tmp_path):
    """Issue 21's mode: recorded probe output as bytes through the line reader and parser, no SSH."""
    run = bench("fleet_scale.py", "--through", "decode", "--hosts", "8", "--seconds", "2", "--warmup", "1",
                "--templates", "4", "--name", "smoke", "--out-dir", str(tmp_path))  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "| hosts | app CPU % of a core | key -> screen ms p50 |" in run.stdout
    assert "\n| 8 | " in run.stdout
    assert "8 hosts got a sample" in run.stdout


def test_delta_wire_measures_a_real_probes_samples_whole_and_as_deltas():
    """A real probe (the sim reader: no GPU here; the NVML reader on a GPU host) asked for deltas
    as the app asks; every delta the app merges equals the probe's own merge parsed whole."""
    run = bench("delta_wire.py", "--reader", "sim", "--samples", "12", "--interval", "0.1")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "| whole | 12 | 0 |" in run.stdout
    assert "| delta | 12 | " in run.stdout and "| delta | 12 | 0 |" not in run.stdout
    assert "equals the probe's merge parsed whole: yes" in run.stdout


def test_memory_soak_runs_500_samples(tmp_path):
    run = bench("memory_soak.py", "--samples", "500", "--every", "100", "--name", "smoke",
                "--out-dir", str(tmp_path))  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "| samples | seconds | RSS MiB |" in run.stdout
    assert "\n| 500 | " in run.stdout
    raw = json.loads((tmp_path / "memory_soak_smoke.raw.json").read_text())
    assert [p["samples"] for p in raw["points"]] == [0, 100, 200, 300, 400, 500]
    assert (tmp_path / "memory_soak_smoke.txt").exists()


def test_sample_cost_runs_on_the_sim(tmp_path):
    out = tmp_path / "cost.json"
    run = bench("sample_cost.py", "--reader", "sim", "--samples", "20", "--spawns", "2", "--jobs", "2",
                "--out", str(out))  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "gputui probe: total" in run.stdout
    assert "gputui probe: total" in json.loads(out.read_text())["rows"]


NVML_PARTS = """
import sys
sys.path[:0] = ["bench", "."]
from tests.support.fakenvml import fake_pynvml, load
sys.modules["pynvml"] = fake_pynvml(load("nvml_h200x2_job.json"))
import sample_cost
from gputui.api import NvmlReader, Probe
probe = Probe(NvmlReader())
assert probe.start()["error"] is None
print(sorted(sample_cost.list_costs(probe, 3)))
print(sorted(sample_cost.preflight_calls(probe, 2)))
"""


def test_sample_cost_nvml_parts_run_on_a_recorded_gpu():
    # The parts of the bench that only run on a real GPU, on NVML answers recorded on 2 x H200
    # (tests/support/fakenvml.py): a GPU run found the preflight timer broken by a changed signature.
    run = subprocess.run(
        [sys.executable, "-c", NVML_PARTS], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "process lists in one call" in run.stdout and "nvmlDeviceGetApplicationsClock" in run.stdout


def test_holder_scan_runs_on_a_small_load(tmp_path):
    out = tmp_path / "scan.json"
    run = bench("holder_scan.py", "--procs", "40", "--fds", "5", "--holders", "3", "--runs", "2",
                "--out", str(out))  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "gputui full scan" in run.stdout and "steady" in run.stdout
    assert out.exists()


def test_clean_time_runs_on_the_sim(tmp_path):
    out = tmp_path / "clean.json"
    run = bench("clean_time.py", "--reader", "sim", "--runs", "1", "--gib", "1", "--term-timeout", "0.5",
                "--out", str(out))  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "(1x" in run.stdout  # the GPUs it ran on
    results = json.loads(out.read_text())
    assert {r["clean"] for s in results.values() for r in s["gputui"]} == {True}
    assert [r["clean"] for r in results["ghost"]["old"]] == [False]  # the old procedure cannot


def test_switch_soak_runs_a_few_switches(tmp_path):
    run = bench(
        "switch_soak.py", "--switches", "4", "--every", "2", "--name", "smoke", "--out-dir", str(tmp_path)
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "| switches | RSS MiB | live objects |" in run.stdout and "\n| 4 | " in run.stdout
    raw = json.loads((tmp_path / "switch_soak_smoke.raw.json").read_text())
    assert [p["switches"] for p in raw["points"]] == [0, 2, 4]


def test_busy_clean_runs_on_a_small_load(tmp_path):
    run = bench("busy_clean.py", "--procs", "40", "--fds", "5", "--runs", "1", "--cli-runs", "1",
                "--scans", "20", "--name", "smoke", "--out-dir", str(tmp_path))  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "| probe: plan to verified clean, targeted rescans" in run.stdout
    assert "| probe: plan to verified clean, full rescans (before)" in run.stdout
    assert "| `gputui clean --demo demo-a:0 --yes`: wall s" in run.stdout
    assert "| steady holder scan per sample, wall ms" in run.stdout
    raw = json.loads((tmp_path / "busy_clean_smoke.raw.json").read_text())
    for phase in ("idle", "busy"):
        assert set(raw[phase]["probe"]) == {"targeted", "full"}
        assert all(r["clean"] for rows in raw[phase]["probe"].values() for r in rows)
        assert [r["ok"] for r in raw[phase]["cli"]] == [True]
        assert len(raw[phase]["scan"]["ms"]) == 20
    assert (tmp_path / "busy_clean_smoke.txt").read_text().strip() in run.stdout


def test_flood_runs_and_times_keys_to_the_frame(tmp_path):
    out = tmp_path / "flood.json"
    run = bench("flood.py", "--seconds", "0", "--keys", "4", "--modes", "huge", "--out", str(out))
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Event loop is closed" not in run.stderr  # no probe's pipes outlive the app's loop
    [row] = json.loads(out.read_text())
    # All the keys asked for are pressed, however slow a busy machine is, and each reached a frame
    # that shows the cursor where it moved (none given up as unseen).
    assert row["mode"] == "huge" and row["keys"] == 4 and row["hostile"] == ["live", None]
    assert row["unseen"] == 0 and row["moved"] == 4 and row["framed"] == 4
    assert row["rss_max_mib"] > 0


def test_job_clean_runs_on_the_sim():
    run = bench("job_clean.py", "--runs", "1", "--gib", "0.5", "--term-timeout", "2")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "job: launcher (no GPU) + 2 ranks on GPU 0,1, --pid" in run.stdout
    assert "check launcher --pid (engine)        ok" in run.stdout
    assert "check supervisor --gpu 0 (engine)    ok" in run.stdout

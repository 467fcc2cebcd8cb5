"""The reset ladder (gputui/probe/run/reset.py), never automatic and never on a real shared GPU.

On the sim ("preflight" scenario: GPU 1 has 2.1 GiB no process holds): a dry run acts on nothing; a
holder of the GPU's device file blocks it and is named; a confirmed reset turns persistence off,
resets, sees the memory back at idle, turns persistence back on. The real host's path is the same
code with the NVML reader, whose driver calls go to `nvidia-smi`: here a fake one on PATH records
its arguments (no GPU is ever reset by a test).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from gputui.config.file import HostSpec
from gputui.fleet.fleet import Fleet
from gputui.kill.auditlog import ActionLog
from gputui.kill.operate import Operations
from gputui.probe.readers.sim import GiB
from tests.support.commands import clean, fleet_of
from tests.support.fakenvml import fake_pynvml, load

HOST = "p"


def preflight_host() -> Fleet:
    return fleet_of([HostSpec(name=HOST, reader="sim", sim_scenario="preflight", sim_seed=9)])


class Driver:
    """The probe's sim driver state, read from its state file. Not an attached SimReader: a reader
    holds every device file, as an NVML client does, and would block the reset itself."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.device_prefix = base + "/dev/nvidia"

    def state(self) -> dict:
        return json.loads(Path(self.base, "state.json").read_text())["gpus"]


async def driver_of(fleet: Fleet) -> Driver:
    fleet.start()
    await fleet.wait_first_samples(60)
    hello = fleet.view(HOST).raw_hello
    assert hello is not None
    return Driver(hello["host"]["device_prefix"][: -len("/dev/nvidia")])


async def orphaned(fleet: Fleet) -> int:
    """GPU 1's orphaned bytes in a fresh sample from the probe."""
    samples, _ = await fleet.full_scans([HOST], 10)
    gpu = next(g for g in samples[HOST].gpus if g.index == 1)
    assert gpu.accounting is not None
    return gpu.accounting.orphaned


async def test_the_ladder_on_the_sim_dry_run_blocked_then_done(tmp_path):
    """Through Operations.reset with the host kept up, so that its driver state can be looked at
    between the steps."""
    fleet = preflight_host()
    driver = await driver_of(fleet)
    ops = Operations(fleet, ActionLog(tmp_path / "a.jsonl", operator="t"), operator="t")
    try:
        # A dry run lists the ladder and acts on nothing.
        dry = await ops.reset(HOST, 1, dry_run=True)
        assert dry.ok and dry.result == "dry-run" and dry.blockers == ()
        assert driver.state()["1"]["orphaned"] == int(2.1 * GiB) and await orphaned(fleet) == int(2.1 * GiB)
        # A holder of /dev/nvidia1 (this test) blocks it, named; nothing done.
        held = os.open(driver.device_prefix + "1", os.O_RDONLY)
        try:
            blocked = await ops.reset(HOST, 1)
        finally:
            os.close(held)
        assert not blocked.ok and blocked.result == "refused"
        assert any(b.startswith(f"{os.getpid()} ") and "nvidia1" in b for b in blocked.blockers), (
            blocked.blockers
        )
        assert await orphaned(fleet) == int(2.1 * GiB)
        # Confirmed: persistence off, reset, memory back at idle, persistence on again.
        events: list[Any] = []
        done = await ops.reset(HOST, 1, on_event=events.append)
        assert done.ok and done.result == "reset", done.message
        assert [e.result for e in events if e.stage == "persistence"] == ["off", "on"]
        assert "orphaned" not in driver.state()["1"] and driver.state()["1"]["persistence"] is True
        assert await orphaned(fleet) == 0
        log = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
        resets = [r for r in log if r["kind"] == "plan" and r["stage"] == "reset"]
        assert len(resets) == 2 and log[-1]["kind"] == "done" and log[-1]["result"] == "reset"
    finally:
        ops.audit.close()
        await fleet.stop()


async def test_clean_reset_gpu_words_and_exit_codes(tmp_path):
    log = str(tmp_path / "a")
    code, out, _ = await clean(HOST, "--reset-gpu", "1", "--dry-run", "--log", log, fleet=preflight_host())
    assert code == 0 and "reset GPU 1" in out and "nothing blocks a reset" in out and "DRY RUN" in out
    code, out, _ = await clean(HOST, "--reset-gpu", "1", "--yes", "--log", log, fleet=preflight_host())
    assert (
        code == 0
        and "persistence mode off for GPU 1" in out
        and "RESET: GPU 1 reset: memory back at idle" in out
    )
    code, _, err = await clean(HOST, "--reset-gpu", "9", "--yes", "--log", log, fleet=preflight_host())
    assert code == 2 and "has no GPU 9" in err
    code, _, err = await clean(HOST, "--reset-gpu", "1", "--all", "--log", log, fleet=preflight_host())
    assert code == 2 and "a plan of its own" in err


async def test_a_read_only_host_refuses_a_reset(tmp_path):
    fleet = fleet_of([HostSpec(name=HOST, reader="sim", sim_scenario="preflight", read_only=True)])
    code, out, _ = await clean(HOST, "--reset-gpu", "1", "--yes", "--log", str(tmp_path / "a"), fleet=fleet)
    assert code == 4 and "read-only" in out


# -- the real host's path, with a fake nvidia-smi ----------------------------------------------


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """An `nvidia-smi` on PATH that records its argv, one JSON list a line, and succeeds."""
    calls = tmp_path / "calls.jsonl"
    script = tmp_path / "bin" / "nvidia-smi"
    script.parent.mkdir()
    script.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\nprint('GPU reset done')\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ.get('PATH', '')}")

    def recorded() -> list[list[str]]:
        return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []

    return recorded


def test_the_nvml_reader_resets_through_nvidia_smi_by_uuid_without_a_shell(monkeypatch, fake_smi):
    from gputui.probe.readers.nvml import NvmlReader

    rec = load("nvml_h200x2_idle.json")
    nv = fake_pynvml(rec)
    shutdowns = []
    nv.nvmlShutdown = lambda: shutdowns.append(1)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    reader = NvmlReader()
    reader.open()
    uuid = rec["gpus"][1]["uuid"]
    assert reader.set_persistence(1, False) == (True, "GPU reset done")
    ok, words = reader.reset(1)
    assert ok and words == "GPU reset done"
    assert reader.set_persistence(1, True)[0]
    assert fake_smi() == [["-i", uuid, "-pm", "0"], ["--gpu-reset", "-i", uuid], ["-i", uuid, "-pm", "1"]]
    assert shutdowns == [1]  # the reader let go of the driver for the reset, and took it again
    assert reader.read()[0][1]["uuid"] == uuid


def test_preflight_on_a_driver_that_supports_nothing_is_all_null(monkeypatch):
    from gputui.probe.readers.nvml import NvmlReader

    rec = load("nvml_h200x2_idle.json")
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(rec))
    reader = NvmlReader()
    reader.open()
    readings = reader.preflight()
    assert set(readings) == {0, 1}
    first = readings[0]
    assert first["throttle"] is None and first["ecc_uncorrected"] is None and first["nvlink_peers"] is None
    # What this recorded driver answers is there; everything it does not is null.
    assert {k for k, v in first.items() if v is not None} == {"persistence", "power_limit"}, first

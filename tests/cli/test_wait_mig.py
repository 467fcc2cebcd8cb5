"""`gputui wait` on a MIG instance (docs/SLURM.md "Which GPUs", RELIABILITY.md "Bad days, sixth
round"): on a MIG node Slurm names a job's GPUs by their MIG instance UUIDs, and the Prolog's
`gputui wait --gpu MIG-...` judges that instance alone: nothing runs in it, its memory at idle where
it can be judged, and its GPU's health; never its GPU's other instances, which run other jobs.

The sim's "mig" scenario (GPU 0 in MIG mode: train.py and notebook_kernel.py in instance 1.0,
serve.py in 2.0, 5.0 free; bench.py on GPU 1): the real CLI in a subprocess on a config host (each
command its own sim, the same UUIDs from the same seed), and `clean` then `wait` in-process over one
sim that the test opens and ends, so that the wait sees what the clean did.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gputui.config.file import HostSpec
from gputui.probe.readers.sim import SimReader
from tests.support.cli import gputui as run_gputui
from tests.support.commands import clean, fleet_of, wait
from tests.support.hosts import mig_uuids, sim_host_toml

CONFIG = sim_host_toml("mig", "mig", 3)


def gputui(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "hosts.toml"
    config.write_text(CONFIG)
    return run_gputui(*args, "--config", str(config), "mig", timeout=120)


@pytest.fixture
def uuids(tmp_path: Path) -> dict[str, str]:
    r = gputui(tmp_path, "snapshot", "--json")
    assert r.returncode == 0, r.stderr
    (host,) = json.loads(r.stdout)["hosts"]
    return mig_uuids(host)


def waited(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    r = gputui(tmp_path, "wait", "--json", "--timeout", "0", *args)
    return r.returncode, json.loads(r.stdout)


def test_a_free_mig_instance_is_ready_and_the_document_names_it(
    tmp_path: Path, uuids: dict[str, str]
) -> None:
    code, doc = waited(tmp_path, "--gpu", uuids["5.0"])
    assert code == 0 and doc["ready"] is True and doc["version"] == 1, doc
    (host,) = doc["hosts"]
    assert host["gpus"] == {}  # no whole GPU waited on: GPU 0's other instances run other jobs
    assert host["mig"] == {
        "0:5.0": {
            "gpu": 0,
            "mig": "5.0",
            "uuid": uuids["5.0"],
            "ready": True,
            "ready_for_s": 0.0,
            "unready": [],
        }
    }
    r = gputui(tmp_path, "wait", "--timeout", "0", "--gpu", uuids["5.0"])
    assert r.returncode == 0 and r.stdout.startswith("ready: mig MIG 0:5.0 (after "), r.stdout + r.stderr


def test_a_busy_mig_instance_is_not_ready_and_the_reason_names_what_runs_in_it(
    tmp_path: Path, uuids: dict[str, str]
) -> None:
    code, doc = waited(tmp_path, "--gpu", uuids["1.0"])
    assert code == 1 and doc["ready"] is False
    entry = doc["hosts"][0]["mig"]["0:1.0"]
    assert entry["uuid"] == uuids["1.0"] and entry["ready"] is False
    reasons = {u["condition"]: u["words"] for u in entry["unready"]}
    # Its processes, none of instance 2.0's; no utilization (NVML gives none under MIG), and its
    # memory not judged while something runs in it (a process explains it).
    assert set(reasons) == {"processes"}, reasons
    assert "train.py" in reasons["processes"] and "notebook_kernel.py" in reasons["processes"]
    assert "serve.py" not in reasons["processes"]
    r = gputui(tmp_path, "wait", "--timeout", "0", "--gpu", uuids["1.0"])
    assert r.returncode == 1
    [line] = [
        x for x in r.stderr.splitlines() if x.startswith("  mig MIG 0:1.0: processes: used or held by ")
    ]
    assert "train.py" in line and "notebook_kernel.py" in line


def test_instances_and_whole_gpus_together(tmp_path: Path, uuids: dict[str, str]) -> None:
    # Two instances and a whole GPU (GPU 2 is free), as UUIDs and a positional HOST:N.
    (tmp_path / "hosts.toml").write_text(CONFIG)
    r = run_gputui(
        "wait", "mig:2", "--json", "--timeout", "0", "--gpu", uuids["5.0"], "--gpu", uuids["2.0"],
        "--config", str(tmp_path / "hosts.toml"), timeout=120,
    )  # fmt: skip
    code, doc = r.returncode, json.loads(r.stdout)
    assert code == 1
    (host,) = doc["hosts"]
    assert set(host["gpus"]) == {"2"} and host["gpus"]["2"]["ready"] is True
    assert set(host["mig"]) == {"0:2.0", "0:5.0"}
    assert host["mig"]["0:5.0"]["ready"] is True and host["mig"]["0:2.0"]["ready"] is False
    assert "serve.py" in host["mig"]["0:2.0"]["unready"][0]["words"]
    # The whole GPU 0 is still judged as a whole GPU: its instances' processes hold it.
    code, doc = waited(tmp_path, "--gpu", "0")
    assert code == 1 and "mig" not in doc["hosts"][0]


def test_utilization_is_not_asked_of_a_mig_instance(tmp_path: Path, uuids: dict[str, str]) -> None:
    # NVML reports no utilization per MIG instance, and none for its GPU in MIG mode: asked, refused.
    r = gputui(tmp_path, "wait", "--timeout", "0", "--util-below", "50", "--gpu", uuids["5.0"])
    assert r.returncode == 2
    assert (
        r.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "--util-below: NVML reports no utilization of a MIG instance (0:5.0), nor of its GPU in MIG mode"
        )
    )
    # --memory-below bounds the instance's own memory; the GPU's conditions are its GPU's.
    code, doc = waited(tmp_path, "--memory-below", "1G", "--temp-below", "149", "--gpu", uuids["5.0"])
    assert code == 0, doc


@pytest.fixture
def mig_sim(tmp_path: Path) -> Iterator[SimReader]:
    """The "mig" scenario's sim, opened here: every command of the test attaches to it."""
    (tmp_path / "sims").mkdir()
    reader = SimReader(scenario="mig", seed=3, base_dir=str(tmp_path / "sims"), hold_devices=False)
    reader.open()
    try:
        yield reader
    finally:
        reader.close()


async def instances_of(spec: HostSpec) -> dict[str, str]:
    """GPU 0's MIG instances by label (`1.0`), from a first sample of `spec`."""
    fleet = fleet_of([spec])
    fleet.start()
    try:
        await fleet.wait_first_samples(60)
        sample = fleet.view(spec.name).sample
        assert sample is not None
        return {i.label: i.uuid for i in sample.gpus[0].mig_instances or () if i.uuid}
    finally:
        await fleet.stop()


async def test_after_clean_of_the_instance_wait_finds_it_ready(tmp_path: Path, mig_sim: SimReader) -> None:
    spec = HostSpec(name="mig", reader="sim", sim_dir=mig_sim.directory)
    uuids = await instances_of(spec)
    code, doc, text, _ = await wait(
        "mig", "--gpu", uuids["1.0"], "--json", "--timeout", "0", fleet=fleet_of([spec])
    )
    assert code == 1 and doc is not None and doc["hosts"][0]["mig"]["0:1.0"]["ready"] is False, text
    code, out, err = await clean(
        "mig",
        "--gpu",
        uuids["1.0"],
        "--yes",
        "--log",
        str(tmp_path / "actions.jsonl"),
        fleet=fleet_of([spec]),
    )
    assert code == 0, out + err
    code, doc, text, _ = await wait(
        "mig", "--gpu", uuids["1.0"], "--json", "--timeout", "30", fleet=fleet_of([spec])
    )
    assert code == 0 and doc is not None, text
    assert doc["hosts"][0]["mig"]["0:1.0"] == {
        "gpu": 0, "mig": "1.0", "uuid": uuids["1.0"], "ready": True, "ready_for_s": 0.0, "unready": []
    }  # fmt: skip
    # Instance 2.0's job was left alone: still there, the instance not ready.
    code, doc, text, _ = await wait(
        "mig", "--gpu", uuids["2.0"], "--json", "--timeout", "0", fleet=fleet_of([spec])
    )
    assert code == 1 and doc is not None and "serve.py" in text, text

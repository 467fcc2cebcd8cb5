"""A MIG instance's UUID names that instance alone (docs/SLURM.md "Which GPUs", RELIABILITY.md
"Bad days, sixth round"): on a MIG node Slurm gives a job's GPUs as MIG instance UUIDs, and
`gputui clean --gpu MIG-...` stops the processes in that instance, never those of its GPU's other
instances (other jobs), then proves the instance clean.

The sim's "mig" scenario (GPU 0 in MIG mode: train.py and notebook_kernel.py in instance 1.0,
serve.py in 2.0, 5.0 free; bench.py on GPU 1), a config host, the real CLI in a subprocess. The
sim's MIG UUIDs come from its seed: the same in every command of one seed.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.support.cli import gputui as run_gputui
from tests.support.hosts import mig_uuids, sim_host_toml

CONFIG = sim_host_toml("mig", "mig", 3)


def gputui(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "hosts.toml"
    config.write_text(CONFIG)
    return run_gputui(*args, "--config", str(config), "mig", timeout=120)


def instance_uuids(tmp_path: Path) -> dict[str, str]:
    """GPU 0's MIG instances by label (`1.0`), from the snapshot."""
    r = gputui(tmp_path, "snapshot", "--json")
    assert r.returncode == 0, r.stderr
    (host,) = json.loads(r.stdout)["hosts"]
    return mig_uuids(host)


def script_of(entry: dict[str, Any]) -> str:
    return next(a.rsplit("/", 1)[-1] for a in entry["command"] if a.endswith(".py"))


def test_clean_of_a_mig_uuid_stops_that_instance_alone(tmp_path: Path) -> None:
    uuids = instance_uuids(tmp_path)
    assert set(uuids) == {"1.0", "2.0", "5.0"}
    audit = tmp_path / "actions.jsonl"
    r = gputui(tmp_path, "clean", "--gpu", uuids["1.0"], "--yes", "--json", "--log", str(audit))
    assert r.returncode == 0, r.stdout + r.stderr
    (host,) = json.loads(r.stdout)["hosts"]
    assert host["status"] == "clean"
    plan = host["plan"]
    assert plan["scope"] == "mig" and plan["mig"] == ["0:1.0"] and plan["gpus"] == []
    assert sorted(script_of(t) for t in plan["targets"]) == ["notebook_kernel.py", "train.py"]
    assert "MIG instance 0:1.0: clean" in host["message"]
    # Nothing was sent to serve.py, in instance 2.0 of the same GPU: every signal is in the audit
    # log before it is sent.
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    signalled = {r["pid"] for r in records if r["kind"] == "event" and r.get("signal")}
    targets = {t["pid"] for t in plan["targets"]}
    assert signalled == targets
    assert any(r.get("stage") == "verify" and "MIG instance 0:1.0: clean" in r["message"] for r in records)


def test_a_free_mig_instance_is_proved_clean_with_nothing_signalled(tmp_path: Path) -> None:
    uuids = instance_uuids(tmp_path)
    r = gputui(tmp_path, "clean", "--gpu", uuids["5.0"].upper().replace("MIG-", "mig-"), "--yes", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    (host,) = json.loads(r.stdout)["hosts"]
    assert host["status"] == "clean" and host["plan"]["targets"] == []
    assert "MIG instance 0:5.0: clean, nothing runs in it, memory at idle" in host["message"]


def test_mig_uuids_on_the_command_line(tmp_path: Path) -> None:
    uuids = instance_uuids(tmp_path)
    # A unique prefix names the instance, as for a GPU- UUID; `MIG-` alone names several.
    r = gputui(tmp_path, "clean", "--gpu", uuids["2.0"][:12], "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    (host,) = json.loads(r.stdout)["hosts"]
    assert [script_of(t) for t in host["plan"]["targets"]] == ["serve.py"]
    r = gputui(tmp_path, "clean", "--gpu", "MIG-", "--dry-run")
    assert r.returncode == 2 and "several MIG instances match that UUID" in r.stderr
    r = gputui(tmp_path, "clean", "--gpu", "MIG-00000000-0000-0000-0000-000000000000", "--dry-run")
    assert r.returncode == 2 and "no MIG instance has that UUID" in r.stderr

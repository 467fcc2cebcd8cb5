"""bench/export_burst.py and bench/replay_at.py still run (tiny versions; nothing is timed here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.mark.timeout(600)
def test_export_burst_runs(tmp_path):
    run = bench(
        "bench/export_burst.py", "--burst", "5", "--slow", "2", "--name", "smoke", "--out-dir", str(tmp_path)
    )
    assert run.returncode == 0, run.stderr[-3000:]
    raw = json.loads((tmp_path / "export_burst_smoke.raw.json").read_text())
    (only,) = raw["bursts"]
    assert only["answered"] == 5 and only["failed"] == {}
    assert raw["slow"]["closed"] == 2 and raw["stderr_tracebacks"] == 0 and raw["exit"] == 0


@pytest.mark.timeout(600)
def test_replay_at_runs(tmp_path):
    path = tmp_path / "r.gz"
    run = bench("bench/replay_at.py", "--expanded", "2MiB", "--full-scan", "--path", str(path),
                "--name", "smoke", "--out-dir", str(tmp_path))  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    raw = json.loads((tmp_path / "replay_at_smoke.raw.json").read_text())
    assert raw["cli_exit"] == 0 and all(r.get("same", True) for r in raw["runs"])
    assert not path.exists()

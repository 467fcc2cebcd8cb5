"""bench/export_scrape.py still runs (a tiny version; nothing is timed here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(600)
def test_export_scrape_runs_with_two_hosts(tmp_path):
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "export_scrape.py"), "--hosts", "2", "--scrapes", "2",
         "--name", "smoke", "--out-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "| hosts | GPUs | series |" in run.stdout and "\n| 2 | 16 | " in run.stdout
    raw = json.loads((tmp_path / "export_scrape_smoke.raw.json").read_text())
    (only,) = raw["runs"]
    assert only["hosts"] == 2 and only["scrapes"] == 2 and only["exit"] == 0
    assert only["series"] == only["lines"]  # what was built is what was served
    assert (tmp_path / "export_scrape_smoke.txt").read_text().strip() in run.stdout

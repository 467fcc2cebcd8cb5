"""bench/ssh_fanout.py still runs (a tiny version; nothing is timed here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.sshd import have_sshd

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.ssh


@pytest.mark.parametrize("mode", ["connect", "probe"])
def test_ssh_fanout_runs_with_four_hosts(tmp_path: Path, mode: str) -> None:
    if not have_sshd():
        pytest.skip("OpenSSH sshd is not installed (.ci/run installs it)")
    out = tmp_path / "rows.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "ssh_fanout.py"), "--hosts", "4", "--servers", "2",
         "--mode", mode, "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "all live" in run.stdout
    rows = json.loads(out.read_text())
    assert len(rows) == 4  # default and tight MaxStartups, with and without the dialer
    assert all(r["hosts"] == 4 and r["lost"] == 0 for r in rows)
    assert {r["dialer"] for r in rows} == {"gputui", "none (before)"}

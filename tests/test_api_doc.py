"""docs/API.md's example runs as written: its first python block, in a fresh interpreter, against a
simulated host. A rename in gputui.api breaks this test, not a reader's first try."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def test_the_api_example_runs(tmp_path):
    code = BLOCK.search((REPO / "docs" / "API.md").read_text())
    assert code is not None, "docs/API.md has no python block"
    script = tmp_path / "example.py"
    script.write_text(code.group(1))
    env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "sim-a live", done.stdout
    assert any(re.fullmatch(r"  GPU 0: \d+ of \d+ bytes used, .+", line) for line in lines), done.stdout

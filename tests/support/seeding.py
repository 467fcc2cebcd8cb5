"""Seeding a wrong import into a copy of the tree and linting it: a contract that still passes with
the seed has rotted (tests/test_layers.py does the same for the contract over the whole package)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def lint_with_seed(tmp_path: Path, module: str, line: str) -> str:
    """lint-imports' output on a copy of gputui/ where `module` (a path under the repository)
    ends with `line`; fails the test if the copy lints clean."""
    shutil.copytree(REPO / "gputui", tmp_path / "gputui", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / module).open("a") as f:
        f.write(f"\n{line}  # seeded by a test\n")
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint), "--no-cache", "--config", str(tmp_path / "pyproject.toml")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        timeout=120,
        check=False,
    )
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    return out

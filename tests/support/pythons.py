"""The older interpreters this machine (and CI) has for the probe's portability tests: the probe runs
on hosts with Python >= 3.8, and the bootstrap refuses what is older. A test skips where one is
missing."""

from __future__ import annotations

from pathlib import Path

PYTHON38 = Path("/root/.pyenv/versions/3.8.18/bin/python")
OLD_PYTHONS = [Path(f"/root/.pyenv/versions/{v}/bin/python") for v in ("3.6.15", "3.7.16", "2.7.18")]

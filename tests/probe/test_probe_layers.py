"""Inside gputui.probe, layers hold by contract (pyproject.toml): /proc readers below the sampling
core, the core below the kill run, the run's verdicts below its stages. Each seeded wrong import
below must break the contract named beside it, or it has rotted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.seeding import lint_with_seed

SEEDS = {
    "procfs imports the core": ("gputui/probe/procfs.py", "import gputui.probe.core", "Probe layers"),
    "the core imports the kill run": (
        "gputui/probe/core.py",
        "import gputui.probe.run.reaper",
        "Probe layers",
    ),
    "the verdicts import the stages": (
        "gputui/probe/run/verdicts.py",
        "import gputui.probe.run.reaper",
        "Kill run layers",
    ),
}


@pytest.mark.parametrize("seed", SEEDS.values(), ids=list(SEEDS))
def test_each_seeded_wrong_import_breaks_the_probe_contracts(
    tmp_path: Path, seed: tuple[str, str, str]
) -> None:
    out = lint_with_seed(tmp_path, seed[0], seed[1])
    assert seed[2] in out and "BROKEN" in out, out

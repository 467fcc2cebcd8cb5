"""Inside gputui.kill, layers hold by contract (pyproject.toml): the plans know nothing of who
runs them, the audit log nothing of the operations that write it. Each seeded wrong import below
must break the contract named beside it, or it has rotted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.seeding import lint_with_seed

SEEDS = {
    "a plan's entries import the operations": (
        "gputui/kill/plan/entries.py",
        "import gputui.kill.operate",
        "Kill layers",
    ),
    "the audit log imports the operations": (
        "gputui/kill/auditlog.py",
        "import gputui.kill.operate",
        "Kill layers",
    ),
    "a plan's entries import the planner": (
        "gputui/kill/plan/entries.py",
        "import gputui.kill.plan.planner",
        "Plan layers",
    ),
}


@pytest.mark.parametrize("seed", SEEDS.values(), ids=list(SEEDS))
def test_each_seeded_wrong_import_breaks_the_kill_contracts(
    tmp_path: Path, seed: tuple[str, str, str]
) -> None:
    out = lint_with_seed(tmp_path, seed[0], seed[1])
    assert seed[2] in out and "BROKEN" in out, out

"""Inside gputui.cli, layers hold by contract (pyproject.toml "CLI layers"): no command imports the
dispatch back, and the shared machinery imports no command. Each seeded wrong import below must
break that contract, or it has rotted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.seeding import lint_with_seed

SEEDS = {
    "a command imports main": ("gputui/cli/commands/clean.py", "import gputui.cli.main"),
    "the exit codes import clean": ("gputui/cli/exits.py", "import gputui.cli.clean"),
    "the shared options import a command": ("gputui/cli/options.py", "import gputui.cli.commands.wait"),
    "the demo's hosts import its daemon": ("gputui/cli/demo.py", "import gputui.cli.demod"),
    "the machinery imports main": ("gputui/cli/record.py", "import gputui.cli.main"),
}


@pytest.mark.parametrize("seed", SEEDS.values(), ids=list(SEEDS))
def test_each_seeded_wrong_import_breaks_the_cli_contract(tmp_path: Path, seed: tuple[str, str]) -> None:
    out = " ".join(lint_with_seed(tmp_path, seed[0], seed[1]).split())  # (lint-imports wraps long names)
    assert "CLI layers: main dispatches" in out and "nothing imports back up BROKEN" in out, out

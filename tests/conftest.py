"""For every test: the user's state directory (where the audit log lives by default) is a fresh one,
and `--demo` means a fresh demo of the command's own.

The dashboard reads the default audit log at start and acknowledges the unfinished actions it finds:
a test that builds an app (or runs `gputui clean`) without `--log` must never read, report or write
the real user's log.

`--demo` attaches to the user's live demo (gputui/cli/demod.py), started if none runs: a test must never
start or change the real user's demo, and needs the scenario's state as it starts, every time
(snapshots). GPUTUI_DEMO=fresh gives each command its own sims; tests of the live demo
(tests/cli/test_demo_live.py) unset it and give each test a runtime directory of its own.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# At import as well as in the fixture: an environment a test module copies when it is imported
# (before any fixture runs) must not start the user's live demo either.
os.environ["GPUTUI_DEMO"] = "fresh"


@pytest.fixture(autouse=True)
def private_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.setenv("GPUTUI_DEMO", "fresh")
    return state

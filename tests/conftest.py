"""For every test: the user's state directory (where the audit log lives by default) is a fresh one.

The dashboard reads the default audit log at start and acknowledges the unfinished actions it finds:
a test that builds an app (or runs `gputui clean`) without `--log` must never read, report or write
the real user's log.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def private_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state

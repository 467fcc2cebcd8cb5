"""The palette's "Export snapshot" writes where gputui keeps its files (the user's state dir, beside
the audit log), not into whatever directory the dashboard was started from, and says the full path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.apps import build_app
from tests.support.pilot import main_of, palette, settle, wait_for


async def test_export_goes_to_the_state_dir_and_says_its_full_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, started_in = tmp_path / "state", tmp_path / "cwd"
    started_in.mkdir()
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.chdir(started_in)
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await palette(pilot, "export snapshot")
        await wait_for(pilot, lambda: app.last_export is not None)
        assert app.last_export is not None
        json_path, text_path = app.last_export
        assert json_path.parent == text_path.parent == state / "gputui" / "snapshots"
        assert json_path.is_absolute() and json_path.is_file() and text_path.is_file()
        assert list(started_in.iterdir()) == []  # nothing where it was started
        said = [e.text for e in main_of(app).action_log.entries]
        assert any(str(json_path) in line and str(text_path) in line for line in said), said
        toasts = [str(n.message) for n in app._notifications]
        assert any(str(json_path) in t for t in toasts), toasts

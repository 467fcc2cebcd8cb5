"""The live demo in a private TMPDIR (mode 700, no XDG_RUNTIME_DIR): it starts, a snapshot and a clean
attach to it, and it stops leaving nothing (the `live` fixture checks that). Real `gputui` commands."""

from __future__ import annotations

import stat

import pytest

from tests.support.livedemo import Live, processes, snapshot

pytestmark = pytest.mark.timeout(600)


def test_the_demo_runs_in_a_private_tmpdir(live: Live) -> None:
    private = live.root / "private"
    private.mkdir()
    private.chmod(0o700)
    live.env.pop("XDG_RUNTIME_DIR", None)
    live.env["TMPDIR"] = str(private)
    started = live.gputui("demo", "start")
    live.record()
    assert started.returncode == 0, started.stdout + started.stderr
    assert str(private) in started.stdout + started.stderr
    before = snapshot(live, "demo-a")
    assert processes(before, "demo-a", 0)
    cleaned = live.gputui("clean", "--demo", "demo-a:0", "--yes")
    live.record()
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert not processes(snapshot(live, "demo-a"), "demo-a", 0) & processes(before, "demo-a", 0)
    assert stat.S_IMODE(private.stat().st_mode) == 0o700

"""Fixtures for the CLI tests: `live`, a live demo of the test's own (tests/support/livedemo.py),
stopped at the end with a check that no process of it is left. Only processes recorded as the
demo's are ever signalled, and only if `gputui demo stop` did not end them."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.livedemo import POLL, Live, private_env
from tests.support.waiting import wait_until


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    env, run, _ = private_env(tmp_path)
    cwd = tmp_path / "work"
    cwd.mkdir()
    demo = Live(tmp_path, run, env, cwd)
    try:
        yield demo
    finally:
        try:
            demo.record()
        except AssertionError:
            pass  # a status that failed: the stop and the scan below still say what is left
        stopped = demo.gputui("demo", "stop")
        wait_until(lambda: not demo.left(), 60.0, step=POLL)
        left = demo.left()
        for pid, _ in left:  # only processes of this test's own demo, recorded above
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert not left, f"processes of the demo left after `gputui demo stop`: {left}"

"""Bad usage is refused before anything is started: a command that exits 2 leaves no demo running
behind it (the real CLI, in a private demo environment of the test's own: tests/support/livedemo.py).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.support.livedemo import Live

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port some other program listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("command", ["export", "serve"])
def test_a_listen_address_that_is_taken_starts_no_demo(live: Live, taken: int, command: str) -> None:
    result = live.gputui(command, "--demo", "--listen", f"127.0.0.1:{taken}")
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--listen 127.0.0.1:{taken}: " in lines[0], lines
    assert "in use" in lines[0].lower(), lines
    assert not live.status()["running"], result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["export", "--demo", "--listen", "0.0.0.0:0", "--once"],
        ["export", "--demo"],
        ["serve", "--demo", "--listen", "0.0.0.0:0"],
        ["serve", "--demo", "--tls-cert", "x.pem"],
        ["clean", "--demo", "demo-a:0", "--signals", "kill", "--term-timeout", "30", "--dry-run"],
        ["clean", "--demo", "demo-a:0", "--idle-minutes", "5", "--dry-run"],
        ["clean", "--demo", "demo-a:0", "--sigint-first", "--signals", "kill", "--dry-run"],
        ["snapshot", "--demo", "--gpu", "nosuch:0"],
        ["--demo", "--gpu", "nosuch:0"],
        ["--demo", "--theme", "nosuch"],
        ["--demo"],  # stdout is no terminal here
    ],
    ids=[
        "export-once-listen",
        "export-nowhere",
        "serve-open",
        "serve-half-tls",
        "clean-kill-with-term-timeout",
        "clean-idle-minutes-alone",
        "clean-sigint-and-kill",
        "snapshot-gpu-of-no-host",
        "dashboard-gpu-of-no-host",
        "dashboard-no-theme",
        "dashboard-no-terminal",
    ],
)
def test_bad_usage_starts_no_demo(live: Live, args: list[str]) -> None:
    result = live.gputui(*args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not live.status()["running"], result.stderr

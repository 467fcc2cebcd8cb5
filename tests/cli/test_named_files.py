"""The files a user names for a command to read (a hub token, a hub's tokens, its TLS certificate and
key) that are not regular files: one line, exit 2, before anything is read. A FIFO is the case that
hurt: opening it waits for a writer, and Ctrl+C did not end the wait. Real subprocesses; the run's
timeout is only the net that ends a run that hangs (by its PID, subprocess.run's own)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.cli import gputui

pytestmark = pytest.mark.timeout(300)

HANG = 60  # seconds after which a run that waits on a FIFO is killed: a hang, not an answer


def refused(result_args: list[str], path: Path) -> None:
    result = gputui(*result_args, timeout=HANG)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not a regular file" in lines[0] and str(path) in lines[0], lines
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.fixture(params=["fifo", "directory"])
def odd(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = tmp_path / "named"
    if request.param == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    return path


@pytest.mark.parametrize("command", ["snapshot", "wait", "dashboard"])
def test_a_hub_token_file_that_is_not_a_regular_file_is_refused(odd: Path, command: str) -> None:
    args = ["--hub", "http://127.0.0.1:1", "--hub-token-file", str(odd)]
    refused([*args] if command == "dashboard" else [command, *args], odd)


def test_a_tokens_file_that_is_not_a_regular_file_is_refused(odd: Path) -> None:
    refused(["serve", "--demo", "--tokens", str(odd)], odd)


@pytest.mark.parametrize("which", ["--tls-cert", "--tls-key"])
def test_a_tls_file_that_is_not_a_regular_file_is_refused(odd: Path, tmp_path: Path, which: str) -> None:
    other = tmp_path / "other.pem"
    other.write_text("not a certificate\n")
    cert, key = (odd, other) if which == "--tls-cert" else (other, odd)
    refused(["serve", "--demo", "--tls-cert", str(cert), "--tls-key", str(key)], odd)

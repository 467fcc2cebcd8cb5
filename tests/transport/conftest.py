"""Fixtures for the transport tests: real OpenSSH servers on loopback (tests/support/sshd.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.sshd import SshEnv, have_sshd


@pytest.fixture(autouse=True)
def _no_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's ssh-agent must not make auth results differ from CI's.
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


@pytest.fixture
def ssh_env(tmp_path: Path) -> Iterator[SshEnv]:
    """An empty SshEnv: call `ssh_env.add("name")` for each server; all are stopped afterwards."""
    if not have_sshd():
        pytest.skip("OpenSSH sshd is not installed (.ci/run installs it)")
    env = SshEnv(tmp_path / "ssh")
    try:
        yield env
    finally:
        env.close()

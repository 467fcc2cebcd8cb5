"""Fixtures for the transport tests: real OpenSSH servers on loopback (tests/sshd.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.config import HostSpec
from tests.sshd import SshEnv, have_sshd

PYTHON38 = Path("/root/.pyenv/versions/3.8.18/bin/python")
OLD_PYTHONS = [Path(f"/root/.pyenv/versions/{v}/bin/python") for v in ("3.6.15", "3.7.16", "2.7.18")]


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


def probe_host(name: str = "local", **fields: object) -> HostSpec:
    """A host whose probe needs no GPU: the simulated reader, scenario "empty" (no jobs)."""
    return HostSpec(name=name, reader="sim", sim_scenario="empty", **fields)  # type: ignore[arg-type]

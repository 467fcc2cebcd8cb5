"""Hosts from sources, connected over real loopback SSH: a hostlist and @ssh through the CLI, and an
Ansible inventory's ProxyJump reaching asyncssh (the link's route goes through the jump host)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.config.file import parse_config
from gputui.inventory.specs import host_specs
from gputui.transport.ssh import SshLink
from tests.support.sshcluster import NO_BASHRC, SshCluster, running_cluster
from tests.support.sshd import SshEnv, have_sshd

pytestmark = pytest.mark.ssh


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SshCluster]:
    layout = {"sshd-1": ["gpu-1", "gpu-2"], "sshd-2": ["gpu-3"]}
    yield from running_cluster(tmp_path / "cluster", layout, sshd_config=(NO_BASHRC,))


def test_snapshot_of_a_hostlist_and_an_ssh_pattern(cluster: SshCluster) -> None:
    """`[defaults]` reaches hosts a source lists: here the simulated reader, so no GPU is needed."""
    config = cluster.base / "gputui.toml"
    config.write_text('[defaults]\nreader = "sim"\nsim_scenario = "empty"\n')
    config.chmod(0o600)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputui",
            "snapshot",
            "gpu-[1-2]",
            "@ssh:gpu-3",
            "--json",
            "--config",
            str(config),
        ],
        env=cluster.cli_env(),
        cwd=cluster.base,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    hosts = json.loads(run.stdout)["hosts"]
    assert [h["name"] for h in hosts] == ["gpu-1", "gpu-2", "gpu-3"]
    assert all(h["status"] == "live" for h in hosts), hosts


@pytest.mark.skipif(
    shutil.which("ansible-inventory") is None, reason="ansible-core is not installed (.ci/run)"
)
async def test_an_inventory_jump_host_reaches_asyncssh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not have_sshd():
        pytest.skip("OpenSSH sshd is not installed (.ci/run installs it)")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    env = SshEnv(tmp_path / "ssh")
    try:
        env.add("bastion")
        inner = env.add("inner")
        inventory = tmp_path / "hosts.ini"
        inventory.write_text(
            "[gpus]\n"
            f"inner-gpu ansible_host=127.0.0.1 ansible_port={inner.port} "
            "ansible_ssh_common_args='-o ProxyJump=bastion'\n"
        )
        config = parse_config('[defaults]\nreader = "sim"\nsim_scenario = "empty"\n')
        [spec] = host_specs([f"@ansible:{inventory}:gpus"], config)
        assert (spec.address, spec.port, spec.jump) == ("127.0.0.1", inner.port, "bastion")
        link = SshLink(
            spec,
            known_hosts=env.known_hosts,
            ssh_config=env.ssh_config,
            client_keys=[env.servers["bastion"].user_key, inner.user_key],
            agent_path=None,
            connect_timeout=10.0,
        )
        await link.open()
        try:
            assert link.route == ["bastion", "127.0.0.1"]
            assert link.hello is not None
        finally:
            await link.close()
    finally:
        env.close()

"""A user sees none of a dependency's warnings: any SSH use printed ten lines of
`CryptographyDeprecationWarning: DSA is deprecated` from asyncssh (2.24, with cryptography 51) on a
fresh install. The real CLI over a real loopback sshd (tests/support/sshcluster.py), with the default
warning settings and with every warning shown (-W default, PYTHONWARNINGS=default): stderr has none.
The filter is that one class from asyncssh's modules only: gputui's own warnings, and the same class
from anywhere else, are still shown."""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.utils import CryptographyDeprecationWarning

from gputui.transport.quiet import quiet_asyncssh_warnings
from tests.support.sshcluster import SshCluster, running_cluster

HOSTS = [{"name": "gpu-a", "reader": "sim", "sim_scenario": "empty"}]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SshCluster]:
    yield from running_cluster(tmp_path / "cluster", {"sshd-1": ["gpu-a"]})


@pytest.mark.ssh
@pytest.mark.parametrize(
    ("python_flags", "environ"),
    [((), {}), (("-W", "default"), {}), ((), {"PYTHONWARNINGS": "default"})],
    ids=["defaults", "-W default", "PYTHONWARNINGS=default"],
)
def test_an_ssh_snapshot_prints_no_warning(
    cluster: SshCluster, python_flags: tuple[str, ...], environ: dict[str, str]
) -> None:
    config = cluster.write_config(HOSTS)
    env = {k: v for k, v in cluster.cli_env().items() if k != "PYTHONWARNINGS"}
    run = subprocess.run(
        [sys.executable, *python_flags, "-m", "gputui", "snapshot", "gpu-a", "--config", str(config)],
        env={**env, **environ},
        cwd=cluster.base,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "gpu-a" in run.stdout
    assert "Warning" not in run.stderr, run.stderr


def test_the_filter_hides_asyncssh_s_dsa_warning_only() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        quiet_asyncssh_warnings()
        warnings.warn_explicit("DSA is deprecated", CryptographyDeprecationWarning, "misc.py", 1,
                               module="asyncssh.crypto.misc")  # fmt: skip
        warnings.warn_explicit("gputui's own", UserWarning, "x.py", 1, module="gputui.transport.ssh")
        warnings.warn_explicit(
            "elsewhere", CryptographyDeprecationWarning, "y.py", 1, module="paramiko.dsskey"
        )
    assert [str(w.message) for w in seen] == ["gputui's own", "elsewhere"]

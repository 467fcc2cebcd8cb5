"""The sim under a private temporary directory (TMPDIR mode 700, as a careful user sets it).

The sim, the demo and their probes live in the TMPDIR they are given, private or not. Only a job run
as another user (root's sims only, a test facility: no scenario runs one) must reach its sim by path
(its program in bin/, the device files, its context directory): where it cannot, the sim refuses that
job before it starts, in one line naming the directory in the way. Placed where every user may search,
such a job runs under a private TMPDIR too. Real sims, real jobs run as `nobody`, real directories.
"""

from __future__ import annotations

import os
import pwd
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.probe.readers.sim import GiB, SimError
from tests.support.simprobe import fd_links

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root runs a sim job as another user")


@pytest.fixture
def nobody() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody'")


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """TMPDIR: a fresh directory only its owner may enter; tempfile asked again (it caches its choice)."""
    private = tmp_path / "private"
    private.mkdir()
    private.chmod(0o700)
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert tempfile.gettempdir() == str(private)
    return private


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory every user may search, of this test's own (pytest's directories are private)."""
    path = Path(tempfile.mkdtemp(prefix="gputui-test-shared-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        path.rmdir()


def test_the_sim_stays_in_a_private_tmpdir_and_a_job_of_another_user_says_what_it_needs(
    make_sim, private_tmp, nobody
) -> None:
    reader = make_sim(gpus=1, base_dir=None)
    assert private_tmp in Path(reader.directory).parents
    assert stat.S_IMODE(private_tmp.stat().st_mode) == 0o700
    mine = reader.spawn("idle", gpu=0, memory=GiB)  # root's own job runs there as always
    assert reader.read()[1] == {mine.pid: {0: GiB}}
    with pytest.raises(SimError) as err:
        reader.spawn("idle", gpu=0, memory=GiB, user="nobody")
    message = str(err.value)
    assert "nobody" in message and str(private_tmp) in message and "\n" not in message, message
    assert "died at start-up" not in message


def test_a_job_of_another_user_runs_where_every_user_may_search(
    make_sim, private_tmp, shared, nobody
) -> None:
    reader = make_sim(gpus=2, base_dir=str(shared))
    job = reader.spawn("idle", gpu=0, memory=GiB, user="nobody")
    with open(f"/proc/{job.pid}/status") as f:
        uids = next(line.split()[1:] for line in f if line.startswith("Uid:"))
    assert uids == [str(nobody.pw_uid)] * 4
    assert set(reader.device_paths) <= fd_links(job.pid)
    assert reader.read()[1] == {job.pid: {0: GiB}}
    assert Path(reader.directory).parent == shared
    reader.close()


def test_a_sim_placed_where_the_user_cannot_reach_says_so(make_sim, tmp_path: Path, nobody) -> None:
    private = tmp_path / "mine"
    private.mkdir()
    private.chmod(0o700)
    reader = make_sim(gpus=1, base_dir=str(private))
    with pytest.raises(SimError) as err:
        reader.spawn("idle", gpu=0, memory=GiB, user="nobody")
    message = str(err.value)
    assert "nobody" in message and str(private) in message and "\n" not in message, message
    assert "died at start-up" not in message

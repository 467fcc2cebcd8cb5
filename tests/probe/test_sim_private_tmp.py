"""The sim under a private temporary directory (TMPDIR mode 700, as a careful user sets it): a job run
as another user (root's sims only) must reach every file of its sim (its program in bin/, the device
files, its context directory), which it cannot through a directory only root may search. The sim
then lives in a shared temporary directory of its own (mkdtemp in a sticky, root-owned /tmp), and the
private one is left as it was; a sim placed where the job's user cannot reach says so in one line.
Real sims, real jobs run as `nobody`, real directories in tmp_path."""

from __future__ import annotations

import os
import pwd
import stat
import tempfile
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


def test_a_job_of_another_user_runs_under_a_private_tmpdir(make_sim, private_tmp, nobody) -> None:
    reader = make_sim(gpus=2)
    job = reader.spawn("idle", gpu=0, memory=GiB, user="nobody")
    with open(f"/proc/{job.pid}/status") as f:
        uids = next(line.split()[1:] for line in f if line.startswith("Uid:"))
    assert uids == [str(nobody.pw_uid)] * 4
    assert set(reader.device_paths) <= fd_links(job.pid)
    assert reader.read()[1] == {job.pid: {0: GiB}}
    # Not in the private directory, which stays private; in a shared one only root can replace.
    directory = Path(reader.directory)
    assert private_tmp not in directory.parents
    assert stat.S_IMODE(private_tmp.stat().st_mode) == 0o700
    parent = directory.parent.stat()
    assert parent.st_uid == 0 and (not parent.st_mode & 0o022 or parent.st_mode & stat.S_ISVTX)
    assert directory.stat().st_uid == os.geteuid()


def test_a_tmpdir_every_user_may_search_is_used_as_it_is(make_sim, monkeypatch: pytest.MonkeyPatch) -> None:
    """Root's sim goes elsewhere only because the TMPDIR is private; one every user may search (the
    whole way from /) is where the sim goes. Made in /tmp: pytest's own directories are private."""
    shared = Path(tempfile.mkdtemp(prefix="gputui-test-shared-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        monkeypatch.setenv("TMPDIR", str(shared))
        monkeypatch.setattr(tempfile, "tempdir", None)
        reader = make_sim(gpus=1)
        assert Path(reader.directory).parent == shared
        reader.close()
    finally:
        shared.rmdir()


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

"""What a long-lived sim needs from the reader (issue 19 #1, the live demo): probes that attach to a
sim another process runs (the demo daemon) see all of it, ghosts included, and say that they watch;
its owner may hold no device file (it is no NVML client), its jobs may end on their own, and the
owner forgets the jobs that are gone.

Every sim is closed by the fixture, which checks that nothing it started is left.
"""

import os

from gputui.probe.readers.sim import GiB, SimReader, start_time, watched
from tests.support.simprobe import fd_links
from tests.support.waiting import wait_until


def test_an_attached_reader_lists_a_ghost_whose_parent_it_never_saw(make_sim):
    owner = make_sim(gpus=2)
    ghost = owner.spawn("ghost", gpu=1, memory=3 * GiB)  # its parent exited before anyone attached
    assert start_time(ghost.pid) is None
    watcher = SimReader(attach=True, base_dir=owner.directory)
    watcher.open()
    try:
        assert watcher.read()[1] == owner.read()[1] == {ghost.pid: {1: 3 * GiB}}
        assert watcher.read()[0][1]["memory_used"] == 3 * GiB
        assert not watcher.ignored
    finally:
        watcher.close()


def test_an_attached_reader_knows_the_session_its_jobs_are_below(make_sim):
    owner = make_sim(gpus=1)
    watcher = SimReader(attach=True, base_dir=owner.directory)
    watcher.open()
    try:
        assert watcher.init_pids() == [owner.session_pid]
    finally:
        watcher.close()


def test_the_owner_can_tell_whether_anyone_watches_its_sim(make_sim):
    owner = make_sim(gpus=1)
    assert not watched(owner.directory)
    watcher = SimReader(attach=True, base_dir=owner.directory)
    watcher.open()
    try:
        assert watched(owner.directory)
        assert watched(owner.directory)  # asking does not end it
    finally:
        watcher.close()
    assert not watched(owner.directory)


def test_an_owner_that_holds_no_device_file(make_sim):
    owner = make_sim(gpus=1, hold_devices=False)
    assert not [link for link in fd_links(os.getpid()) if link.startswith(owner.directory)]
    job = owner.spawn("idle", gpu=0, memory=GiB)
    assert owner.read()[1] == {job.pid: {0: GiB}}


def test_a_job_with_a_lifetime_ends_on_its_own_and_is_forgotten(make_sim):
    owner = make_sim(gpus=1)
    stays = owner.spawn("idle", gpu=0, memory=GiB)
    job = owner.spawn("busy", gpu=0, memory=2 * GiB, lifetime=1.0)
    assert owner.read()[1][job.pid] == {0: 2 * GiB}
    assert wait_until(lambda: start_time(job.pid) != job.start_time, 60.0, step=0.005)
    assert owner.wait_released(job.pid, timeout=60.0)
    owner.forget_gone()
    assert owner.jobs == [stays]
    assert owner.read()[1] == {stays.pid: {0: GiB}}

"""The first per-process utilization reading on a real GPU covers the last interval, not the driver's
whole sample buffer: a job that only started (allocated, synchronized) and has done nothing since is
at 0 % SM in a fresh reader's first reading, while a job busy right now is not. The busy job also
checks the clock: the reader bounds the first query by Unix time in microseconds, which is the clock
the driver stamps its samples with; were it another clock, the busy job would show nothing either."""

import time

import pynvml

from gputui.probe.readers.nvml import NvmlReader
from tests.support.waiting import wait_until

WINDOW = 2.0  # seconds the first reading covers, as the probe passes the time between readings


def _first_reading(gpu: int) -> dict:
    reader = NvmlReader()
    reader.open()
    try:
        return reader.process_utilization(WINDOW) or {}
    finally:
        reader.close()


def _buffer(gpu: int) -> list:
    """What asking from timestamp 0 returns: the driver's whole buffer (printed, for the record)."""
    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(gpu)
        try:
            return list(pynvml.nvmlDeviceGetProcessUtilization(handle, 0))
        except pynvml.NVMLError:
            return []
    finally:
        pynvml.nvmlShutdown()


def test_a_job_idle_since_it_started_is_at_zero_in_the_first_reading(cuda_job):
    quiet = cuda_job(gib=1.0, gpu=0)
    busy = cuda_job(gib=1.0, gpu=0, busy=True)
    # The quiet job's start-up work is older than the window once this much has passed (a wait, not
    # a measurement); the busy job keeps running meanwhile.
    time.sleep(WINDOW + 2.0)
    found = wait_until(lambda: (_first_reading(0).get(busy.pid) or {}).get(0), timeout=30.0, step=0.5)
    assert found, "no SM utilization for a job running matrix multiplies in a first reading"
    first = _first_reading(0)
    stamps = [(s.pid, s.timeStamp, s.smUtil) for s in _buffer(0)]
    print("whole buffer (pid, timeStamp us, sm):", stamps, "now us:", int(time.time() * 1e6))
    print("first reading:", first)
    assert (first.get(busy.pid) or {}).get(0, {}).get("sm", 0) > 0, first
    assert (first.get(quiet.pid) or {}).get(0, {}).get("sm", 0) == 0, first

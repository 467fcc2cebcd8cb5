"""Kill-and-verify on a real GPU: the three GPU_FACTS.md scenarios each end verified clean."""

import os
import signal
import time

import pytest

from gputui.kill.plan import KillOptions, PlanOptions, plan_for_gpus
from gputui.model import Sample
from gputui.probe.core import Probe
from gputui.probe.readers.nvml import NvmlReader
from gputui.probe.run.reaper import execute


@pytest.fixture
def probe():
    p = Probe(NvmlReader())
    p.start()
    yield p
    p.close()


@pytest.mark.parametrize("scenario", ["cooperative", "ignore-term", "ghost"])
def test_free_gpu0_ends_verified_clean(probe, cuda_job, scenario):
    job = cuda_job(gib=4.0, gpu=0, fork=scenario == "ghost", ignore_term=scenario == "ignore-term")
    if scenario == "ghost":
        os.kill(job.pid, signal.SIGKILL)
        job.proc.wait()
    sample = Sample.from_wire(probe.sample(full=True))
    plan = plan_for_gpus(sample, [0], host="gpu", options=PlanOptions(kill=KillOptions(term_timeout=1.0)))
    targets = {t.pid for t in plan.signalled}
    assert (job.child if scenario == "ghost" else job.pid) in targets
    events = []
    t0 = time.monotonic()
    done = execute(probe, plan.to_wire(), events.append)
    elapsed = time.monotonic() - t0
    print(f"{scenario}: verdict after {elapsed:.3f} s: {done['message']}")
    assert done["data"]["ok"], [e["message"] for e in events]
    assert done["data"]["gpus"]["0"]["result"] == "clean"
    if scenario == "ignore-term":
        assert any(e["stage"] == "escalate" for e in events)

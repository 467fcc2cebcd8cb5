"""`gputui wait` names the parent of a GPU process that appears while it waits (issue 18): a
supervisor's restarted worker is "new process 5151 on GPU 2, started by 4242 `python
supervisor.py`", so the operator stops the supervisor, not the worker again.

The sim's "jobs" scenario runs the supervisor (it restarts its worker on GPU 2 half a second after
it ends); the worker is stopped by the probe's own kill engine through the fleet (the test signals
nothing itself). Every sim process ends with its probe.
"""

from __future__ import annotations

import asyncio

from gputui.config.file import HostSpec
from gputui.kill.plan import PlanOptions, plan_for_pids
from tests.support.commands import fleet_of, wait

HOST = "lab"


async def test_wait_names_the_parent_of_a_gpu_process_that_appears_while_it_waits():
    fleet = fleet_of([HostSpec(name=HOST, reader="sim", sim_scenario="jobs", sim_seed=4)], interval=0.25)
    fleet.start()
    await fleet.wait_first_samples(60)
    sample = fleet.view(HOST).sample
    assert sample is not None
    [supervisor] = [j for j in sample.jobs if 2 in j.gpus]
    [worker] = supervisor.members
    # The wait starts with the first worker on GPU 2: known, not new.
    waiting = asyncio.create_task(
        wait(HOST, "--gpu", f"{HOST}:2", "--timeout", "6", "--settle", "5", "--json", fleet=fleet)
    )
    await asyncio.sleep(0.5)  # the wait judges its first sample (an order, not a time being tested)
    plan = plan_for_pids(sample, [worker], host=HOST, options=PlanOptions(operator="t"))
    events = [e async for e in fleet.execute(HOST, plan.to_wire(), deadline=60, silence=60)]
    assert events[-1].stage == "done" and events[-1].result == "stopped", events[-1].message
    code, doc, text, _ = await asyncio.wait_for(waiting, 60)
    assert code == 1 and doc is not None, text
    words = " ".join(
        u["words"]
        for h in doc["hosts"]
        for g in h["gpus"].values()
        for u in g["unready"]
        if u["condition"] == "processes"
    )
    assert "new process " in words and "on GPU 2, started by " in words, words
    assert f"started by {supervisor.root} `" in words and "supervisor.py" in words
    assert f"new process {worker} " not in words  # the worker it stopped is not the new one

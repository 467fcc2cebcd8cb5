"""The kill engine on jobs (issue 18 part B), on real sim processes: root first, then the members
left; a root that is init is never signalled; members started since the plan are taken too; a
parent that outlives what was stopped is named (and a GPU it has taken again is not clean); from
inside a container, memory nothing here holds is `outside`, never `orphaned`, in a verdict.

The tests send no signal themselves: the engine does, to sim jobs only; the fixture stops the rest.
"""

from __future__ import annotations

from typing import Any

from gputui.model import Event, PlanVerdict
from gputui.probe.readers.sim import GiB
from gputui.text.words import gpu_note, restart_words
from tests.support.procs import start_time
from tests.support.reaping import done, gpu_verdict, of, run, signals_to, target, verdict
from tests.support.simprobe import alive

TIMEOUT = 30.0


def role(entry: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(entry, role=name)


def parsed(events: list[dict[str, Any]], allowed: set[int] | None = None) -> PlanVerdict:
    return PlanVerdict.from_event(Event.from_wire(done(events)), allowed=allowed)


def first_signal(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next(e for e in events if e["stage"] == "signal" and e["result"] == "sent")


def test_a_launcher_is_signalled_first_and_passes_it_on_to_its_ranks(sim_probe):
    probe, sim = sim_probe(gpus=2)
    launcher = sim.spawn("launcher", gpu=[0, 1], memory=2 * GiB)
    ranks = list(launcher.workers)
    assert len(ranks) == 2
    targets = [role(target(launcher.pid, launcher.start_time, []), "root")]
    targets += [role(target(pid, start, [i]), "member") for i, (pid, start) in enumerate(ranks)]
    events = run(probe, targets, [], term_timeout=10.0)
    assert done(events)["result"] == "stopped", done(events)["message"]
    assert first_signal(events)["pid"] == launcher.pid
    # The launcher forwarded SIGTERM: each rank exited without a signal from the engine.
    for pid, _ in ranks:
        assert signals_to(events, pid) == [] and verdict(events, pid)["result"] == "exited"
    assert verdict(events, launcher.pid)["result"] == "exited"
    assert not of(events, "escalate")
    assert all(not alive(pid, start) for pid, start in [*ranks, (launcher.pid, launcher.start_time)])


def test_a_member_left_running_after_the_grace_gets_the_signal_itself_then_sigkill(sim_probe):
    """A root that forwards nothing (here an unrelated job in that role) leaves its members: they
    get the soft signal after the grace, and SIGKILL at the TERM timeout."""
    probe, sim = sim_probe(gpus=2)
    root = sim.spawn("idle", gpu=0, memory=GiB)
    stubborn = sim.spawn("ignore-term", gpu=1, memory=GiB)
    targets = [
        role(target(root.pid, root.start_time, [0]), "root"),
        role(target(stubborn.pid, stubborn.start_time, [1]), "member"),
    ]
    events = run(probe, targets, [], term_timeout=1.0)
    assert done(events)["result"] == "stopped", done(events)["message"]
    assert first_signal(events)["pid"] == root.pid
    assert signals_to(events, root.pid) == ["SIGTERM"]
    assert signals_to(events, stubborn.pid) == ["SIGTERM", "SIGKILL"]
    [members] = [e for e in events if e["stage"] == "signal" and e["result"] == "members"]
    assert members["data"]["pids"] == [stubborn.pid]
    # The member's SIGTERM came after the root's, and its SIGKILL last.
    order = [
        (e["pid"], e["signal"])
        for e in events
        if e["stage"] in ("signal", "escalate") and e["result"] == "sent"
    ]
    assert order == [(root.pid, "SIGTERM"), (stubborn.pid, "SIGTERM"), (stubborn.pid, "SIGKILL")]


def test_a_root_that_acts_as_init_is_never_signalled(sim_probe):
    """The sim's session adopts every job (a subreaper): a plan naming it as a job's root, as a
    bad or hostile app might send, is refused by the probe's own check."""
    probe, sim = sim_probe(gpus=1)
    job = sim.spawn("busy", gpu=0, memory=GiB)
    session = sim.session_pid
    assert session is not None
    events = run(probe, [role(target(session, start_time(session), []), "root")], [])
    assert verdict(events, session)["result"] == "protected" and signals_to(events, session) == []
    assert done(events)["result"] == "not-stopped"
    assert alive(job.pid, job.start_time) and alive(session, start_time(session))


def test_members_started_after_the_plan_are_taken_before_the_first_signal(sim_probe):
    """The app's plan names only the root (its scan saw no rank yet, say): the probe takes the GPU
    processes below it right before the first signal, and proves them gone too."""
    probe, sim = sim_probe(gpus=2)
    launcher = sim.spawn("launcher", gpu=[0, 1], memory=GiB)
    events = run(probe, [role(target(launcher.pid, launcher.start_time, []), "root")], [])
    assert done(events)["result"] == "stopped", done(events)["message"]
    for pid, start in launcher.workers:
        found = verdict(events, pid)
        assert found["result"] == "exited" and found["data"]["origin"] == "rescan"
        assert not alive(pid, start)
    # The app believes the verdict: what the probe took on is reported as the rescan's.
    assert not parsed(events, allowed={launcher.pid}).problems


def test_a_stopped_workers_supervisor_is_named_and_a_gpu_it_takes_again_is_not_clean(sim_probe):
    probe, sim = sim_probe(gpus=3)
    supervisor = sim.spawn("supervisor", gpu=2, memory=GiB)
    [(worker, worker_start)] = supervisor.workers
    stubborn = sim.spawn("ignore-term", gpu=2, memory=GiB)
    # The stubborn job holds GPU 2 past the supervisor's restart (0.5 s after its worker ended).
    targets = [target(worker, worker_start, [2]), target(stubborn.pid, stubborn.start_time, [2])]
    events = run(probe, targets, [2], term_timeout=2.0, verify_timeout=1.0)
    data = done(events)["data"]
    assert done(events)["result"] == "not-clean" and not data["ok"]
    [restart] = data["restarts"]
    assert restart["pid"] == supervisor.pid and restart["children"] == [worker]
    assert restart["new"] and worker not in restart["new"] and restart["new_gpus"] == [2]
    assert data["taken_again"] == [2] and gpu_verdict(events, 2)["result"] == "held"
    words = restart_words(parsed(events).restarts[0])
    assert f"parent {supervisor.pid} `" in words and "has started" in words
    assert f"`clean --job {supervisor.pid}` stops it whole" in words  # a job's root again: --job stops it


def test_a_worker_stopped_by_pid_names_its_supervisor(sim_probe):
    probe, sim = sim_probe(gpus=3)
    supervisor = sim.spawn("supervisor", gpu=2, memory=GiB)
    [(worker, worker_start)] = supervisor.workers
    events = run(probe, [target(worker, worker_start, [2])], [])
    assert done(events)["result"] == "stopped"
    [restart] = parsed(events).restarts
    assert restart.pid == supervisor.pid and restart.children == (worker,)
    assert "supervisor.py" in restart.brief and "may start it again" in restart_words(restart)
    assert f"parent {supervisor.pid}" in done(events)["message"]


def test_a_job_of_one_process_started_by_the_session_names_no_parent(sim_probe):
    """The sim's session acts as init: no warning for what it started."""
    probe, sim = sim_probe(gpus=1)
    job = sim.spawn("busy", gpu=0, memory=GiB)
    events = run(probe, [target(job.pid, job.start_time, [0])], [0])
    assert done(events)["result"] == "clean" and done(events)["data"]["restarts"] == []


def test_memory_used_outside_a_container_is_outside_in_a_gpu_verdict_never_orphaned(sim_probe):
    """Part A's accounting, in the reaper's verdict too: from inside a container (the neighbour
    scenario), a GPU that another guest's job uses is `outside`, and no reset is suggested."""
    probe, _sim = sim_probe(scenario="neighbour")
    assert probe.foreign_pids is True
    events = run(probe, [], [1], verify_timeout=0.5)
    found = gpu_verdict(events, 1)
    books = found["data"]["accounting"]
    assert books["outside"] > 0 and books["orphaned"] == 0
    assert found["result"] == "outside" and "orphaned" not in found["message"]
    assert "reset" not in found["message"] and "outside this container" in found["message"]
    verdict_ = parsed(events)
    [g] = verdict_.gpus
    note = gpu_note(g)
    assert "used outside this container" in note and "orphaned" not in note and "reset" not in note
    assert not verdict_.ok


def test_the_grace_never_makes_a_job_plan_longer_than_the_term_timeout(sim_probe):
    """The members' own signal comes within the TERM timeout: SIGKILL follows at the timeout, as
    for any plan (a behaviour, not a time: the escalation is the first after the member's SIGTERM)."""
    probe, sim = sim_probe(gpus=2)
    root = sim.spawn("ignore-term", gpu=0, memory=GiB)
    member = sim.spawn("ignore-term", gpu=1, memory=GiB)
    events = run(
        probe,
        [
            role(target(root.pid, root.start_time, [0]), "root"),
            role(target(member.pid, member.start_time, [1]), "member"),
        ],
        [],
        term_timeout=1.0,
    )
    assert done(events)["result"] == "stopped"
    assert signals_to(events, root.pid) == ["SIGTERM", "SIGKILL"]
    assert signals_to(events, member.pid) == ["SIGTERM", "SIGKILL"]
    kills = [e for e in events if e["stage"] == "escalate" and e["result"] == "sent"]
    assert [e["pid"] for e in kills] == [root.pid, member.pid]  # the root first

"""The kill engine's rescans and confirmation read only what can hold the plan's memory, and miss
nothing a full scan would have found (issue 11: a busy host must not make a clean slow).

On real processes: sim jobs, and a process family (tests/support/family.py, below a subreaper that
reaps them all) whose relatives open the sim's device files after the probe last looked at them. The
probe's scanner is made stale on purpose (no steady-state turn ever comes), so only a rescan that
reads them can find them; a crowd of bystanders stands for the busy host, and a targeted scan must not
list their fd directories. Then, on generated process trees, the rule itself: a holder a targeted scan
does not read is linked to nothing the plan is about.

The tests signal nothing: the engine under test does, and only to processes the tests started.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.probe.classify import ProcFacts, classify
from gputui.probe.holders import Entry, HolderScanner, descendants, related
from gputui.probe.readers.sim import GiB
from gputui.probe.run import goal, reaper, scope
from gputui.probe.run import state as run_state
from gputui.probe.run.orders import Settings
from gputui.probe.run.reaper import Run
from gputui.probe.run.state import FULL, TARGETED
from tests.support.proctrees import PROBE, Host, hosts
from tests.support.reaping import done, gpu_verdict, make_plan, of, run, signals_to, target, verdict
from tests.support.simprobe import alive, wait_gone

REPO = Path(__file__).resolve().parents[2]
FAMILY = REPO / "tests" / "support" / "family.py"
NEVER = 10**9  # a steady-state turn period no test reaches


# -- fixtures -----------------------------------------------------------------------------------


class Family:
    """tests/support/family.py: a target on a sim GPU and its relatives (see there)."""

    def __init__(self, sim: Any, gpu: int, memory: int, *roles: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(FAMILY), str(sim.directory), str(gpu), str(memory), *roles],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
        )
        self.members: dict[str, tuple[int, int]] = {}
        for who in ["target", *(r for r in roles if r != "fork-on-term")]:
            self.member(who)

    def _line(self, timeout: float = 30.0) -> dict[str, Any]:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, "a family member did not report in time"
        line = self.proc.stdout.readline()
        assert line, "the family ended"
        record = json.loads(line)
        if "pid" in record:
            self.members[record["who"]] = (record["pid"], record["start_time"])
        return record

    def member(self, who: str) -> tuple[int, int]:
        while who not in self.members:
            self._line()
        return self.members[who]

    def open(self, who: str) -> None:
        """Tell a member to open the sim's device files; return once it has."""
        self.proc.stdin.write(f"open {who}\n".encode())
        while self._line() != {"who": who, "event": "opened"}:
            pass

    def close(self) -> list[int]:
        """EOF: every member exits and the family's top process reaps them; the PIDs left alive."""
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        return [pid for pid, start in self.members.values() if not wait_gone(pid, start, 10)]


@pytest.fixture
def family():
    made: list[Family] = []

    def make(sim: Any, gpu: int, memory: int, *roles: str) -> Family:
        made.append(Family(sim, gpu, memory, *roles))
        return made[-1]

    yield make
    left = [pid for f in made for pid in f.close()]
    assert not left, f"family members left behind: {left}"


@pytest.fixture
def crowd():
    """Bystanders of a busy host: `cat` processes that hold a pipe and sleep (ours; EOF ends them)."""
    started: list[subprocess.Popen] = []

    def make(n: int) -> list[int]:
        for _ in range(n):
            started.append(subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL))
        return [p.pid for p in started]

    yield make
    for p in started:
        p.stdin.close()
    for p in started:
        p.wait(timeout=30)


def stale(probe: Any) -> list[tuple[str, Any]]:
    """Make the probe's holder view stale: one full scan now, then no steady-state turn ever (a known
    process is re-read only by a scan that asks for it). Returns the record of every later scan."""
    probe.scanner = HolderScanner(probe.scanner.prefix, probe.proc, refresh_every=NEVER, check_every=NEVER)
    probe.sample(full=True)
    scans: list[tuple[str, Any]] = []
    real = probe.scanner.scan

    def scan(full=False, watch=(), around=None, also=(), holders=False):  # type: ignore[no-untyped-def]
        result = real(full=full, watch=watch, around=around, also=also, holders=holders)
        scans.append(("full" if full else "targeted" if around is not None else "incremental", result))
        return result

    probe.scanner.scan = scan
    return scans


def listing(probe: Any) -> list[int]:
    """The PIDs whose fd directories the probe's scanner lists from now on, in order."""
    listed: list[int] = []
    real = probe.scanner._list

    def spy(pid, *args):  # type: ignore[no-untyped-def]
        listed.append(pid)
        return real(pid, *args)

    probe.scanner._list = spy
    return listed


def kinds(scans: list[tuple[str, Any]]) -> list[str]:
    return [kind for kind, _ in scans]


def rescans(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return of(events, "rescan")


# -- the targeted rescans find what the full scan found ------------------------------------------


def test_a_ghosts_forked_child_is_found_by_a_targeted_rescan_that_reads_no_bystander(sim_probe, crowd):
    probe, sim = sim_probe()
    pids = crowd(60)
    job = sim.spawn("ghost", gpu=3, memory=2 * GiB)
    scans = stale(probe)
    listed = listing(probe)
    events = run(probe, [], [3])
    [found, *_] = rescans(events)
    assert found["data"]["scan"] == "targeted" and found["data"]["attributed"] == [job.child_pid]
    assert signals_to(events, job.child_pid) == ["SIGTERM"]
    assert gpu_verdict(events, 3)["result"] == "clean" and done(events)["data"]["ok"] is True
    assert not alive(job.child_pid, job.child_start_time)
    # No full scan; the targeted scans listed none of the crowd's fd directories (by PID: the
    # processes other tests start meanwhile are new here, and a new process is listed once).
    assert "full" not in kinds(scans) and "targeted" in kinds(scans)
    assert job.child_pid in listed and not set(listed) & set(pids)


def test_a_descendant_of_a_target_that_opened_the_device_files_since_the_last_scan_is_stopped(
    sim_probe, family, crowd
):
    probe, sim = sim_probe(gpus=2)
    crowd(40)
    fam = family(sim, 0, GiB, "late-child")
    t_pid, t_start = fam.member("target")
    d_pid, d_start = fam.member("late-child")
    scans = stale(probe)
    fam.open("late-child")  # after the probe's last look at it: its cached view says it holds nothing
    assert all(p["pid"] != d_pid for p in probe.sample()["processes"])  # the stale view misses it
    events = run(probe, [target(t_pid, t_start, [0])], [], scope="processes")
    [first, *_] = rescans(events)
    assert first["data"]["scan"] == "targeted" and first["data"]["tied"] == [d_pid]
    assert verdict(events, d_pid)["data"]["origin"] == "rescan"
    assert signals_to(events, d_pid) == ["SIGTERM"]
    assert done(events)["data"]["ok"] is True
    assert not alive(d_pid, d_start) and not alive(t_pid, t_start)
    assert "full" not in kinds(scans)


def test_holders_in_the_process_group_of_a_listed_pid_are_found_though_not_below_it(sim_probe, family):
    """The group holder keeps the target's context (NVML lists the target after it died); the group
    member opened the device files after the last scan. Neither is below the target (their parent
    exited before the plan), so only their process group ties them to the listed PID."""
    probe, sim = sim_probe(gpus=2)
    fam = family(sim, 1, GiB, "group-holder", "group-member")
    t_pid, t_start = fam.member("target")
    h_pid, h_start = fam.member("group-holder")
    m_pid, m_start = fam.member("group-member")
    scans = stale(probe)
    fam.open("group-member")
    events = run(probe, [target(t_pid, t_start, [1])], [1])
    [first, *_] = rescans(events)
    assert first["data"]["scan"] == "targeted"
    assert sorted(first["data"]["attributed"]) == sorted([h_pid, m_pid])
    for pid in (h_pid, m_pid):
        v = verdict(events, pid)
        assert v["data"]["origin"] == "rescan" and "pgid" in v["data"]["reason"]
    assert gpu_verdict(events, 1)["result"] == "clean" and done(events)["data"]["ok"] is True
    assert not alive(h_pid, h_start) and not alive(m_pid, m_start)
    assert "full" not in kinds(scans)


def test_a_holder_that_appeared_after_the_plan_started_is_found(sim_probe, family):
    """The target answers SIGTERM by forking a child that inherits its context, then exits: a PID that
    did not exist when the plan started keeps the memory."""
    probe, sim = sim_probe(gpus=1)
    fam = family(sim, 0, 2 * GiB, "fork-on-term")
    t_pid, t_start = fam.member("target")
    scans = stale(probe)
    events = run(probe, [target(t_pid, t_start, [0])], [0])
    c_pid, c_start = fam.member("term-child")
    assert c_start >= t_start and verdict(events, c_pid)["data"]["origin"] == "rescan"
    [first, *_] = rescans(events)
    assert first["data"]["scan"] == "targeted" and first["data"]["attributed"] == [c_pid]
    assert signals_to(events, c_pid) == ["SIGTERM"]
    assert gpu_verdict(events, 0)["result"] == "clean" and done(events)["data"]["ok"] is True
    assert not alive(c_pid, c_start)
    assert "full" not in kinds(scans)


# -- the confirmation ----------------------------------------------------------------------------


def test_the_confirmation_reads_what_can_hold_the_gpus(sim_probe, family, monkeypatch):
    """No rescan round: the descendant that opened the device files after the last scan is still
    there when NVML says GPU 0 is free. The confirmation must see it (a holder tied to a target, in
    the way of the plan) and keep waiting; an incremental look would have missed it and confirmed.
    (It holds no memory of GPU 0, so the GPU's own verdict is clean, as with a full scan.)"""
    monkeypatch.setattr(reaper, "MAX_ROUNDS", 0)
    probe, sim = sim_probe(gpus=1)
    fam = family(sim, 0, GiB, "late-child")
    t_pid, t_start = fam.member("target")
    d_pid, d_start = fam.member("late-child")
    scans = stale(probe)
    fam.open("late-child")
    events = run(probe, [target(t_pid, t_start, [0])], [0], verify_timeout=0.6)
    assert [e["result"] for e in of(events, "verify") if e["result"] in ("confirmed", "timeout")] == [
        "timeout"
    ]
    assert of(events, "verify", None)[-1]["data"]["blockers"] == [d_pid]
    assert alive(d_pid, d_start) and not signals_to(events, d_pid)
    # Every confirmation attempt was targeted; the timed-out verdict looked at everything once.
    assert kinds(scans)[0] == "incremental" and kinds(scans)[-1] == "full"
    assert set(kinds(scans)[1:-1]) == {"targeted"}


def test_the_confirmation_confirms_without_reading_an_unrelated_late_holder(sim_probe, family, crowd):
    """A holder tied to nothing of the plan's (its own session) opened the device files after the last
    scan: it can keep no memory of GPU 0 and no verdict depends on it. The GPU is verified clean
    without a full scan."""
    probe, sim = sim_probe(gpus=2)
    crowd(30)
    other = family(sim, 1, GiB, "late-child")  # another job, on GPU 1, with its own late opener
    fam = family(sim, 0, GiB)
    t_pid, t_start = fam.member("target")
    scans = stale(probe)
    other.open("late-child")
    events = run(probe, [target(t_pid, t_start, [0])], [0])
    assert [e["result"] for e in of(events, "verify") if e["result"] in ("confirmed", "timeout")] == [
        "confirmed"
    ]
    confirmed = next(e for e in of(events, "verify") if e["result"] == "confirmed")
    assert confirmed["data"]["scan"] == "targeted"
    assert done(events)["data"]["ok"] is True
    assert "full" not in kinds(scans)
    o_pid, o_start = other.member("target")
    assert alive(o_pid, o_start) and alive(*other.member("late-child"))


def test_a_sweep_reads_everything_once(sim_probe):
    probe, sim = sim_probe()
    hidden = sim.spawn("hidden")
    busy = sim.spawn("busy", gpu=1, memory=GiB)
    scans = stale(probe)
    sweep = [target(hidden.pid, hidden.start_time, [], "unattributed hidden holder")]
    events = run(probe, [target(busy.pid, busy.start_time, [1])], [1], sweep=sweep)
    [first, *rest] = rescans(events)
    assert first["data"]["scan"] == "full" and first["data"]["sweep"] == [hidden.pid]
    assert all(r["data"]["scan"] == "targeted" for r in rest)
    assert kinds(scans).count("full") == 1
    assert done(events)["data"]["ok"] is True and not alive(hidden.pid, hidden.start_time)


# -- a targeted view decides what a full view decides --------------------------------------------


def decisions(run_: Run, view: Any) -> dict[str, Any]:
    """What a plan decides from a view: what it may take on, what blocks it, what it leaves alone,
    what its verdicts name, and every record on a GPU it touches or linked to a target or ghost."""
    done_ = set(run_.procs)
    records = view.records
    mine = run_.rule.targets | run_.rule.ghosts
    linked = {
        pid: (r["kind"], sorted(r["gpus"]), sorted(r["links"]), r["holds"])
        for pid, r in records.items()
        if set(r["gpus"]) & run_.touched or set(r["links"]) & mine
    }
    return {
        "admissible": scope.admissible(records, run_.rule, done_),
        "untouched": scope.untouched(records, run_.rule, run_.touched, done_),
        "blockers": goal.blockers(run_.plan, run_.rule, run_.procs, view),
        "linked": linked,
        "verdicts": [run_.gpu_verdict(i, view)["held_by"] for i in run_.plan.gpus],
    }


@pytest.mark.parametrize("scope_name", ["gpus", "processes"])
def test_a_targeted_look_decides_what_a_full_look_decides(sim_probe, family, crowd, scope_name):
    """The demo host (every kind of process on 4 GPUs), a crowd, and three families whose relatives
    opened the device files after the last scan: the plan's own (a descendant in a session of its
    own, a member of its process group), another job on GPU 0 that the plan does not name (its
    late child is linked to it by ancestry alone), and a job on GPU 2. For a plan on GPU 0 (or on its
    job), the targeted view and then the full view of the same moment give the same candidates,
    blockers, untouched processes, verdicts and linked records."""
    probe, sim = sim_probe(gpus=4, scenario="demo")
    crowd(30)
    fams = [
        family(sim, 0, GiB, "late-child", "group-member"),
        family(sim, 2, GiB, "late-child"),
        family(sim, 0, GiB, "late-child"),
    ]
    scans = stale(probe)
    for fam in fams:
        fam.open("late-child")
    fams[0].open("group-member")
    t_pid, t_start = fams[0].member("target")
    gpus = [0] if scope_name == "gpus" else []
    settings_ = Settings(make_plan([target(t_pid, t_start, [0])], gpus, scope=scope_name))
    run_ = Run(probe, settings_, lambda record: None)
    view = run_.look(run_state.INCREMENTAL)
    run_.touched = goal.touched_gpus(run_.plan, view)
    run_.rule.descendants.update(descendants([t_pid]))  # as remember_descendants does
    targeted_view = run_.look(TARGETED)
    full_view = run_.look(FULL)
    assert decisions(run_, targeted_view) == decisions(run_, full_view)
    assert kinds(scans)[-2:] == ["targeted", "full"]
    assert scans[-2][1].listed < scans[-1][1].listed
    # The late openers of the plan's family were invisible to the stale incremental view; the
    # targeted one reads them. The other family's (GPU 2, nothing of the plan's) it leaves alone.
    for fam, who in [(fams[0], "late-child"), (fams[0], "group-member"), (fams[2], "late-child")]:
        pid = fam.member(who)[0]
        assert pid not in view.records and pid in targeted_view.records
    other = fams[1].member("late-child")[0]
    assert other not in targeted_view.records and other in full_view.records


# -- the rule on generated process trees ---------------------------------------------------------


def entries_of(host: Host) -> dict[int, Entry]:
    out = {}
    for t in host.tasks.values():
        entry = Entry(("S", t.ppid, t.pgid, t.sid, 0, 1, 10_000 + t.pid))
        entry.holds = ("/dev/nvidiactl",) if t.holds else ()
        out[t.pid] = entry
    return out


def classified(host: Host, holders: set[int]) -> dict[int, Any]:
    def lookup(pid: int) -> ProcFacts | None:
        t = host.tasks.get(pid)
        return ProcFacts(t.comm, "S", t.ppid, t.pgid, t.sid) if t else None

    stop = host.ancestors(PROBE) | {PROBE}
    return classify(host.listed, holders, lookup, PROBE, stop=stop)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(host=hosts(), data=st.data())
def test_a_holder_outside_the_targeted_set_is_linked_to_nothing_the_plan_is_about(host, data):
    """For any process tree, listing and plan (run/state.RunState.around): the holders a targeted scan does
    not read get, from the real classification, no GPU the plan touches, no link to anything of the
    plan's and no place among the targets' descendants, whatever they hold; the ones it reads are
    classified as in a full view, and so is every PID of the plan's."""
    pids = sorted(p for p in host.tasks if p >= 100)
    touched = data.draw(st.sets(st.integers(0, 3), max_size=3))
    targets = data.draw(st.sets(st.sampled_from(pids), max_size=3)) if pids else set()
    ghosts = {p for p in host.listed if p not in host.tasks}
    mine = targets | ghosts
    roots = {p for p, mem in host.listed.items() if p in mine or touched & set(mem)}
    also = host.descendants(targets)
    read = related(entries_of(host), roots, mine | set(also))
    holders = {t.pid for t in host.tasks.values() if t.holds}
    full = classified(host, holders)
    partial = classified(host, holders & read)
    for pid in holders - read:
        v = full[pid]
        assert not (set(v.gpus) & touched) and not (set(v.links) & (mine | roots)), (pid, v)
        assert pid not in also
    for pid in holders & read:
        assert partial[pid].gpus == full[pid].gpus and partial[pid].reason == full[pid].reason
        assert sorted(partial[pid].links) == sorted(full[pid].links)
    for pid in (roots | mine) & set(full):  # what a plan's PID names (a ghost: its hidden holders)
        assert sorted(partial[pid].links) == sorted(full[pid].links)

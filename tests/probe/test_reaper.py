"""The kill engine (gputui/probe/run/reaper.py) on real processes: simulated GPUs, real jobs and signals.

Every job is started by a sim the fixture closes (tests/probe/conftest.py); the tests themselves send no
signal: the engine under test does, and only to those jobs.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gputui.probe.common import POLL_FAST_FOR_S, POLL_FAST_S, POLL_S, verify_poll
from gputui.probe.main import Loop
from gputui.probe.readers.sim import GiB
from gputui.probe.run import reaper, signals
from gputui.probe.run.checks import protection
from gputui.probe.run.orders import Settings
from gputui.probe.run.reaper import Run, execute
from gputui.probe.run.signals import Proc
from tests.support.pythons import PYTHON38
from tests.support.reaping import done, gpu_verdict, make_plan, of, run, signals_to, target, verdict
from tests.support.simprobe import alive

REPO = Path(__file__).resolve().parents[2]
STAGES = ("accepted", "check", "signal", "wait", "escalate", "rescan", "verify", "verdict", "done")


# -- helpers ------------------------------------------------------------------------------------


def assert_well_formed(events: list[dict[str, Any]]) -> None:
    """Every event is a protocol record with a known stage, JSON-clean, elapsed times never decrease."""
    last = -1.0
    for e in events:
        assert e["type"] == "event" and e["v"] == 1 and e["stage"] in STAGES, e
        json.dumps(e)
        assert e["data"]["elapsed_ms"] >= last
        last = e["data"]["elapsed_ms"]
    assert events[0]["stage"] == "accepted"


# -- the stages ---------------------------------------------------------------------------------


def test_a_cooperative_job_ends_with_sigterm_and_the_gpu_is_verified_clean(sim_probe):
    probe, sim = sim_probe()
    job = sim.spawn("busy", gpu=1, memory=4 * GiB)
    events = run(probe, [target(job.pid, job.start_time, [1])], [1])
    assert_well_formed(events)
    assert signals_to(events, job.pid) == ["SIGTERM"]
    assert not of(events, "escalate")
    python = os.path.basename(sys.executable)
    assert of(events, "signal", job.pid)[0]["message"] == f"SIGTERM -> {job.pid} {python} -S .../train.py"
    v = verdict(events, job.pid)
    assert v["result"] == "exited" and v["data"]["exit_signal"] == "SIGTERM"
    assert v["data"]["command"] and v["data"]["user"] == pwd.getpwuid(os.getuid()).pw_name
    g = gpu_verdict(events, 1)
    assert g["result"] == "clean"
    assert g["data"]["memory_before"] == 4 * GiB and g["data"]["memory_after"] == 0
    d = done(events)
    assert d["data"]["ok"] is True and d["result"] == "clean"
    assert d["data"]["gpus"]["1"]["result"] == "clean"
    assert d["data"]["memory_before"] == {"1": 4 * GiB} and d["data"]["memory_after"] == {"1": 0}
    # Verification polled until the memory came back (0.10-0.18 s in the sim), with no fixed sleep.
    assert [e["result"] for e in of(events, "verify")] == ["polling", "idle", "confirmed"]
    # ...every 5 ms while the memory is due back (the first 0.5 s), then every 20 ms.
    polling = of(events, "verify")[0]
    # The event says the intervals the verification used, as the probe defines them.
    fast, slow = round(POLL_FAST_S * 1e3), round(POLL_S * 1e3)
    assert (polling["data"]["fast_poll_ms"], polling["data"]["poll_ms"]) == (fast, slow)
    assert f"NVML every {fast} ms, then every {slow} ms after {POLL_FAST_FOR_S:g} s" in polling["message"]
    assert not alive(job.pid, job.start_time)
    assert d["data"]["method"] == "pidfd"


def test_verification_polls_fast_while_the_memory_is_due_back():
    """The driver gives a process's memory back within ms of its exit, 0.10-0.18 s after the signal
    (GPU_FACTS.md): a verification polls fast through its first half second, then at its usual rate."""
    assert POLL_FAST_S < POLL_S and POLL_FAST_FOR_S == 0.5
    assert verify_poll(0.0) == verify_poll(POLL_FAST_FOR_S - 0.001) == POLL_FAST_S
    assert verify_poll(POLL_FAST_FOR_S) == verify_poll(5.0) == POLL_S


def test_a_job_that_ignores_sigterm_gets_sigkill_after_the_term_timeout(sim_probe):
    probe, sim = sim_probe()
    job = sim.spawn("ignore-term", gpu=2, memory=GiB)
    events = run(probe, [target(job.pid, job.start_time, [2])], [2], term_timeout=0.4)
    assert_well_formed(events)
    assert signals_to(events, job.pid) == ["SIGTERM", "SIGKILL"]
    [timeout] = [e for e in of(events, "wait") if e["result"] == "timeout"]
    assert timeout["data"]["pids"] == [job.pid]
    [term] = [e for e in of(events, "signal", job.pid) if e["signal"] == "SIGTERM"]
    [kill] = of(events, "escalate", job.pid)
    waited = kill["data"]["elapsed_ms"] - term["data"]["elapsed_ms"]
    assert waited >= 400, waited  # not before the TERM timeout (load can only add to the wait)
    assert verdict(events, job.pid)["data"]["exit_signal"] == "SIGKILL"
    assert gpu_verdict(events, 2)["result"] == "clean"
    assert done(events)["data"]["ok"] is True


def test_a_ghosts_hidden_holder_is_found_by_the_rescan_and_freed(sim_probe):
    probe, sim = sim_probe()
    job = sim.spawn("ghost", gpu=3, memory=2 * GiB)
    # NVML lists the dead parent; the child holds the memory but is listed nowhere.
    sample = probe.sample(full=True)
    kinds = {p["pid"]: p["kind"] for p in sample["processes"]}
    assert kinds[job.pid] == "ghost" and kinds[job.child_pid] == "hidden"
    # The plan names nobody (a ghost is no target): the rescan must find the child.
    events = run(probe, [], [3])
    assert_well_formed(events)
    [rescan] = [e for e in of(events, "rescan") if e["result"] == "found"]
    assert rescan["data"]["attributed"] == [job.child_pid]
    assert signals_to(events, job.child_pid) == ["SIGTERM"]
    v = verdict(events, job.child_pid)
    assert v["result"] == "exited" and v["data"]["origin"] == "rescan"
    assert "pgid" in v["data"]["reason"]
    assert gpu_verdict(events, 3)["result"] == "clean"
    assert done(events)["data"]["ok"] is True
    assert not alive(job.child_pid, job.child_start_time)


def test_ghost_memory_names_the_suspected_holders(sim_probe, monkeypatch):
    monkeypatch.setattr(reaper, "MAX_ROUNDS", 0)  # no rescan: the holder it would stop stays
    probe, sim = sim_probe()
    job = sim.spawn("ghost", gpu=0, memory=GiB)
    events = run(probe, [], [0], verify_timeout=0.3)
    g = gpu_verdict(events, 0)
    assert g["result"] == "ghost-memory"
    assert g["data"]["ghosts"] == [job.pid] and g["data"]["suspects"] == [job.child_pid]
    assert f"suspected holders: {job.child_pid}" in g["message"]
    assert g["data"]["memory_after"] == GiB
    assert done(events)["data"]["ok"] is False
    assert alive(job.child_pid, job.child_start_time)


def test_a_zombie_is_not_signalled_names_its_parent_and_does_not_block_clean(sim_probe):
    probe, sim = sim_probe()
    job = sim.spawn("zombie", gpu=1, memory=GiB)
    zombie = job.child_pid
    # The zombie alone: nothing to signal, nothing held, so the plan is clean and the parent lives on.
    events = run(probe, [target(zombie, job.child_start_time, [])], [])
    check = of(events, "check", zombie)[0]
    assert check["result"] == "zombie" and check["data"]["ppid"] == job.pid
    assert f"parent {job.pid} must reap" in check["message"]
    assert not signals_to(events, zombie)
    v = verdict(events, zombie)
    assert v["result"] == "zombie" and v["data"]["ppid"] == job.pid
    assert done(events)["data"]["ok"] is True
    assert alive(job.pid, job.start_time)
    # Then its GPU: the parent is the user; the zombie holds nothing and does not block the verdict.
    events = run(probe, [target(job.pid, job.start_time, [1]), target(zombie, job.child_start_time, [])], [1])
    assert signals_to(events, job.pid) == ["SIGTERM"] and not signals_to(events, zombie)
    assert gpu_verdict(events, 1)["result"] == "clean"
    assert done(events)["data"]["ok"] is True


def test_a_protected_monitor_is_never_signalled_unless_included(sim_probe):
    probe, sim = sim_probe()
    monitor = sim.spawn("monitor")
    busy = sim.spawn("busy", gpu=0, memory=GiB)
    targets = [target(monitor.pid, monitor.start_time, []), target(busy.pid, busy.start_time, [0])]
    events = run(probe, targets, [0])
    check = of(events, "check", monitor.pid)[0]
    assert check["result"] == "protected" and "monitor" in check["message"]
    assert not signals_to(events, monitor.pid)
    assert verdict(events, monitor.pid)["result"] == "protected"
    assert done(events)["data"]["refused"] == [monitor.pid]
    assert gpu_verdict(events, 0)["result"] == "clean"
    assert alive(monitor.pid, monitor.start_time)
    # The operator may include a monitor explicitly.
    events = run(probe, [target(monitor.pid, monitor.start_time, [])], [], include_protected=[monitor.pid])
    assert signals_to(events, monitor.pid) == ["SIGTERM"]
    assert verdict(events, monitor.pid)["result"] == "exited"


def test_pid_1_the_probe_and_its_ancestors_are_refused_even_when_included(sim_probe):
    """Decided without sending anything: protection() is asked directly."""
    probe, _ = sim_probe()
    everyone = [1, probe.pid, *probe.protected_pids()]
    settings = Settings(make_plan([], [], include_protected=everyone))
    run_ = Run(probe, settings, lambda record: None)
    me = Proc(probe.pid, 0, "", [], "plan")
    assert protection(me, None, run_.probe, run_.plan) == "probe"
    assert protection(Proc(1, 0, "", [], "plan"), None, run_.probe, run_.plan) == "pid-1"
    parent = os.getppid()
    assert protection(Proc(parent, 0, "", [], "plan"), None, run_.probe, run_.plan) == "probe-ancestor"
    kthreadd = 2  # kernel threads are never signalled either
    if Path("/proc/2/stat").exists() and Path("/proc/2/stat").read_text().split()[1] == "(kthreadd)":
        assert protection(Proc(kthreadd, 0, "", [], "plan"), None, run_.probe, run_.plan) == "kernel-thread"


def test_a_reused_pid_is_not_signalled(sim_probe):
    probe, sim = sim_probe()
    job = sim.spawn("busy", gpu=0, memory=GiB)
    # The plan's start time is not the live process's: the PID now names another process.
    events = run(probe, [target(job.pid, job.start_time - 1, [0])], [0], verify_timeout=0.2)
    check = of(events, "check", job.pid)[0]
    assert check["result"] == "pid-reused"
    assert not signals_to(events, job.pid)
    assert verdict(events, job.pid)["result"] == "pid-reused"
    g = gpu_verdict(events, 0)
    assert g["result"] == "held" and g["data"]["held_by"] == [job.pid]
    assert done(events)["data"]["ok"] is False
    assert alive(job.pid, job.start_time)


def test_a_target_that_exited_before_the_plan_has_vanished(sim_probe):
    probe, sim = sim_probe()
    job = sim.spawn("ghost", gpu=0, memory=GiB)  # its parent has exited by now
    events = run(probe, [target(job.pid, job.start_time, [0])], [0])
    assert of(events, "check", job.pid)[0]["result"] == "vanished"
    assert verdict(events, job.pid)["result"] == "vanished"
    assert done(events)["data"]["ok"] is True  # the rescan stopped the child


def test_sigint_first_when_asked(sim_probe):
    probe, sim = sim_probe()
    job = sim.spawn("busy", gpu=0, memory=GiB)
    events = run(probe, [target(job.pid, job.start_time, [0])], [0], signals=["SIGINT", "SIGTERM"])
    assert signals_to(events, job.pid) == ["SIGINT"]
    assert verdict(events, job.pid)["data"]["exit_signal"] == "SIGINT"
    assert done(events)["data"]["ok"] is True


@pytest.mark.parametrize("first", ["SIGHUP", "SIGUSR1"])
def test_a_server_that_exits_on_hup_or_usr1_gets_it_first(sim_probe, first):
    """Started as under `nohup` (SIGHUP and SIGUSR1 ignored by the parent), the job still dies of
    the first signal, as one started from a terminal: the plan stops there, proved gone."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        probe, sim = sim_probe()
        job = sim.spawn("busy", gpu=0, memory=GiB)
    finally:
        signal.signal(signal.SIGHUP, previous)
    events = run(probe, [target(job.pid, job.start_time, [0])], [0], signals=[first, "SIGTERM"])
    assert signals_to(events, job.pid) == [first]
    assert verdict(events, job.pid)["data"]["exit_signal"] == first
    assert done(events)["data"]["ok"] is True


def test_sigint_works_on_a_sim_job_started_with_sigint_ignored(sim_probe):
    """Under `nohup cmd &` every process starts with SIGINT ignored; a simulated job still behaves
    like one started from a terminal (CI ran the suite that way once and this failed)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        probe, sim = sim_probe()
        job = sim.spawn("busy", gpu=0, memory=GiB)
    finally:
        signal.signal(signal.SIGINT, previous)
    events = run(probe, [target(job.pid, job.start_time, [0])], [0], signals=["SIGINT", "SIGTERM"])
    assert signals_to(events, job.pid) == ["SIGINT"]


def test_the_sweep_stops_unattributed_holders(sim_probe):
    probe, sim = sim_probe()
    hidden = sim.spawn("hidden")
    busy = sim.spawn("busy", gpu=1, memory=GiB)
    sweep = [target(hidden.pid, hidden.start_time, [], "unattributed hidden holder")]
    events = run(probe, [target(busy.pid, busy.start_time, [1])], [1], sweep=sweep)
    [rescan] = [e for e in of(events, "rescan") if e["result"] == "found"]
    assert rescan["data"]["sweep"] == [hidden.pid]
    assert verdict(events, hidden.pid)["data"]["origin"] == "sweep"
    assert done(events)["data"]["ok"] is True
    assert not alive(hidden.pid, hidden.start_time)


def test_without_the_sweep_an_unattributed_holder_is_left_alone(sim_probe):
    probe, sim = sim_probe()
    hidden = sim.spawn("hidden")
    busy = sim.spawn("busy", gpu=1, memory=GiB)
    events = run(probe, [target(busy.pid, busy.start_time, [1])], [1])
    assert not signals_to(events, hidden.pid)
    assert done(events)["data"]["ok"] is True  # it holds no memory of GPU 1
    assert alive(hidden.pid, hidden.start_time)


def test_the_kill_fallback_without_pidfd(sim_probe, monkeypatch):
    monkeypatch.setattr(signals, "FORCE_METHOD", "kill")
    probe, sim = sim_probe()
    job = sim.spawn("ignore-term", gpu=0, memory=GiB)
    events = run(probe, [target(job.pid, job.start_time, [0])], [0], term_timeout=0.2)
    assert "no pidfd" in events[0]["message"] and events[0]["data"]["method"] == "kill"
    assert signals_to(events, job.pid) == ["SIGTERM", "SIGKILL"]
    assert done(events)["data"]["ok"] is True


def test_the_syscall_pidfd_path_used_by_python_38(sim_probe, monkeypatch):
    monkeypatch.setattr(signals, "FORCE_METHOD", "pidfd-syscall")
    probe, sim = sim_probe()
    job = sim.spawn("busy", gpu=0, memory=GiB)
    events = run(probe, [target(job.pid, job.start_time, [0])], [0])
    assert events[0]["data"]["method"] == "pidfd-syscall"
    # A pidfd either way: the probe's pin from the scan that listed it, or one opened at the check.
    assert "(pidfd" in of(events, "check", job.pid)[0]["message"]
    assert done(events)["data"]["ok"] is True


def test_the_plan_finishes_even_if_the_app_goes_away(sim_probe):
    probe, sim = sim_probe()
    job = sim.spawn("ignore-term", gpu=0, memory=GiB)
    seen: list[dict[str, Any]] = []

    def emit(record: dict[str, Any]) -> None:
        if record["stage"] == "signal":
            raise BrokenPipeError("the app is gone")
        seen.append(record)

    result = execute(probe, make_plan([target(job.pid, job.start_time, [0])], [0], term_timeout=0.2), emit)
    assert [e["stage"] for e in seen] == ["accepted", "check"]
    assert result is not None and result["data"]["ok"] is True and result["data"]["link_lost"] is True
    assert not alive(job.pid, job.start_time)


# -- refusals -----------------------------------------------------------------------------------


def test_a_read_only_probe_refuses_a_plan(sim_probe):
    probe, sim = sim_probe(read_only=True)
    job = sim.spawn("busy", gpu=0, memory=GiB)
    plan = make_plan([target(job.pid, job.start_time, [0])], [0])
    events: list[dict[str, Any]] = []
    assert execute(probe, plan, events.append) is None
    assert events == [
        {"type": "error", "v": 1, "code": "read-only", "message": events[0]["message"], "plan": plan["id"]}
    ]
    # The same through the probe's line loop, as the app would send it.
    lines: list[dict[str, Any]] = []
    Loop(probe, lines.append, 1.0).handle(json.dumps(plan).encode() + b"\n")
    assert [(r["type"], r["code"], r["plan"]) for r in lines] == [("error", "read-only", plan["id"])]
    assert alive(job.pid, job.start_time)


@pytest.mark.parametrize(
    "change, words",
    [
        ({"id": None}, "'id'"),
        ({"targets": [{"pid": 5}]}, "start_time"),
        ({"targets": [{"pid": True, "start_time": 1}]}, "integer pid"),
        ({"gpus": ["0"]}, "gpus"),
        ({"term_timeout": 0}, "term_timeout"),
        ({"verify_timeout": "10"}, "verify_timeout"),
        ({"gpus": [0, 9]}, "no GPU 9 here (its GPUs: 0)"),
        ({"signals": ["SIGKILL"]}, "signals must be SIGHUP, SIGUSR1, SIGINT, SIGTERM"),
        ({"signals": ["SIGTERM", "SIGINT"]}, "in that order"),
        ({"signals": "SIGTERM"}, "list of signal names"),
        ({"scope": "everything"}, "scope must be one of"),
        ({"scope": "host", "gpus": []}, "names the GPUs it frees"),
        ({"ghosts": [True]}, "ghosts"),
    ],
)
def test_a_malformed_plan_is_refused_before_anything_happens(sim_probe, change, words):
    probe, _ = sim_probe(gpus=1)
    plan = make_plan([], [0])
    plan.update(change)
    events: list[dict[str, Any]] = []
    assert execute(probe, plan, events.append) is None
    [e] = events
    assert e["type"] == "error" and e["code"] == "bad-message" and words in e["message"]


# -- permission denied: an unprivileged probe and a root-owned job ------------------------------

UNPRIVILEGED_RUNNER = textwrap.dedent(
    """
    import json, sys
    from gputui.probe.core import Probe
    from gputui.probe.readers.sim import SimReader
    from gputui.probe.run.reaper import execute

    probe = Probe(SimReader(attach=True, base_dir=sys.argv[1]), hostname="unprivileged")
    hello = probe.start()
    out = []
    try:
        execute(probe, json.loads(sys.argv[2]), out.append)
    finally:
        probe.close()
    print(json.dumps({"hello": hello, "events": out}))
    """
)


def _python_for(uid: int) -> str | None:
    """An interpreter `uid` can run (the venv's may live under /root, which it cannot enter)."""
    for exe in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        if not os.path.exists(exe):
            continue
        try:
            tried = subprocess.run(
                [exe, "-c", "pass"], user=uid, capture_output=True, timeout=30, check=False
            )
        except OSError:
            continue  # e.g. EACCES: the interpreter sits in a directory that user cannot enter
        if tried.returncode == 0:
            return exe
    return None


def test_an_unprivileged_probe_gets_permission_denied_and_says_what_would_allow_it(sim_probe, sim_base):
    if os.geteuid() != 0:
        pytest.skip("needs root: the job must belong to another user than the probe")
    try:
        nobody = pwd.getpwnam("nobody").pw_uid
    except KeyError:
        pytest.skip("no user 'nobody'")
    python = _python_for(nobody)
    if python is None:
        pytest.skip("no Python interpreter the user nobody can run")
    _, sim = sim_probe(gpus=2)
    job = sim.spawn("busy", gpu=1, memory=GiB)  # root's
    # The probe package, where nobody can read it (the checkout may sit under /root).
    code = tempfile.mkdtemp(prefix="gputui-test-probe-", dir=sim_base)
    try:
        os.chmod(code, 0o755)
        shutil.copytree(REPO / "gputui" / "probe", Path(code) / "gputui" / "probe")
        (Path(code) / "gputui" / "__init__.py").write_text("")
        for root, dirs, files in os.walk(code):
            for name in dirs:
                os.chmod(os.path.join(root, name), 0o755)
            for name in files:
                os.chmod(os.path.join(root, name), 0o644)
        plan = make_plan([target(job.pid, job.start_time, [1])], [1], verify_timeout=0.3)
        result = subprocess.run(
            [python, "-c", UNPRIVILEGED_RUNNER, sim.directory, json.dumps(plan)],
            user=nobody,
            env={"PYTHONPATH": code, "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        shutil.rmtree(code, ignore_errors=True)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["hello"]["host"]["uid"] == nobody and report["hello"]["error"] is None
    events = report["events"]
    [denied] = [e for e in of(events, "signal", job.pid) if e["result"] == "permission-denied"]
    allow = denied["data"]["allow"]
    assert "run the probe as root or as user root" in allow and "sudo = true" in allow
    v = verdict(events, job.pid)
    assert v["result"] == "permission-denied" and v["data"]["allow"] == allow
    assert gpu_verdict(events, 1)["result"] == "held"
    d = done(events)
    assert d["data"]["ok"] is False and d["data"]["refused"] == [job.pid]
    assert alive(job.pid, job.start_time)


# -- Python 3.8: the probe's oldest interpreter -------------------------------------------------

PY38_RUNNER = textwrap.dedent(
    """
    import json
    from gputui.probe.core import Probe
    from gputui.probe.readers.sim import SimReader
    from gputui.probe.run.reaper import execute

    sim = SimReader(gpus=1, scenario="empty")
    probe = Probe(sim)
    probe.start()
    try:
        job = sim.spawn("ignore-term", gpu=0, memory=1 << 30)
        plan = {"type": "plan", "v": 1, "id": "py38", "targets": [
            {"pid": job.pid, "start_time": job.start_time, "reason": "t", "gpus": [0]}],
            "gpus": [0], "term_timeout": 0.2, "verify_timeout": 5.0}
        out = []
        execute(probe, plan, out.append)
    finally:
        probe.close()
    print(json.dumps(out))
    """
)


def test_the_engine_on_python_38():
    if not PYTHON38.exists():
        pytest.skip("no Python 3.8 at " + str(PYTHON38))
    result = subprocess.run(
        [str(PYTHON38), "-c", PY38_RUNNER],
        env={"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    events = json.loads(result.stdout)
    # Python 3.8 has no os.pidfd_open: the raw syscalls give the same guarantee.
    assert events[0]["data"]["method"] in ("pidfd-syscall", "kill")
    assert [e["signal"] for e in events if e["stage"] in ("signal", "escalate")] == ["SIGTERM", "SIGKILL"]
    assert events[-1]["data"]["ok"] is True


# -- scope: a kill never reaches past what the operator chose ------------------------------------


def test_one_chosen_worker_is_stopped_and_its_siblings_and_parent_are_not(sim_probe):
    """A launcher on GPU 0 with three workers in its process group: choosing one worker stops that
    worker alone. The rescan sees the siblings (hidden holders of GPU 0) and leaves them alone; the
    verdict is about the chosen process (gone, nothing of its own left listed), not about GPU 0."""
    probe, sim = sim_probe(gpus=2)
    job = sim.spawn("workers", gpu=0, memory=2 * GiB, workers=3)
    (chosen, chosen_start), *siblings = job.workers
    events = run(probe, [target(chosen, chosen_start, [0])], [], scope="processes")
    assert_well_formed(events)
    signalled = {e["pid"] for e in events if e["stage"] in ("signal", "escalate") and e["result"] == "sent"}
    assert signalled == {chosen}
    for pid, start in [(job.pid, job.start_time), *siblings]:
        assert alive(pid, start)
    [rescan] = of(events, "rescan")
    assert sorted(rescan["data"]["untouched"]) == sorted([job.pid, *(p for p, _ in siblings)])
    assert rescan["data"]["tied"] == [] and rescan["data"]["attributed"] == []
    g = gpu_verdict(events, 0)
    assert g["result"] == "released" and set(g["data"]["others"]) >= {job.pid}
    d = done(events)
    assert d["result"] == "stopped" and d["data"]["ok"] is True and d["data"]["scope"] == "processes"
    # Its parent lives and has not reaped it yet: exited, or a zombie (which holds nothing).
    assert verdict(events, chosen)["result"] in ("exited", "zombie")


def test_the_launcher_of_the_workers_frees_gpu_0_when_the_gpu_is_the_scope(sim_probe):
    probe, sim = sim_probe(gpus=2)
    job = sim.spawn("workers", gpu=0, memory=2 * GiB, workers=3)
    other = sim.spawn("busy", gpu=1, memory=GiB)
    targets = [target(job.pid, job.start_time, [0])] + [target(p, s, [0]) for p, s in job.workers]
    events = run(probe, targets, [0], scope="gpus")
    assert gpu_verdict(events, 0)["result"] == "clean"
    assert done(events)["result"] == "clean" and done(events)["data"]["ok"] is True
    assert all(not alive(p, s) for p, s in job.processes())
    assert alive(other.pid, other.start_time) and not signals_to(events, other.pid)


def test_a_chosen_parent_brings_the_workers_that_keep_its_memory(sim_probe):
    """The parent alone is chosen: once it is dead, NVML lists it as a ghost and its workers keep the
    memory; they are tied to a target (its process group), so the rescan stops them too."""
    probe, sim = sim_probe(gpus=1)
    job = sim.spawn("workers", gpu=0, memory=2 * GiB, workers=2)
    bystander = sim.spawn("idle", gpu=0, memory=GiB)
    events = run(probe, [target(job.pid, job.start_time, [0])], [], scope="processes")
    [first, *_] = of(events, "rescan")
    assert sorted(first["data"]["tied"]) == sorted(p for p, _ in job.workers)
    assert bystander.pid in first["data"]["untouched"]
    assert all(not alive(p, s) for p, s in job.processes())
    assert alive(bystander.pid, bystander.start_time) and not signals_to(events, bystander.pid)
    g = gpu_verdict(events, 0)
    assert g["result"] == "released" and g["data"]["others"] == [bystander.pid]
    assert g["data"]["memory_after"] == GiB
    assert done(events)["data"]["ok"] is True


def test_a_chosen_ghost_has_its_tied_holder_stopped_and_its_memory_released(sim_probe):
    """The operator names a ghost (a dead PID NVML lists): its data-loader child, tied to it by its
    process group, is what the rescan may stop; the proof is NVML no longer listing the ghost."""
    probe, sim = sim_probe(gpus=1)
    job = sim.spawn("ghost", gpu=0, memory=GiB)
    events = run(probe, [], [], scope="processes", ghosts=[job.pid])
    [rescan, *_] = of(events, "rescan")
    assert rescan["data"]["tied"] == [job.child_pid]
    assert not alive(job.child_pid, job.child_start_time)
    g = gpu_verdict(events, 0)
    assert g["result"] == "released" and g["data"]["still_listed"] == []
    assert done(events)["result"] == "stopped" and done(events)["data"]["ok"] is True


def test_a_ghost_whose_memory_stays_listed_is_not_stopped(sim_probe, monkeypatch):
    monkeypatch.setattr(reaper, "MAX_ROUNDS", 0)  # no rescan: the holder it would stop stays
    probe, sim = sim_probe(gpus=1)
    job = sim.spawn("ghost", gpu=0, memory=GiB)
    events = run(probe, [], [], scope="processes", ghosts=[job.pid], verify_timeout=0.3)
    g = gpu_verdict(events, 0)
    assert g["result"] == "still-listed" and g["data"]["still_listed"] == [job.pid]
    assert g["data"]["suspects"] == [job.child_pid]
    assert f"suspected holders: {job.child_pid}" in g["message"]
    assert done(events)["result"] == "not-stopped" and done(events)["data"]["ok"] is False
    assert alive(job.child_pid, job.child_start_time)


# -- out of file descriptors ---------------------------------------------------------------------

FD_RUNNER = textwrap.dedent(
    """
    import json, os, resource, subprocess, sys
    from gputui.probe.core import Probe
    from gputui.probe.readers.sim import SimReader, open_devices, start_time
    from gputui.probe.run.reaper import execute

    n, headroom, sampled = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "sample"
    reader = SimReader(gpus=1, scenario="empty")
    probe = Probe(reader, hostname="fd-test")
    probe.start()
    held = open_devices(reader.directory)
    # n holders of the device files: each a `sleep` that inherited them (unattributed hidden holders)
    kids = [subprocess.Popen(["sleep", "120"], pass_fds=held, close_fds=True) for _ in range(n)]
    targets = [{"pid": k.pid, "start_time": start_time(k.pid), "reason": "t", "gpus": []} for k in kids]
    for fd in held:
        os.close(fd)
    open_now = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_now + headroom, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    if sampled:  # the operator's sample: the probe pins what it lists, within its share of the limit
        probe.sample(full=True)
    events = []
    plan = {"id": "fd", "scope": "processes", "targets": targets, "gpus": [], "term_timeout": 5, "verify_timeout": 5}
    execute(probe, plan, events.append)
    alive = [k.pid for k in kids if k.poll() is None]
    for k in kids:  # ours: end and reap whatever is left
        if k.poll() is None:
            k.kill()
        k.wait()
    probe.close()
    verdicts = [e for e in events if e["stage"] == "verdict" and e["gpu"] is None]
    print(json.dumps({"results": sorted(e["result"] for e in verdicts), "alive_after": alive,
                      "ok": events[-1]["data"].get("ok"), "methods": sorted({e["message"].split(": ", 1)[-1]
                      for e in events if e["stage"] == "check"})}))
    """
)


@pytest.mark.parametrize("headroom,sampled", [(100, False), (100, True), (700, True)])
def test_a_plan_larger_than_the_descriptor_limit_checks_and_stops_every_target(headroom, sampled):
    """Issue 13 #4: 1,100 targets under a 1,024 soft limit: 92 live processes that were never
    signalled got `vanished` and the plan said clean. Here 300 targets under a limit `headroom` above
    what is open: pidfds are kept within the limit (a reserve stays for /proc), the rest are
    identified by start time; every one is signalled and gone, none taken for gone unchecked. After
    a sample, the probe's pins (issue 17 #9) take their share of the limit first: pinned, opened at
    the check, or by start time, every target is still checked and stopped."""
    result = subprocess.run(
        [sys.executable, "-c", FD_RUNNER, "300", str(headroom), "sample" if sampled else "plan"],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout)
    assert out["alive_after"] == [], out
    assert set(out["results"]) <= {"exited", "zombie"} and len(out["results"]) == 300, out["results"][:5]
    assert out["ok"] is True
    if headroom == 100:
        assert any("start time" in m for m in out["methods"]) and any("pidfd" in m for m in out["methods"])
    else:  # room for some pins, and for a pidfd at the check for the rest
        assert any("pinned" in m for m in out["methods"]), out["methods"]
        assert any("confirmed (pidfd)" in m for m in out["methods"]), out["methods"]

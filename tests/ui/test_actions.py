"""The kill flow's plain parts: selection by (pid, start time), progress words, verdict words."""

from __future__ import annotations

from gputui.kill.plan import plan_for_gpus, plan_for_pids
from gputui.model import Event, GpuVerdict, PlanVerdict, Proc, Sample
from gputui.text.words import gpu_words, verdict_summary
from gputui.ui.selection import Selection
from gputui.ui.spinner import Progress


def proc(pid: int, start: int | None = 100, command: tuple[str, ...] = ("python", "train.py")) -> Proc:
    return Proc(pid=pid, start_time=start, kind="user", command=command, gpus=(0,), gpu_memory={0: 1 << 30})


def sample(*procs: Proc) -> Sample:
    from gputui.model import Gpu

    return Sample(
        seq=1, time=0.0, gpus=(Gpu(index=0, memory_used=1 << 30, memory_total=8 << 30),), processes=procs
    )


def event(stage: str, result: str | None, pid: int | None = None, **kw: object) -> Event:
    return Event(plan="p1", time=0.0, stage=stage, result=result, pid=pid, **kw)  # type: ignore[arg-type]


def test_selection_is_by_pid_and_start_time_and_drops_what_left() -> None:
    sel = Selection()
    a, b = proc(10), proc(11, command=("/opt/venv/bin/python", "-S", "/tmp/" + "x" * 40 + "/serve.py"))
    assert sel.toggle("h", a) and sel.toggle("h", b)
    assert sel.keys("h") == {(10, 100), (11, 100)} and sel.count() == 2 and sel.hosts() == ["h"]
    # PID 10 now names another process (new start time); PID 11 is unchanged.
    gone = sel.prune("h", sample(proc(10, start=200), b))
    assert [g.label for g in gone] == ["10 python train.py"]
    assert sel.keys("h") == {(11, 100)}
    assert sel.prune("h", None) == []  # no sample (host down): keep the selection
    assert not sel.toggle("h", b) and not sel
    assert sel.prune("other", sample()) == []


def test_progress_says_what_the_plan_waits_for() -> None:
    plan = plan_for_gpus(sample(proc(10), proc(11)), [0], host="gpu-a")
    p = Progress("gpu-a", plan, started=0.0, since=0.0)
    assert p.line(0.5) == "gpu-a: sending the plan (0.5 s)"
    p.on_event(event("accepted", "accepted"), now=1.0)
    p.on_event(event("signal", "sent", 10, signal="SIGTERM"), now=1.0)
    p.on_event(event("signal", "sent", 11, signal="SIGTERM"), now=1.0)
    assert p.line(2.25) == "gpu-a: waiting for 2 processes to exit after SIGTERM (1.2 s of 5 s)"
    p.on_event(event("wait", "exited", 10), now=2.5)
    assert p.line(2.5) == "gpu-a: waiting for 1 process to exit after SIGTERM (1.5 s of 5 s)"
    p.on_event(event("wait", "timeout"), now=6.0)
    p.on_event(event("escalate", "sent", 11, signal="SIGKILL"), now=6.0)
    assert p.line(6.5) == "gpu-a: waiting for 1 process to exit after SIGKILL (0.5 s of 2 s)"
    p.on_event(event("verify", "polling"), now=7.0)
    assert p.line(7.1) == "gpu-a: verifying GPU 0 clean (NVML polled) (0.1 s of 10 s)"
    # A plan of processes says what it verifies: the targets, not the GPU.
    q = Progress("gpu-a", plan_for_pids(sample(proc(10)), [10], host="gpu-a"), started=0.0, since=0.0)
    q.on_event(event("verify", "polling"), now=1.0)
    assert (
        q.line(1.0)
        == "gpu-a: verifying the targets gone, their memory released (NVML polled) (0.0 s of 10 s)"
    )


def test_verdict_words() -> None:
    done = Event(
        plan="p1",
        time=0.0,
        stage="done",
        result="not-clean",
        data={
            "ok": False,
            "elapsed_ms": 5123.4,
            "gpus": {
                "1": {"result": "held", "held_by": [7, 8]},
                "0": {"result": "clean"},
                "2": {"result": "ghost-memory", "ghosts": [5], "suspects": []},
            },
            "processes": [
                {"pid": 7, "result": "exited"},
                {"pid": 8, "result": "exited"},
                {"pid": 9, "result": "survived"},
            ],
        },
    )
    verdict = PlanVerdict.from_event(done)
    assert not verdict.ok
    assert verdict_summary(verdict) == (
        "NOT clean in 5.1 s · GPU 0 clean; GPU 1 held by 7, 8; "
        "GPU 2 ghost-memory: NVML lists 5 (dead); suspected holders: none found · 2 exited, 1 survived"
    )
    lost = Event(plan="p1", time=0.0, stage="done", result="outcome-unknown", message="link \x1b lost")
    assert verdict_summary(PlanVerdict.from_event(lost)) == "outcome unknown: link \\e lost"
    assert gpu_words(GpuVerdict(3, "clean")) == "GPU 3 clean"
    shared = GpuVerdict(0, "released", others=(7566,))
    assert gpu_words(shared) == "GPU 0 released: still used by 7566 (not in the plan, left alone)"
    stopped = Event(
        plan="p2", time=0.0, stage="done", result="stopped",
        data={"ok": True, "elapsed_ms": 180.0, "gpus": {"0": {"result": "released", "others": [7566]}},
              "processes": [{"pid": 10, "result": "exited"}]},
    )  # fmt: skip
    assert verdict_summary(PlanVerdict.from_event(stopped)) == (
        "stopped, memory released in 180 ms · GPU 0 released: still used by 7566 (not in the plan, left alone) "
        "· 1 exited"
    )

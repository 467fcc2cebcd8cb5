"""The kill flow's plain parts: selection by (pid, start time), progress words, verdict words."""

from __future__ import annotations

from gputui.model import Event, Proc, Sample
from gputui.plan import plan_for_gpus
from gputui.ui.actions import Progress, gpu_words, verdict_summary
from gputui.ui.selection import Selection


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
    assert p.line(7.1) == "gpu-a: verifying GPU 0 (NVML polled) (0.1 s of 10 s)"


def test_verdict_words() -> None:
    done = Event(
        plan="p1",
        time=0.0,
        stage="done",
        result="not-clean",
        data={
            "clean": False,
            "elapsed_ms": 5123.4,
            "gpus": {
                "1": {"result": "held", "held_by": [7, 8]},
                "0": {"result": "clean"},
                "2": {"result": "ghost-memory", "ghosts": [5], "suspects": []},
            },
            "processes": [{"result": "exited"}, {"result": "exited"}, {"result": "survived"}],
        },
    )
    clean, text = verdict_summary(done)
    assert not clean
    assert text == (
        "NOT clean in 5123 ms · GPU0 clean; GPU1 held by 7, 8; "
        "GPU2 ghost memory (NVML lists 5; suspects none found); 2 exited, 1 survived"
    )
    lost = Event(plan="p1", time=0.0, stage="done", result="outcome-unknown", message="link \x1b lost")
    assert verdict_summary(lost) == (False, "outcome unknown: link \\e lost")
    assert gpu_words(3, {"result": "clean"}) == "GPU3 clean"

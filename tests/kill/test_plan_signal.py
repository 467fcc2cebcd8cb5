"""Signal plans (the process detail's `k`; issue 19, item 12) as pure functions over hand-made
samples (gputui/kill/plan/signal.py `plan_for_signal`): who may get a signal by name, who is refused and why,
the record the probe gets. The probe's side: tests/probe/test_reaper_signal.py; the dashboard's:
tests/ui/test_signal.py."""

from __future__ import annotations

import pytest

from gputui.kill.operate import status_of
from gputui.kill.plan import PlanError, PlanOptions, plan_for_signal
from gputui.model import Event, PlanVerdict, done_event
from gputui.probe.common import SIGNAL_CHOICES, signal_deadline
from gputui.probe.run.orders import SignalSettings
from gputui.text.words import verdict_summary
from tests.support.samples import launcher_sample, sample

OPTS = PlanOptions(operator="alice", plan_id="s1")


def test_a_gpu_process_gets_one_signal_and_nothing_else() -> None:
    plan = plan_for_signal(sample(), 100, 1100, "SIGSTOP", host="h", options=OPTS)
    assert [t.pid for t in plan.targets] == [100] and not plan.excluded and not plan.is_empty
    assert plan.title == "Send SIGSTOP to 100 (python job100.py)" and plan.kind_title == "Send SIGSTOP"
    assert plan.signals == ("SIGSTOP",) and not plan.cleans_gpus and plan.gpus == ()
    assert plan.stages[1] == "SIGSTOP, once" and "no SIGKILL" in plan.stages[-1]
    assert plan.deadline == plan.silence_limit == signal_deadline()
    wire = plan.to_wire()
    assert wire == {
        "type": "signal",
        "v": 1,
        "id": "s1",
        "operator": "alice",
        "signal": "SIGSTOP",
        "targets": [{"pid": 100, "start_time": 1100, "reason": "chosen; uses GPU 0: 10.0 GiB", "gpus": [0]}],
    }
    assert SignalSettings(wire).signal == "SIGSTOP"  # what the probe takes
    assert plan.describe()["signal"] == "SIGSTOP"


@pytest.mark.parametrize(
    "pid, start, words",
    [
        (105, 1105, "a GPU monitor: protected"),
        (107, 1107, "the gputui probe itself"),
        (106, 1106, "zombie"),
        (102, None, "already dead"),
        (100, 1101, "its PID names another process now"),
        (999, 1999, "not in the latest scan"),
    ],
)
def test_what_a_kill_refuses_a_signal_refuses(pid: int, start: int | None, words: str) -> None:
    plan = plan_for_signal(sample(), pid, start, "SIGKILL", host="h", options=OPTS)
    assert not plan.targets and plan.is_empty and not plan.includable  # a monitor: not even with p
    [left] = plan.excluded
    assert words in left.why, left.why
    assert [w.kind for w in plan.warnings][-1] == "nothing"


def test_a_jobs_launcher_may_be_signalled_but_not_the_shell_above_it() -> None:
    jobs = launcher_sample()
    launcher = plan_for_signal(jobs, 200, 1200, "SIGSTOP", host="h", options=OPTS)
    assert [t.pid for t in launcher.targets] == [200] and "root of job 200" in launcher.targets[0].why
    agent = plan_for_signal(jobs, 201, 1201, "SIGCONT", host="h", options=OPTS)
    assert [t.pid for t in agent.targets] == [201]
    assert "role" not in agent.to_wire()["targets"][0]  # the probe checks it as a root: no GPU needed
    shell = plan_for_signal(jobs, 10, 1010, "SIGKILL", host="h", options=OPTS)
    assert not shell.targets and shell.excluded[0].protected == "session"


def test_only_the_signals_it_knows() -> None:
    with pytest.raises(PlanError, match="one of SIGTERM"):
        plan_for_signal(sample(), 100, 1100, "SIGSEGV", host="h", options=OPTS)
    assert "SIGSTOP" in SIGNAL_CHOICES and "SIGCONT" in SIGNAL_CHOICES


def test_its_verdicts() -> None:
    data = {"ok": True, "scope": "signal", "signal": "SIGSTOP", "gpus": {}, "processes": []}
    event = Event(
        plan="s1", time=0.0, stage="done", result="signalled", message="signal s1: SIGSTOP sent", data=data
    )
    sent = PlanVerdict.from_event(event)
    assert sent.ok and status_of(sent) == ("signalled", None)
    assert verdict_summary(sent).startswith("SIGSTOP sent · ")
    refused = PlanVerdict.from_event(done_event("s1", "not-signalled", "signal s1: SIGKILL NOT sent"))
    assert not refused.ok and status_of(refused) == ("not-signalled", None)

"""What a start reports of an earlier run's actions, as the audit log says it (gputui/kill/unfinished.py):
an action with no `done` line "never recorded an outcome"; one whose `done` says outcome-unknown (Ctrl+C
in `gputui clean`, the dashboard's hard exit) is reported as outcome unknown, with the reason that line
gives, never as "never recorded". Real logs written by ActionLog in tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

from gputui.kill.auditlog import ActionLog, unfinished, unfinished_headline
from gputui.kill.plan import PlanOptions, plan_for_gpus
from tests.support.samples import sample


def _plan(path: Path, plan_id: str, host: str = "gpu-a", last_words: str | None = None) -> None:
    plan = plan_for_gpus(sample(), [0], host=host, options=PlanOptions(operator="alice", plan_id=plan_id))
    with ActionLog(path, operator="alice") as log:
        log.write_plan(plan)
        if last_words is not None:
            log.last_words(host, plan_id, last_words)


def test_a_done_line_with_the_outcome_unknown_is_reported_as_the_log_says(tmp_path: Path) -> None:
    path = tmp_path / "actions.jsonl"
    _plan(path, "act1", last_words="interrupted (Ctrl+C) after SIGTERM to 100")
    [action] = unfinished(path)
    said = action.describe()
    assert not action.never_recorded
    assert "action act1 on gpu-a by alice" in said
    assert "outcome unknown" in said and "never recorded" not in said, said
    assert "interrupted (Ctrl+C) after SIGTERM to 100" in said, said
    headline = unfinished_headline([action])
    assert "outcome unknown" in headline and "never recorded" not in headline, headline


def test_an_action_without_a_done_line_never_recorded_an_outcome(tmp_path: Path) -> None:
    path = tmp_path / "actions.jsonl"
    _plan(path, "act1")
    [action] = unfinished(path)
    assert action.never_recorded
    assert "outcome never recorded (last stage: plan)" in action.describe()
    assert "never recorded an outcome" in unfinished_headline([action])


def test_both_kinds_at_once_are_counted_apart(tmp_path: Path) -> None:
    path = tmp_path / "actions.jsonl"
    _plan(path, "act1")
    _plan(path, "act2", last_words="the hard exit")
    _plan(path, "act3", last_words="the hard exit")
    actions = unfinished(path)
    assert [a.never_recorded for a in actions] == [True, False, False]
    headline = unfinished_headline(actions)
    assert headline.startswith("3 kill actions")
    assert "1 never recorded one" in headline and "2 recorded it as unknown" in headline, headline


def test_a_forged_reason_is_shown_escaped(tmp_path: Path) -> None:
    path = tmp_path / "actions.jsonl"
    _plan(path, "act1")
    forged = {"v": 1, "kind": "done", "action": "act1", "time": 2.0, "host": "gpu-a\x1b[2J",
              "stage": "done", "result": "outcome-unknown", "message": "bye\x1b]0;owned\x07\nnext"}  # fmt: skip
    with open(path, "a") as f:
        f.write(json.dumps(forged) + "\n")
    [action] = unfinished(path)
    said = action.describe()
    assert "\x1b" not in said and "\x07" not in said and "\n" not in said
    assert "bye\\e]0;owned\\x07\\nnext" in said, said


def test_a_done_line_without_a_reason_still_says_the_outcome_is_unknown(tmp_path: Path) -> None:
    path = tmp_path / "actions.jsonl"
    _plan(path, "act1")
    with open(path, "a") as f:
        f.write(json.dumps({"v": 1, "kind": "done", "action": "act1", "result": "outcome-unknown"}) + "\n")
    [action] = unfinished(path)
    assert not action.never_recorded
    assert "outcome unknown" in action.describe() and "never recorded" not in action.describe()

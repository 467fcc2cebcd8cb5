"""The dashboard's report at start of what an earlier run left without an outcome, as the audit log
says it: a plan whose `done` line says outcome-unknown (a `gputui clean` stopped by Ctrl+C) is
"outcome unknown" with the reason that line gives, not "never recorded an outcome"; a plan with no
`done` line still is. The app replays a recorded host; the log is a real file in tmp_path."""

from __future__ import annotations

from pathlib import Path

from gputui.kill.auditlog import ActionLog, read_records, unfinished
from gputui.kill.plan import plan_for_gpus
from gputui.model import Sample
from gputui.ui import GpuTuiApp
from tests.support.apps import build_app, recording
from tests.support.pilot import log_text, main_of, redrawn, screen_text, settle, wait_for


def notes(app: GpuTuiApp) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


def _write_plan(log: Path, gpu: int, last_words: str | None) -> str:
    record = next(r for r in reversed(recording("demo-a")) if r["type"] == "sample")
    plan = plan_for_gpus(Sample.from_wire(record), [gpu], host="demo-a")
    with ActionLog(log, operator="root") as audit:
        audit.write_plan(plan)
        if last_words is not None:
            audit.last_words("demo-a", plan.id, last_words)
    return plan.id


async def test_an_outcome_unknown_done_line_is_reported_as_the_log_says(tmp_path: Path) -> None:
    log = tmp_path / "actions.jsonl"
    plan = _write_plan(log, 2, "interrupted (Ctrl+C) after SIGTERM to 4242")
    app = build_app(("demo-a",), log_path=log)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        main = main_of(app)
        await wait_for(pilot, lambda: "UNFINISHED" in log_text(main))
        await redrawn(pilot)
        text = log_text(main)
        assert f"UNFINISHED action {plan} on demo-a" in text
        assert "outcome unknown" in text and "interrupted (Ctrl+C) after SIGTERM to 4242" in text, text
        assert "never recorded" not in text
        said = notes(app)
        assert any("outcome unknown" in n for n in said), said
        assert not any("never recorded" in n for n in said), said
        assert "never recorded" not in screen_text(app)
    assert unfinished(log) == []  # reported once
    assert read_records(log)[0][-1]["kind"] == "reported"


async def test_a_plan_without_a_done_line_and_one_with_the_outcome_unknown_are_told_apart(
    tmp_path: Path,
) -> None:
    log = tmp_path / "actions.jsonl"
    silent = _write_plan(log, 2, None)
    told = _write_plan(log, 3, "the hard exit")
    app = build_app(("demo-a",), log_path=log)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        main = main_of(app)
        await wait_for(pilot, lambda: log_text(main).count("UNFINISHED") == 2)
        text = log_text(main)
        assert f"action {silent} on demo-a" in text and f"action {told} on demo-a" in text
        said = " ".join(notes(app))
        assert "1 never recorded one" in said and "1 recorded it as unknown" in said, said

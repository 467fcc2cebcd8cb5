"""Words and units (issue 12, defect 6): GiB named as such, one way to write zero, plurals, one
notation for keys (`ctrl+p`, `enter`) in the help and the footer, the help's wrapped lines indented."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from gputui.ui.screens.help import SECTIONS
from tests.support.apps import build_app, recording
from tests.support.pilot import redrawn, screen_text, settle


def one_gpu_records() -> list[dict[str, Any]]:
    """demo-a with only its GPU 0 (and the processes on it, or on none)."""
    records = copy.deepcopy(list(recording("demo-a")))
    for record in records:
        if record["type"] == "sample":
            record["gpus"] = record["gpus"][:1]
            record["processes"] = [p for p in record["processes"] if set(p["gpus"]) <= {0}]
            for p in record["processes"]:
                p["gpu_memory"] = {k: v for k, v in p["gpu_memory"].items() if k == "0"}
    return records


async def test_one_is_singular() -> None:
    app = build_app(("demo-a",), records={"demo-a": one_gpu_records()})
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = app._main
        main.select_host(None)  # "All hosts", even with one
        await redrawn(pilot)
        text = screen_text(app)
        assert "on 1 host," in text and "1 hosts" not in text
        assert "1 host: " in text.splitlines()[0] and "1 GPU:" in text.splitlines()[0]
        main.select_host("demo-a")
        await redrawn(pilot)
        text = screen_text(app)
        assert "1 GPU, 0 free" in text and "1 GPUs" not in text


@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_units_are_named(size: tuple[int, int]) -> None:
    app = build_app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        app._main.select_host("demo-a")
        await redrawn(pilot)
        text = screen_text(app)
        assert not re.search(r"\d[GMK]\b", text), text  # no bare "118G": GiB and MiB say so
        assert re.search(r"\b\d+/140 GiB\b", text) and "562 GiB" in text  # a GPU's used/total, the host's


async def test_keys_are_written_one_way() -> None:
    app = build_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert "ctrl+p" in screen_text(app).splitlines()[-1]  # the footer, as the help writes it
        await pilot.press("question_mark")
        await pilot.pause()
        text = app.screen.query_one("#help-body").plain(200)
        assert not re.search(r"\^[a-z]", text) and "⏎" not in text
        assert re.search(r"ctrl\+q, ctrl\+c +quit", text)
        assert "enter" in text and "ctrl+k" in text


@pytest.mark.parametrize("width", [60, 80])
async def test_the_help_wraps_under_its_column(width: int) -> None:
    app = build_app()
    async with app.run_test(size=(width, 24)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        body = app.screen.query_one("#help-body")
        lines = body.plain().splitlines()
        mouse = next(i for i, line in enumerate(lines) if line.strip().startswith("mouse"))
        column = lines[mouse].index("click")
        assert lines[mouse + 1][:column].strip() == "" and lines[mouse + 1][column:].strip()
        # Every line of a section is indented, wrapped ones too: only titles start at the edge.
        for line in lines:
            if line.strip() and not line.startswith(" "):
                assert line.rstrip() in TITLES, line


TITLES = {
    *(name for name, _ in SECTIONS),
    "Kinds of processes",
    "MIG and MPS",
    "Jobs",
    "esc, q or ? closes this screen",
    "Read-only: gputui offers no way to signal a process.",
}

"""The README's screenshots come from the demo (issue 12, defect 8): scripts/screenshots drives the
recorded demo without the test fixture's hostile process (a name that is Rich markup, a command line
with ESC and BEL bytes), which stays in the snapshot tests; the committed SVGs are its output."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.apps import HOSTS, recording
from tests.support.scenes import JOBS_HOST, THEMES, demo_records

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "screenshots"
HOSTILE = ("mallory", "title=", "bold red", "ding")
# Whole words only: "ding" is also the end of "pending", which a GPU view shows.
HOSTILE_WORD = re.compile("|".join(rf"(?<![A-Za-z]){re.escape(w)}(?![A-Za-z])" for w in HOSTILE))


def readme_shots() -> list[Path]:
    readme = (ROOT / "README.md").read_text()
    return [ROOT / p for p in re.findall(r"\]\((screenshots/[^)]+\.svg)\)", readme)]


def test_the_readme_shows_screenshots_of_the_demo() -> None:
    shots = readme_shots()
    assert shots, "the README shows no screenshot"
    for shot in shots:
        assert shot.exists(), shot
        text = shot.read_text()
        found = HOSTILE_WORD.search(text)
        assert found is None, f"{shot.name} shows the test fixture ({found and found.group()!r})"
        # The demo (gputui --demo), or a sim scenario a config names (the jobs view: "jobs").
        assert "demo-a" in text or JOBS_HOST in text


@pytest.mark.parametrize("theme", THEMES)
def test_every_committed_scene_screenshot_is_of_the_demo(theme: str) -> None:
    for path in SHOTS.glob(f"*-{theme.removeprefix('gputui-')}.svg"):
        text = path.read_text()
        assert HOSTILE_WORD.search(text) is None, f"{path.name} shows the test fixture"


def test_scenes_for_the_readme_leave_the_fixture_out() -> None:
    for name in HOSTS:
        kept = {p["pid"] for r in demo_records(name) if r["type"] == "sample" for p in r["processes"]}
        every = {p["pid"] for r in recording(name) if r["type"] == "sample" for p in r["processes"]}
        assert kept == every - {66666}

"""`scripts/test --quick` leaves out exactly the tests tests/slow.txt lists, and the list names tests
that exist (a renamed or removed test must not stay in it, silently skipping nothing)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import REPO

SLOW = REPO / "tests" / "slow.txt"


def collected(*args: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         *args, "tests"],
        capture_output=True, text=True, cwd=REPO, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return {line for line in result.stdout.splitlines() if "::" in line}


@pytest.mark.timeout(660)  # two collections of the whole suite, each in a fresh interpreter: slow when busy
def test_quick_leaves_out_the_listed_tests_and_only_those() -> None:
    listed = {
        line.strip() for line in SLOW.read_text().splitlines() if line.strip() and not line.startswith("#")
    }
    whole = collected()
    quick = collected("--quick")
    assert listed - whole == set(), "tests/slow.txt names tests that no longer exist: run scripts/slow-tests"
    assert whole - quick == listed
    assert quick and quick <= whole

"""Where things are: the checkout the tests run from (what a subprocess gets on PYTHONPATH and as its
working directory) and the recorded fixtures (tests/fixtures)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"

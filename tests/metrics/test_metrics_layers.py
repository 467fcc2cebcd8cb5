"""Inside gputui.views and its metrics package, layers hold by contract (pyproject.toml): each family
group's collector uses only what every collector shares, never another group's module; the views use
the filter and readiness, never the other way. Each seeded wrong import below must break the contract
named beside it, or it has rotted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.seeding import lint_with_seed

SEEDS = {
    "the holders' collector imports the host's": (
        "gputui/views/metrics/holders.py",
        "import gputui.views.metrics.host",
        "Metrics layers",
    ),
    "what collectors share imports a collector": (
        "gputui/views/metrics/scrape.py",
        "import gputui.views.metrics.gpu",
        "Metrics layers",
    ),
    "readiness imports the metrics": (
        "gputui/views/readiness.py",
        "import gputui.views.metrics",
        "Views layers",
    ),
}


@pytest.mark.parametrize("seed", SEEDS.values(), ids=list(SEEDS))
def test_each_seeded_wrong_import_breaks_the_views_contracts(
    tmp_path: Path, seed: tuple[str, str, str]
) -> None:
    out = lint_with_seed(tmp_path, seed[0], seed[1])
    assert seed[2] in out and "BROKEN" in out, out

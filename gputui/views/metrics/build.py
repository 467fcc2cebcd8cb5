"""The build family: which gputui serves the scrape."""

from __future__ import annotations

from prometheus_client.core import InfoMetricFamily, Metric

from ... import __version__
from .scrape import Scrape, collector


@collector("build")
def build_families(scrape: Scrape) -> list[Metric]:
    return [InfoMetricFamily("gputui_build", "gputui's version.", value={"version": __version__})]

"""The build family: which gputui serves the scrape."""

from __future__ import annotations

from ... import __version__
from .scrape import Family, Scrape, collector, info


@collector("build")
def build_families(scrape: Scrape) -> list[Family]:
    build = info("gputui_build", "gputui's version.")
    build.add_metric((), {"version": __version__})
    return [build]
